package gateway

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// bucket1s is a reading of a 1 200 RPM bucket enforced per second (20
// requests): f full, with the reset the provider sends for it.
func bucket1s(f float64) [2]Bucket {
	return [2]Bucket{{Limit: 1200, Remaining: f * 1200, Reset: time.Duration((1 - f) * float64(time.Second)), OK: true}}
}

// shareStep is one update of the table: this gateway sent sent requests
// (refused of them answered 429) evenly over the dt since the last
// reading, waited (for the limit or the pace) or not, and the reading at
// its end found the bucket f full.
type shareStep struct {
	dt      time.Duration
	sent    int
	refused int
	waited  bool
	f       float64
	want    float64 // pace after, in requests a second
}

var shareIn = shareInput{full: 19.4, rate: 20, latency: time.Second}

func runShare(t *testing.T, start float64, steps []shareStep) {
	t.Helper()
	var s keyShare
	at := testEpoch
	s.reading(at, bucket1s(start), false, shareIn) // the anchor
	for i, st := range steps {
		for k := 1; k <= st.sent; k++ {
			ts := at.Add(st.dt * time.Duration(k) / time.Duration(st.sent+1))
			s.sent(ts)
			if k <= st.refused {
				s.refuse(ts)
			}
		}
		if st.waited {
			s.held(at.Add(st.dt / 2))
		}
		at = at.Add(st.dt)
		s.reading(at, bucket1s(st.f), false, shareIn)
		got := s.frac * shareIn.full
		if s.frac == 0 {
			got = shareIn.full
		}
		if math.Abs(got-st.want) > 1e-6 {
			t.Fatalf("step %d: pace %.6f, want %.6f (ρ %.3f, own %.3f)", i+1, got, st.want, s.lastRho, s.lastOwn)
		}
	}
}

// The key-share rule, update by update, on a 20-request bucket (20 a
// second): ρ = 1 − Δfraction × interval ÷ span.
func TestKeyShareRule(t *testing.T) {
	tau := shareIn.full / shareIn.rate * shareSlack // the lone target, with the shared slack
	two := 10 * (1 + 0.5*(tau/1-1))
	cases := []struct {
		name  string
		start float64
		steps []shareStep
	}{
		// It sent all the key used (40 in 2 s, the bucket level
		// unchanged: ρ = 1): alone, the lone pace.
		{"alone", 0.5, []shareStep{{2 * time.Second, 40, 0, true, 0.5, 19.4}}},
		// The key ran at its rate (ρ = 1) but this gateway sent half of
		// it: to what it got, scaled by 1 + β(τ/ρ − 1).
		{"over, half the key", 0.5, []shareStep{{2 * time.Second, 20, 0, true, 0.5, two}}},
		// Then the bucket fills (ρ = 0.85, not at the top) with this
		// gateway at 8 a second: up by its proportional step and the
		// additive 0.5 % of the rate a second.
		{"room", 0.5, []shareStep{
			{2 * time.Second, 20, 0, true, 0.5, two},
			{2 * time.Second, 16, 0, true, 0.8, two + 8*0.5*(tau/0.85-1) + 0.005*20*2},
		}},
		// At the bucket's top ρ reads high (refill lost; here 0.928,
		// over τ): probe 2 % a second from what it got, and the additive
		// step.
		{"at the top", 0.5, []shareStep{
			{2 * time.Second, 20, 0, true, 0.5, two},
			{5 * time.Second, 50, 0, true, 0.86, 10*(1+shareProbe*5) + 0.005*20*5},
		}},
		// Requests that never waited and used a fifth of the pace: no
		// more than a quarter above what was sent.
		{"demand-bound", 0.5, []shareStep{
			{2 * time.Second, 20, 0, true, 0.5, two},
			{2 * time.Second, 4, 0, false, 0.5 + 0.6*2, 1.25 * 2},
		}},
		// Slow start: from the first answer the pace is half the lone
		// one (9.7); an update that finds room (here the bucket at its
		// top) doubles it, up to the lone pace.
		{"slow start", 0.9, []shareStep{
			{2 * time.Second, 8, 0, true, 0.9, 2 * 9.7},
		}},
		// Half of what it sent was refused: what it got counts.
		{"refused", 0.5, []shareStep{{2 * time.Second, 40, 20, true, 0.5, two}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runShare(t, tc.start, tc.steps) })
	}
}

