package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// bucket1s is a reading of a 1 200 RPM bucket enforced per second (20
// requests): f full, with the reset the provider sends for it, marked
// coarse: these tests set levels, not who took them, so the reading cannot
// tell whether the bucket held others' requests (tidy; tidyBucket can).
func bucket1s(f float64) [2]Bucket {
	return [2]Bucket{{Limit: 1200, Remaining: f * 1200, Reset: time.Duration((1 - f) * float64(time.Second)), OK: true, Coarse: true}}
}

// tidyBucket is a reading of the same bucket short of full by short
// requests, its reset to the millisecond as OpenAI's headers give it.
func tidyBucket(short float64) [2]Bucket {
	reset := time.Duration(math.Ceil(short/20*1000)) * time.Millisecond
	return [2]Bucket{{Limit: 1200, Remaining: (20 - short) * 60, Reset: reset, OK: true}}
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

// slowShareIn is shareIn at 10 s calls (a span of 5 s) with what the
// rule's steps are there: the slowdown (4 s of feedback in 15), the
// additive climb over one span and the shared target τ.
func slowShareIn() (in shareInput, slow, add, tau float64) {
	in = shareIn
	in.latency = 10 * time.Second
	slow = 4.0 / 15
	return in, slow, shareAdditive * in.rate * 5 * slow, in.full / in.rate * shareSlack
}

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
	// In the slow start a span is half a second (or half a call's
	// latency): a joining gateway learns what its pace does soon.
	if s.reading(testEpoch.Add(400*time.Millisecond), bucket1s(0.5), false, shareIn); s.updates != 0 {
		t.Fatal("in the slow start, an answer 400 ms after the anchor updated (span 500 ms)")
	}
	if s.reading(testEpoch.Add(600*time.Millisecond), bucket1s(0.5), false, shareIn); s.updates != 1 {
		t.Fatal("in the slow start, an answer 600 ms after the anchor did not update (span 500 ms)")
	}
	s = keyShare{}
	s.reading(testEpoch, bucket1s(0.5), false, shareIn)
	s.slow = false
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
	if !b[0].OK || b[0].fraction() != 0.5 || b[0].interval() != 1 || !b[1].OK || math.Abs(b[1].interval()-60) > 1e-9 || b[0].Coarse || b[1].Coarse {
		t.Fatalf("openai buckets %+v (interval %v, %v)", b, b[0].interval(), b[1].interval())
	}
	a := http.Header{}
	a.Set("anthropic-ratelimit-requests-limit", "50")
	a.Set("anthropic-ratelimit-requests-remaining", "25")
	a.Set("anthropic-ratelimit-requests-reset", now.Add(30*time.Second).Format(time.RFC3339))
	b = parseBuckets(a, now)
	if !b[0].OK || b[0].Reset != 30*time.Second || b[0].interval() != 60 || b[1].OK || !b[0].Coarse {
		t.Fatalf("anthropic buckets %+v (a reset to the second is coarse: tidy cannot tell)", b)
	}
	a.Set("anthropic-ratelimit-requests-reset", now.Add(30*time.Second+250*time.Millisecond).Format(time.RFC3339Nano))
	if b = parseBuckets(a, now); b[0].Coarse {
		t.Fatalf("a reset with fractions of a second read as coarse: %+v", b)
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

// Before its first answer a gateway on a shared key probes: four requests a
// second, not the connection limit's worth at once (a key the others fill
// would refuse most of them). The first answer with the key's buckets
// ends the probe and sets the pace; so does an answer that tells no
// buckets (nothing to wait for). Fake clock.
func TestKeyShareProbe(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	first, _ := c.TryAcquire()
	if first == nil {
		t.Fatal("the first request was not admitted")
	}
	if tk, wait := c.TryAcquire(); tk != nil || wait != shareProbeGap {
		t.Fatalf("a second request before any answer: admitted %v, wait %v; want held for %v", tk != nil, wait, shareProbeGap)
	}
	if w := c.Window(); !w.Saturated {
		t.Fatal("a window in which the probe held requests back is not saturated (the gateway's bound)")
	}
	// Four a second for probeDecayAfter, then one every probeDecayGap: at
	// slow calls no answer comes for a latency, and four a second into a
	// key the others fill overflowed its bucket for all of it.
	var last *Ticket
	probes := []*Ticket{first}
	quick := int(probeDecayAfter / shareProbeGap)
	for i := 1; i <= quick; i++ {
		clk.Advance(shareProbeGap)
		if last, _ = c.TryAcquire(); last == nil {
			t.Fatalf("probe %d, %v after the first, refused", i+1, time.Duration(i)*shareProbeGap)
		}
		probes = append(probes, last)
		want := shareProbeGap
		if i == quick {
			want = probeDecayGap
		}
		if tk, wait := c.TryAcquire(); tk != nil || wait != want {
			t.Fatalf("after probe %d (%v after the first): admitted %v, wait %v; want held for %v", i+1, time.Duration(i)*shareProbeGap, tk != nil, wait, want)
		}
	}
	for len(probes) < 20 {
		clk.Advance(probeDecayGap)
		if last, _ = c.TryAcquire(); last == nil {
			t.Fatalf("probe %d refused", len(probes)+1)
		}
		probes = append(probes, last)
		if len(probes) == 20 {
			break
		}
		if tk, wait := c.TryAcquire(); tk != nil || wait != probeDecayGap {
			t.Fatalf("after probe %d: admitted %v, wait %v; want held for %v", len(probes), tk != nil, wait, probeDecayGap)
		}
	}
	// The connection limit (20) still bounds what is in flight: held by
	// it (no wait to tell), not by the probe's gap.
	if tk, wait := c.TryAcquire(); tk != nil || wait != 0 || c.InFlight() != 20 {
		t.Fatalf("%d in flight without an answer (admitted %v, wait %v); want the limit's 20", c.InFlight(), tk != nil, wait)
	}
	clk.Advance(shareProbeGap)
	// The first answer, to the last probe (sent a quarter second before):
	// the bucket 90 % full. The answers to the other probes come with it
	// (readings of requests sent before the pace began: no update).
	info := RateInfo{Fraction: 0.9, Remaining: 1080, RequestsPerMinute: 1200, Buckets: bucket1s(0.9), RequestsBank: -1, TokensBank: -1}
	c.Done(last, OutcomeOK, info)
	for _, p := range probes[:len(probes)-1] {
		c.Done(p, OutcomeOK, info)
	}
	if pace, _, _ := c.SharePace(); math.Abs(pace-0.5*0.97*20) > 1e-9 {
		t.Fatalf("pace after the first answer %.3f, want half the lone pace (9.7)", pace)
	}
	n := 0
	for end := clk.Now().Add(time.Second); clk.Now().Before(end); clk.Advance(time.Millisecond) {
		for {
			tk, _ := c.TryAcquire()
			if tk == nil {
				break
			}
			n++
		}
	}
	if n < 9 || n > 11 {
		t.Fatalf("%d admitted in the second after the first answer, want the pace's 9.7", n)
	}

	// A slow call: the first answer comes 6 s after its request, a
	// reading from before the probes reached the key (and of a bucket that
	// held a second of refill then): the probe goes on, one every
	// probeDecayGap.
	c = NewController(StewardPolicy(), clk)
	first, _ = c.TryAcquire()
	for end := clk.Now().Add(6 * time.Second); clk.Now().Before(end); {
		clk.Advance(shareProbeGap)
		c.TryAcquire()
	}
	c.Done(first, OutcomeOK, RateInfo{Fraction: 0.9, Remaining: 1080, RequestsPerMinute: 1200, Buckets: bucket1s(0.9), RequestsBank: -1, TokensBank: -1})
	tk, wait := c.TryAcquire()
	if tk == nil && wait > 0 && wait <= probeDecayGap {
		clk.Advance(wait) // the probe's next turn
		tk, _ = c.TryAcquire()
	}
	if tk == nil {
		t.Fatalf("after a slow first answer, the next probe was refused (wait %v)", wait)
	}
	if tk, wait := c.TryAcquire(); tk != nil || wait != probeDecayGap {
		t.Fatalf("after a slow first answer: a second request at once admitted %v, wait %v; want the probe's %v", tk != nil, wait, probeDecayGap)
	}

	// A provider that tells no buckets: the first answer ends the probe.
	c = NewController(StewardPolicy(), clk)
	first, _ = c.TryAcquire()
	clk.Advance(300 * time.Millisecond)
	c.Done(first, OutcomeOK, noInfo)
	acquireN(t, c, 20)
}

// The pace at the first reading: half the lone pace (slow start), or the
// emptiest bucket's fraction when that is less (the fair guess: what the
// others leave of the key), never under the floor; a 429 (the bucket
// empty) starts at the floor.
func TestKeyShareStartFromFairGuess(t *testing.T) {
	floor := shareFloor * shareIn.rate / shareIn.full
	for _, tc := range []struct {
		f, tokF float64
		refused bool
		want    float64
	}{
		{0.95, -1, false, 0.5},
		{0.5, -1, false, 0.5},
		{0.2, -1, false, 0.2},
		{0.05, -1, false, 0.05},
		{0, -1, true, floor},
		{0.9, 0.15, false, 0.15}, // the tokens bucket is the emptier
	} {
		b := bucket1s(tc.f)
		if tc.tokF >= 0 {
			b[1] = Bucket{Limit: 1_200_000, Remaining: tc.tokF * 1_200_000, Reset: time.Duration((1 - tc.tokF) * float64(time.Second)), OK: true}
		}
		var s keyShare
		s.reading(testEpoch, b, tc.refused, shareIn)
		if math.Abs(s.frac-tc.want) > 1e-12 || !s.slow {
			t.Errorf("bucket %.2f (tokens %.2f, 429 %v): start %.4f of the lone pace, want %.4f", tc.f, tc.tokF, tc.refused, s.frac, tc.want)
		}
	}
}

// The first update of a joining gateway comes from a reading of a request
// sent after its pace began (one span after its first answer), not from
// its probes, and its own rate is what it sent at that pace, not diluted
// by the probes before it.
func TestKeyShareFirstUpdate(t *testing.T) {
	t0 := testEpoch
	in := shareIn
	in.latency = 10 * time.Second // span 5 s
	var s keyShare
	s.sent(t0)
	first := in
	first.latency, first.now = 0, t0.Add(10*time.Second) // the first answer comes 10 s later
	// … from a bucket of a minute's refill, half full: it cannot have
	// emptied in the 10 s since, so the reading sets the pace (a bucket
	// of less than a latency's refill makes the probe go on: the long
	// probe, TestKeyShareLongProbe).
	s.reading(t0, [2]Bucket{{Limit: 1200, Remaining: 600, Reset: 30 * time.Second, OK: true}}, false, first)
	if s.frac != 0.5 || !s.paceSince.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("first reading: start %.3f, pace since %s", s.frac, s.paceSince.Sub(t0))
	}
	for k := 1; k <= 9; k++ {
		s.sent(t0.Add(time.Duration(k) * time.Second)) // the probes
	}
	// The probe sent 5 s after the anchor comes back at 15 s: a span
	// after the anchor, but sent before the pace began.
	in.now = t0.Add(15 * time.Second)
	if s.reading(t0.Add(5*time.Second), bucket1s(0.5), false, in); s.updates != 0 || s.frac != 0.5 {
		t.Fatalf("a probe's answer updated the pace (%d updates, %.3f)", s.updates, s.frac)
	}
	// From 10 s on it sends at its pace, waiting for it: 10 a second.
	for k := 1; k <= 50; k++ {
		s.sent(t0.Add(10*time.Second + time.Duration(k)*100*time.Millisecond))
	}
	s.held(t0.Add(12 * time.Second))
	// The answer to the request sent at 15 s: the key at its rate (ρ 1),
	// this gateway a fifth of it: over, to what it got since its pace
	// began (50 in 5 s), scaled.
	in.now = t0.Add(25 * time.Second)
	s.reading(t0.Add(15*time.Second), bucket1s(0.5), false, in)
	tau := shareIn.full / shareIn.rate * shareSlack
	if want := 10 * (1 + shareGain*(tau-1)); s.updates != 1 || math.Abs(s.frac*shareIn.full-want) > 1e-9 {
		t.Fatalf("first update: %d updates, pace %.4f, want %.4f (ρ %.3f, own %.3f)", s.updates, s.frac*shareIn.full, want, s.lastRho, s.lastOwn)
	}
}

// A joining gateway's share holds through the 429s of a key that is over:
// a 429 never tells a gateway it is alone (the empty bucket reads the
// key's use as no more than its rate, so the biggest user would keep the
// lone pace and every other would yield), and what the provider let
// through is measured over a span, not the quarter second since the last
// update (in which a gateway may have got nothing through).
func TestKeyShareJoinHolds(t *testing.T) {
	t0 := testEpoch
	tau := shareIn.full / shareIn.rate * shareSlack
	// The biggest user: 40 in 2 s (all the key's refill and more), a 429.
	var s keyShare
	s.reading(t0, bucket1s(0.2), false, shareIn)
	for k := 1; k <= 40; k++ {
		s.sent(t0.Add(time.Duration(k) * 50 * time.Millisecond))
	}
	at := t0.Add(2*time.Second + time.Millisecond)
	s.sent(at)
	s.refuse(at)
	s.held(at)
	s.reading(at, bucket1s(0), true, shareIn)
	rho := 1 + 0.2/at.Sub(t0).Seconds()
	own := 40 / at.Sub(t0).Seconds()
	if want := own * (1 + shareGain*(tau/rho-1)); s.frac == 0 || math.Abs(s.frac*shareIn.full-want) > 1e-9 {
		t.Fatalf("at a 429 the biggest user paces %.4f (frac %.3f), want %.4f: not alone", s.frac*shareIn.full, s.frac, want)
	}

	// A joiner at 10 a second, updated at t0 + 2 s; a quarter second
	// later a 429, its only requests since refused.
	var j keyShare
	j.reading(t0, bucket1s(0), false, shareIn)
	for k := 1; k <= 20; k++ {
		j.sent(t0.Add(time.Duration(k) * 100 * time.Millisecond))
	}
	j.held(t0.Add(time.Second))
	j.reading(t0.Add(2*time.Second), bucket1s(0), false, shareIn)
	before := j.updates
	for _, ms := range []int{2100, 2260} {
		j.sent(t0.Add(time.Duration(ms) * time.Millisecond))
		j.refuse(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	at = t0.Add(2260 * time.Millisecond)
	j.reading(at, bucket1s(0), true, shareIn)
	// What it got through over the span back from the 429: the requests
	// sent after t0 + 0.26 s (18 of them), over 2 s.
	got := float64(count(j.sends, at.Add(-2*time.Second), at)-count(j.refused, at.Add(-2*time.Second), at)) / 2
	if want := got * (1 + shareGain*(tau-1)); j.updates != before+1 || math.Abs(j.frac*shareIn.full-want) > 1e-9 || got != 9 {
		t.Fatalf("joiner after a 429: pace %.4f, want %.4f (%.1f a second got through), not the floor", j.frac*shareIn.full, want, got)
	}
}

// At the bucket's top the pace probes up; at slow calls (here 10 s, so a
// climb is answered a latency and a span later: 15 s) it climbs per
// second in proportion slower (4 s ÷ 15 s), and each update in a row
// that finds the top again climbs 1.5 times faster, up to 1.5⁴: a shard
// that ended leaves room that stays.
func TestKeyShareTopProbe(t *testing.T) {
	t0 := testEpoch
	in, slow, _, _ := slowShareIn()
	s := keyShare{frac: 0.2, anchor: shareReading{at: t0, f: [2]float64{0.9}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{1}}
	pace := 0.2 * in.full
	for k := 0; k < 6; k++ {
		a := t0.Add(time.Duration(k) * 5 * time.Second)
		for i := 1; i <= 10; i++ {
			s.sent(a.Add(time.Duration(i) * 400 * time.Millisecond))
		}
		s.held(a.Add(time.Second))
		s.reading(a.Add(5*time.Second), bucket1s(0.95), false, in)
		pace = pace*(1+shareProbe*5*slow*math.Pow(1.5, float64(min(k, 4)))) + shareAdditive*in.rate*5*slow
		if got := s.frac * in.full; math.Abs(got-pace) > 1e-9 {
			t.Fatalf("update %d at the top: pace %.4f, want %.4f", k+1, got, pace)
		}
	}
	// The bucket leaves its top: the run starts over.
	a := t0.Add(30 * time.Second)
	for i := 1; i <= 10; i++ {
		s.sent(a.Add(time.Duration(i) * 400 * time.Millisecond))
	}
	s.reading(a.Add(5*time.Second), bucket1s(0.5), false, in)
	if s.topRun != 0 {
		t.Fatalf("top run %d after the bucket left its top", s.topRun)
	}
}

// bucket10s is a requests bucket of 10 s of refill (200 at 20 a second),
// f full: a span's drift reads a wider range of ρ than a 1 s bucket's.
func bucket10s(f float64) [2]Bucket {
	return [2]Bucket{{Limit: 1200, Remaining: f * 1200, Reset: time.Duration((1 - f) * float64(10*time.Second)), OK: true}}
}

// At slow calls the first answer is a latency old and the bucket held less
// than a latency of refill then: the gateway probes on (four a second)
// until a reading a span later, and starts from what the key did while it
// probed: half of what the others leave of the target when that is more
// than the probe's rate, else the probe's rate (the key over: the others
// cut too).
func TestKeyShareLongProbe(t *testing.T) {
	t0 := testEpoch
	tau := shareIn.full / shareIn.rate * shareSlack
	for _, tc := range []struct {
		f0, f1 float64
		want   float64
	}{
		{0.3, 0.5, 0.5 * (tau - (0.6 - 0.2)) * 20}, // ρ 0.6, the probe's 0.2 of it
		{0.5, 0.3, 4}, // ρ 1.4: over
	} {
		var s keyShare
		for k := 0; k < 60; k++ {
			s.sent(t0.Add(time.Duration(k) * shareProbeGap))
		}
		in := shareIn
		in.latency, in.now = 10*time.Second, t0.Add(10*time.Second)
		if s.reading(t0, bucket10s(tc.f0), false, in) || !s.longProbe || s.frac != 0 {
			t.Fatalf("a slow first answer (bucket %.1f of 10 s) set the pace %.3f, long probe %v", tc.f0, s.frac, s.longProbe)
		}
		in.now = t0.Add(12 * time.Second)
		if s.reading(t0.Add(2*time.Second), bucket10s(tc.f0), false, in) || !s.longProbe {
			t.Fatal("a reading less than a span (half the latency) after the first ended the long probe")
		}
		in.now = t0.Add(15 * time.Second)
		s.reading(t0.Add(5*time.Second), bucket10s(tc.f1), false, in)
		if got := s.frac * in.full; s.longProbe || math.Abs(got-tc.want) > 1e-9 {
			t.Fatalf("bucket %.1f → %.1f: start %.4f (long probe %v), want %.4f", tc.f0, tc.f1, got, s.longProbe, tc.want)
		}
	}
}

// At slow calls a gateway with more than half of the key's use yields the
// excess (× (1 − (x − ½))), and at the bucket's top one with more than
// shareTopHold of it holds its pace instead of probing; a smaller one
// probes, scaled by its share.
func TestKeyShareSlowCallsFair(t *testing.T) {
	t0 := testEpoch
	in, slow, add, tau := slowShareIn()
	send := func(s *keyShare) {
		for i := 1; i <= 50; i++ {
			s.sent(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		}
		s.held(t0.Add(time.Second))
	}
	// Room (ρ 0.6), this gateway 10 a second of it (x = 0.5/0.6).
	s := keyShare{frac: 0.6, anchor: shareReading{at: t0, f: [2]float64{0.3}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{10}}
	send(&s)
	s.reading(t0.Add(5*time.Second), bucket10s(0.5), false, in)
	x := 0.5 / 0.6
	want := (0.6*in.full + 10*shareGain*(tau/0.6-1) + add) * (1 - (x - shareFair))
	if got := s.frac * in.full; math.Abs(got-want) > 1e-9 {
		t.Fatalf("room, own share %.2f: pace %.4f, want %.4f", x, got, want)
	}
	// At the top: a gateway with 0.7 of the key holds, one with 0.3
	// probes at 4 × 0.3 of the probe.
	for _, tc := range []struct{ share, scale float64 }{{0.7, 0}, {0.3, 1.2}} {
		s := keyShare{frac: 0.6, anchor: shareReading{at: t0, f: [2]float64{0.95}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{1}, ownShare: tc.share}
		send(&s)
		s.reading(t0.Add(5*time.Second), bucket1s(0.95), false, in)
		want := 0.6*in.full*(1+shareProbe*5*slow*tc.scale) + add
		if got := s.frac * in.full; math.Abs(got-want) > 1e-9 {
			t.Fatalf("at the top, own share %.1f: pace %.4f, want %.4f", tc.share, got, want)
		}
	}
}

// A gateway alone on the key at slow calls, its own use read from the
// tokens bucket (own requests × the average tokens a request uses, ± 7 %
// on its own), stays alone on a span whose reading puts it at 0.85 of the
// key's use; counted in requests, at faster calls, or on a 429 it does not
// (stayAlone).
func TestKeyShareStaysAloneByTokens(t *testing.T) {
	t0 := testEpoch
	// Requests: 3 600 a minute, near the top; tokens: 1 200 000 a minute
	// held for a second, half full at both readings (ρ = 1).
	tokens := func(f float64) [2]Bucket {
		return [2]Bucket{
			{Limit: 3600, Remaining: 0.97 * 3600, Reset: 20 * time.Millisecond, OK: true, Coarse: true},
			{Limit: 1.2e6, Remaining: f * 1.2e6, Reset: time.Duration((1 - f) * float64(time.Second)), OK: true, Coarse: true},
		}
	}
	requests := func(f float64) [2]Bucket { return bucket1s(f) }
	for _, tc := range []struct {
		name        string
		b           func(float64) [2]Bucket
		latency     time.Duration
		rateLimited bool
		alone       bool
	}{
		{"tokens, 10 s calls", tokens, 10 * time.Second, false, true},
		{"requests, 10 s calls", requests, 10 * time.Second, false, false},
		{"tokens, 1 s calls", tokens, time.Second, false, false},
		{"tokens, 10 s calls, a 429", tokens, 10 * time.Second, true, false},
	} {
		in := shareIn
		in.latency, in.tokensPerReq, in.now = tc.latency, 1000, t0.Add(5*time.Second+tc.latency)
		// Alone at the last update (frac 0), its anchor at t0.
		s := keyShare{anchor: shareReading{at: t0, f: [2]float64{0.5, 0.5}, ok: [2]bool{true, tc.b(0.5)[1].OK}}, haveAnchor: true, ivl: [2]float64{1, 1}, updates: 1}
		// 17 a second got through over 5 s: 0.85 of the key's 20.
		for i := 1; i <= 85; i++ {
			s.sent(t0.Add(time.Duration(i) * 5 * time.Second / 86))
		}
		s.held(t0.Add(time.Second))
		at := t0.Add(5 * time.Second)
		if tc.rateLimited {
			s.refuse(at)
		}
		s.reading(at, tc.b(0.5), tc.rateLimited, in)
		if got := s.lone(); got != tc.alone {
			t.Errorf("%s: alone %v (pace %.2f, ρ %.3f, own %.3f), want %v", tc.name, got, s.frac*in.full, s.lastRho, s.lastOwn, tc.alone)
		}
	}
}

// A joining gateway whose first reading finds a bucket that refills within
// a span far below its top (a lone gateway holds it low: the bank, lone.go)
// cannot tell whose requests those are, but the key is in use: it starts at
// the probe's rate, as on an untidy reading, not at the bucket's fraction
// of the lone pace. A bucket of a minute's refill as far down (reset 30 s)
// says nothing of now: the fair guess as before.
func TestKeyShareJoinFarBelowTop(t *testing.T) {
	for _, tc := range []struct {
		b    Bucket
		want float64
	}{
		{tidyBucket(12)[0], 4 / shareIn.full},
		{Bucket{Limit: 1200, Remaining: 480, Reset: 36 * time.Second, OK: true}, 0.4},
	} {
		var s keyShare
		s.sent(testEpoch)
		in := shareIn
		in.now = testEpoch.Add(300 * time.Millisecond)
		s.reading(testEpoch, [2]Bucket{tc.b}, false, in)
		if math.Abs(s.frac-tc.want) > 1e-9 {
			t.Errorf("first reading %.0f of %.0f, reset %s: start %.3f of the lone pace, want %.3f", tc.b.Remaining, tc.b.Limit, tc.b.Reset, s.frac, tc.want)
		}
	}
}

// A gateway that yielded to its floor on a key another client fills (its
// pace 2 % of the rate: at 45 a minute, one request a minute) has requests
// waiting for the pace all that time, between admissions that are a minute
// apart. Every window of that wait is pushback for the ramp (item 13), not
// only the windows in which an admission or an answer happened to wake the
// queue: so the ramp reverses (R2, two windows in a row) while the
// provider takes nothing more from this gateway. Fake clock.
func TestKeyShareOverAtTheFloorIsPushbackEveryWindow(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	// The key's bucket, 45 a minute (0.75 a second), starts at 10: this
	// gateway alone takes from it for 20 s (its pace found, nothing
	// refused); then another client takes every request's worth as soon
	// as it refills, and every request of this gateway's is refused.
	const rpm = 45
	level, last := 10.0, clk.Now()
	other := clk.Now().Add(20 * time.Second)
	answer := func(tk *Ticket) {
		now := clk.Now()
		level = math.Min(rpm, level+now.Sub(last).Seconds()*rpm/60)
		last = now
		if !now.Before(other) {
			level = 0
		}
		o := OutcomeRateLimited
		if level >= 1 {
			level--
			o = OutcomeOK
		}
		c.Done(tk, o, RateInfo{Fraction: level / rpm, Remaining: int64(level), RequestsPerMinute: rpm, Tokens: 10, RequestsBank: -1, TokensBank: -1,
			Buckets: [2]Bucket{{Limit: rpm, Remaining: math.Floor(level), Reset: time.Duration((rpm - level) / rpm * 60 * float64(time.Second)), OK: true}}})
	}
	for end := other.Add(10 * time.Second); clk.Now().Before(end); clk.Advance(10 * time.Millisecond) {
		if tk, _ := c.TryAcquire(); tk != nil {
			clk.Advance(10 * time.Millisecond)
			answer(tk)
		}
	}
	pace, _, _ := c.SharePace()
	c.mu.Lock()
	over := c.share.over
	c.mu.Unlock()
	if !over || pace > 2*shareFloor*rpm/60 {
		t.Fatalf("after 10 s of the other client: key over %v, pace %.4f a second; want over, at the floor (%.4f)", over, pace, shareFloor*rpm/60)
	}
	c.Window()
	// A request of the samples' waits for the pace: the next admission is
	// a minute away, and nothing else happens meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx)
		done <- err
	}()
	clk.BlockUntil(1) // the request waits on the pace's timer
	for i := 0; i < 5; i++ {
		clk.Advance(time.Second)
		if w := c.Window(); !w.Pushback {
			t.Fatalf("window %d of the wait at the floor, the key over: no pushback", i+1)
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the waiting request was admitted within 5 s at the floor pace")
	}
}

// A long probe (slow calls) that ends at the bucket's top starts at half
// the lone pace, room of unknown size, unless none of the probe's answers
// read tidy and some did not: the others keep the key busy, its top is a
// moment's, and half the lone pace would send the key a second's worth more
// than it allows for a latency. It starts at the probe's admitted rate
// then (the slow start doubles it). Answers that cannot tell (coarse
// resets) leave the start as it was.
func TestKeyShareLongProbeBusyTop(t *testing.T) {
	t0 := testEpoch
	coarse := bucket1s(0.9)
	for _, tc := range []struct {
		name string
		b    [2]Bucket
		want float64
	}{
		{"not tidy", tidyBucket(2), 4}, // 2 requests short, 1 of them its own
		{"tidy", tidyBucket(1), shareStart * shareIn.full},
		{"cannot tell", coarse, shareStart * shareIn.full},
	} {
		var s keyShare
		for k := 0; k < 60; k++ {
			s.sent(t0.Add(time.Duration(k) * shareProbeGap))
		}
		in := shareIn
		in.latency, in.now = 10*time.Second, t0.Add(10*time.Second)
		if s.reading(t0, tc.b, false, in) || !s.longProbe {
			t.Fatalf("%s: a slow first answer did not go on probing", tc.name)
		}
		in.now = t0.Add(15 * time.Second)
		s.reading(t0.Add(5*time.Second), tc.b, false, in)
		if got := s.frac * in.full; s.longProbe || !s.slow || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: start %.4f (long probe %v, slow start %v), want %.4f", tc.name, got, s.longProbe, s.slow, tc.want)
		}
	}
}

// A joiner at slow calls whose long probe ends on a 429 (another gateway's
// slow start emptied the bucket) starts from what its probe got through,
// cut; a second 429 from the same empty bucket, to the first request of
// that pace a fraction of a second later, finds nothing got through since
// the pace began. Measured over that sliver its rate is 0 and the pace
// fell to the floor (2 % of the key), where beside a gateway at the lone
// pace it stayed for the whole run (seeds 17 and 21, 2 invocations at 10 s
// calls). It is measured over the whole span back instead, as any 429's.
func TestKeyShare429OnASliver(t *testing.T) {
	s, in, at := longProbeEndedBy429(t)
	start := s.frac * in.full
	// The pace's first request, 0.3 s later, answered 429 at once.
	at = at.Add(300 * time.Millisecond)
	s.sent(at)
	s.refuse(at)
	in.now = at
	s.reading(at, bucket1s(0), true, in)
	// Over the span back (5 s, half the latency): the probe's requests at
	// t0 + 1.5 … 6 s and this one, two of them refused.
	paceFromSpanBack(t, &s, in, at, 18, fmt.Sprintf("second 429 a sliver after the pace began (start %.3f; the floor is %.2f)", start, shareFloor*in.rate))
}

// longProbeEndedBy429 is a joiner at 10 s calls whose long probe (four a
// second from testEpoch) ends on a 429 to its last request, at 6 s.
func longProbeEndedBy429(t *testing.T) (keyShare, shareInput, time.Time) {
	t.Helper()
	t0 := testEpoch
	in := shareIn
	in.latency = 10 * time.Second
	var s keyShare
	for k := 0; k < 25; k++ { // the probe, four a second, to t0 + 6 s
		s.sent(t0.Add(time.Duration(k) * shareProbeGap))
	}
	in.now = t0.Add(10 * time.Second)
	if s.reading(t0, bucket1s(0.5), false, in) || !s.longProbe {
		t.Fatal("a slow first answer from a bucket holding half a second did not go on probing")
	}
	at := t0.Add(6 * time.Second)
	s.refuse(at)
	in.now = at
	s.reading(at, bucket1s(0), true, in)
	if s.longProbe || s.frac <= 0 {
		t.Fatalf("a 429 did not end the long probe (frac %.3f)", s.frac)
	}
	return s, in, at
}

// paceFromSpanBack checks that a 429 at at set the pace from what got
// through over the whole span back (admitted requests, checked too), cut
// as at an empty bucket (ρ reads 1).
func paceFromSpanBack(t *testing.T, s *keyShare, in shareInput, at time.Time, admitted int, what string) {
	t.Helper()
	span := in.latency / 2
	got := float64(count(s.sends, at.Add(-span), at) - count(s.refused, at.Add(-span), at))
	if got != float64(admitted) {
		t.Fatalf("test setup: %v admitted over the span back, want %d", got, admitted)
	}
	tau := in.full / in.rate * shareSlack
	want := got / span.Seconds() * (1 + shareGain*(tau-1))
	if pace := s.frac * in.full; math.Abs(pace-want) > 1e-9 {
		t.Fatalf("%s: pace %.4f, want %.4f", what, pace, want)
	}
}

// A small key enforced per second holds a few requests (120 a minute: 2):
// a gateway's own request leaves it half full, under shareAtTop, though it
// was full when the request came, so its level never drifts while it
// loses refill at the top, ρ read 1 (the key over) at every update and the
// pace stayed where it was. A lone gateway at 0.3 s calls fell to 0.03 of
// the key and stayed there; one yielded to its floor beside another
// client stayed there after the other had left (0.24 of the key), its
// window pushback every time, so the ramp held at its floor on an idle
// key. A reading short of full by no more than the answer's own request
// is at the top (ownOnly).
func TestKeyShareSmallBucketAtItsTop(t *testing.T) {
	t.Run("alone", func(t *testing.T) {
		m := newKeySim(t, 1, 120, 0, 0, 300*time.Millisecond)
		m.fast429 = true
		m.run(60 * time.Second)
		m.window(60)
		m.run(60 * time.Second)
		if key, _, refused := m.window(60); key < 0.9 || refused[0] > 0.05 {
			t.Errorf("alone on a 120 RPM key enforced per second: %.2f of the key (want 0.9 or more), %.3f refused (0.05 or less)", key, refused[0])
		}
	})
	t.Run("the other left", func(t *testing.T) {
		m := newKeySim(t, 2, 120, 0, 0, time.Second)
		m.fast429 = true
		leave := testEpoch.Add(90 * time.Second)
		m.startAt = []time.Time{testEpoch, testEpoch.Add(20 * time.Second)}
		m.active = func(i int, now time.Time) bool { return i == 0 || now.Before(leave) }
		m.run(150 * time.Second)
		m.window(150)
		pushback := 0
		for i := 0; i < 60; i++ {
			m.run(time.Second)
			if m.cs[0].Window().Pushback {
				pushback++
			}
		}
		if key, own, _ := m.window(60); own[0] < 0.8 || pushback > 10 {
			t.Errorf("a minute after the other client left, 60 s on: %.2f of the key (want 0.8 or more; the key %.2f), pushback in %d of 60 windows", own[0], key, pushback)
		}
	})
}
