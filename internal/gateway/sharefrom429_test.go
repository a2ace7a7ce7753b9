package gateway

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// At slow calls a gateway that has no exact reading of its share yet
// (every update at the top or a 429) takes it from a 429's reading, u ÷ ρ,
// counted in requests; with more than shareTopHold of the key it then holds
// at the top instead of probing into the others' room. Before, its share
// stayed unknown (0), and the top probe ran unscaled.
func TestKeyShareShareFrom429(t *testing.T) {
	t0 := testEpoch
	in, _, add, tau := slowShareIn()
	s := keyShare{frac: 0.8, anchor: shareReading{at: t0, f: [2]float64{0.5}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{1}}
	// 16 a second over 5 s, the last one refused: the bucket went from
	// half full to empty, ρ = 1 + 0.5 ÷ 5 = 1.1, u = 79 ÷ 5 ÷ 20 = 0.79.
	for i := 1; i <= 80; i++ {
		s.sent(t0.Add(time.Duration(i) * 62500 * time.Microsecond))
	}
	t1 := t0.Add(5 * time.Second)
	s.refuse(t1)
	s.held(t0.Add(time.Second))
	in.now = t1
	s.reading(t1, bucket1s(0), true, in)
	rho, u := 1.1, 0.79
	pace := 79.0 / 5 * (1 + shareGain*(tau/rho-1)) // no exact share yet: no yield
	if got := s.frac * in.full; math.Abs(got-pace) > 1e-9 {
		t.Fatalf("the 429: pace %.4f, want %.4f", got, pace)
	}
	// The next update finds the bucket at its top: with 0.72 of the key
	// the gateway holds (the additive step only), it does not probe.
	for i := 1; i <= 50; i++ {
		s.sent(t1.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	s.held(t1.Add(time.Second))
	t2 := t1.Add(5 * time.Second)
	in.now = t2.Add(in.latency)
	s.reading(t2, bucket1s(0.95), false, in)
	if got, want := s.frac*in.full, pace+add; math.Abs(got-want) > 1e-9 {
		t.Fatalf("at the top with %.2f of the key: pace %.4f, want %.4f (held, not probing; share read %.4f)", u/rho, got, want, s.ownShare)
	}
	if want := u / rho; math.Abs(s.ownShare-want) > 1e-9 {
		t.Fatalf("the share is %.4f, want the 429's u ÷ ρ = %.4f", s.ownShare, want)
	}
}

// As TestKeyShare429OnASliver, but the pace's first request got through
// and the next was refused: counted in requests, the sliver's rate (one
// request in 0.8 s) is not what the pace gets through either, and the
// whole span back is counted. Before, only a sliver with nothing got
// through was; the joiner fell to 1.2 a second, not 3.3.
func TestKeyShare429OnASliverWithOneThrough(t *testing.T) {
	s, in, at := longProbeEndedBy429(t)
	s.sent(at.Add(300 * time.Millisecond)) // the pace's first request: through
	s.held(at.Add(300 * time.Millisecond)) // the next waited for the pace
	at = at.Add(800 * time.Millisecond)    // its second: 429 at once
	s.sent(at)
	s.refuse(at)
	in.now = at
	s.reading(at, bucket1s(0), true, in)
	paceFromSpanBack(t, &s, in, at, 17, fmt.Sprintf("a 429 0.8 s into the pace, one request through (the sliver's own rate is %.2f)", 1/0.8))
}