// Readings closer than the span do not update; a 429 (the bucket empty,
// answered at once) updates after 250 ms.
func TestKeyShareSpan(t *testing.T) {
	var s keyShare
	s.reading(testEpoch, bucket1s(0.5), false, shareIn)
	for i := 0; i < 10; i++ {
		s.sent(testEpoch.Add(time.Duration(i+1) * 10 * time.Millisecond))
	}
	s.held(testEpoch.Add(50 * time.Millisecond))
	if s.reading(testEpoch.Add(time.Second), bucket1s(0.5), false, shareIn); s.updates != 0 {
		t.Fatal("an answer 1 s after the anchor updated (span 2 s)")
	}
	if s.reading(testEpoch.Add(200*time.Millisecond), bucket1s(0), true, shareIn); s.updates != 0 {
		t.Fatal("a 429 200 ms after the anchor updated")
	}
	if s.reading(testEpoch.Add(300*time.Millisecond), bucket1s(0), true, shareIn); s.updates != 1 {
		t.Fatal("a 429 300 ms after the anchor did not update")
	}
}

// The buckets as both providers' headers give them.
func TestParseBuckets(t *testing.T) {
	now := testEpoch
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "1200")
	h.Set("x-ratelimit-remaining-requests", "600")
	h.Set("x-ratelimit-reset-requests", "500ms")
	h.Set("x-ratelimit-limit-tokens", "90000")
	h.Set("x-ratelimit-remaining-tokens", "9000")
	h.Set("x-ratelimit-reset-tokens", "54s")
	b := parseBuckets(h, now)
	if !b[0].OK || b[0].fraction() != 0.5 || b[0].interval() != 1 || !b[1].OK || math.Abs(b[1].interval()-60) > 1e-9 {
		t.Fatalf("openai buckets %+v (interval %v, %v)", b, b[0].interval(), b[1].interval())
	}
	a := http.Header{}
	a.Set("anthropic-ratelimit-requests-limit", "50")
	a.Set("anthropic-ratelimit-requests-remaining", "25")
	a.Set("anthropic-ratelimit-requests-reset", now.Add(30*time.Second).Format(time.RFC3339))
	b = parseBuckets(a, now)
	if !b[0].OK || b[0].Reset != 30*time.Second || b[0].interval() != 60 || b[1].OK {
		t.Fatalf("anthropic buckets %+v", b)
	}
	// Full: the reset's rounding would dominate, so no interval.
	h.Set("x-ratelimit-remaining-requests", "1200")
	h.Set("x-ratelimit-reset-requests", "0s")
	if b = parseBuckets(h, now); b[0].interval() != 0 {
		t.Fatalf("interval of a full bucket %v, want 0 (unknown)", b[0].interval())
	}
}

// A window in which the key was over its target and requests waited for
// the pace is pushback for the ramp, 429s or not; the next window, with
// the key back under its target, is not.
func TestKeyShareOverIsPushback(t *testing.T) {
	c := NewController(StewardPolicy(), clock.NewFake(testEpoch))
	c.mu.Lock()
	c.share.over = true
	c.share.held(c.clock.Now().Add(time.Millisecond))
	c.mu.Unlock()
	if w := c.Window(); !w.Pushback {
		t.Fatal("key over with requests waiting: no pushback")
	}
	c.mu.Lock()
	c.share.over = false
	c.mu.Unlock()
	if w := c.Window(); w.Pushback {
		t.Fatal("pushback with the key under its target")
	}
	var s keyShare
	s.reading(testEpoch, bucket1s(0.5), false, shareIn)
	for k := 1; k <= 20; k++ {
		s.sent(testEpoch.Add(time.Duration(k) * 90 * time.Millisecond))
	}
	s.held(testEpoch.Add(time.Second))
	s.reading(testEpoch.Add(2*time.Second), bucket1s(0.5), false, shareIn)
	if !s.over {
		t.Fatal("an update that found the key over (ρ 1, half of it this gateway's) did not say so")
	}
}
