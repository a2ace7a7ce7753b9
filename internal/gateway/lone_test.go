package gateway

import (
	"math"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// loneInfo is an answer of a 1 200 RPM key (20 requests a second) whose
// buckets are b, with no long bucket to spend.
func loneInfo(b [2]Bucket) RateInfo {
	return RateInfo{Fraction: b[0].fraction(), Remaining: int64(b[0].Remaining), RequestsPerMinute: 1200, Buckets: b, RequestsBank: -1, TokensBank: -1}
}

// loneAt makes a controller alone on its key (as the key share's update
// would find it) after one answer lat after its request.
func loneAt(t *testing.T, lat time.Duration) (*Controller, *clock.Fake) {
	t.Helper()
	return loneAfter(t, lat, tidyBucket(0.5))
}

// loneAfter is loneAt with the first answer's buckets first.
func loneAfter(t *testing.T, lat time.Duration, first [2]Bucket) (*Controller, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	tk, _ := c.TryAcquire()
	clk.Advance(lat)
	c.Done(tk, OutcomeOK, loneInfo(first))
	c.mu.Lock()
	c.share.frac, c.share.slow, c.share.paceSince, c.share.longProbe, c.share.heard = 0, false, testEpoch.Add(time.Hour), false, true
	c.mu.Unlock()
	return c, clk
}

// loneAnswer sends one request as soon as the pace lets it and answers it
// lat later with info.
func loneAnswer(c *Controller, clk *clock.Fake, lat time.Duration, o Outcome, info RateInfo) {
	tk, _ := c.TryAcquire()
	for tk == nil {
		clk.Advance(10 * time.Millisecond)
		tk, _ = c.TryAcquire()
	}
	clk.Advance(lat)
	c.Done(tk, o, info)
}

// At fast calls a lone gateway holds its buckets two requests under their
// top (three requests' worth of tokens): a full bucket, whose refill is
// lost, speeds the pace up past 99.5 % of the rate; one further down
// (someone else takes from it) slows it below 97 % at once; a 429 ends
// the hold. At slow calls the hold does not apply (the boost does).
func TestLoneHold(t *testing.T) {
	const lat = 100 * time.Millisecond
	c, clk := loneAt(t, lat)
	pace := func() float64 { p, _, _ := c.SharePace(); return p }
	for _, tc := range []struct {
		short  float64
		lo, hi float64
		why    string
	}{
		{0, 21.9 - 1e-9, 21.9 + 1e-9, "a full bucket: 99.5 % of the rate and 10 % more (2 requests under the top over 1 s, capped)"},
		{2, 19.9 - 0.05, 19.9 + 0.05, "two requests under the top: 99.5 % of the rate"},
		{1, 20.9 - 0.05, 20.9 + 0.05, "one under: 1 a second more"},
		{5, 17.9 - 1e-9, 17.9 + 1e-9, "five under (someone else's): 10 % of the rate less"},
	} {
		loneAnswer(c, clk, lat, OutcomeOK, loneInfo(tidyBucket(tc.short)))
		if p := pace(); p < tc.lo || p > tc.hi {
			t.Errorf("bucket %.0f under its top: pace %.3f, want %.2f–%.2f (%s)", tc.short, p, tc.lo, tc.hi, tc.why)
		}
	}

	// The tokens bucket: three requests' worth under its top holds the
	// pace (1 000 tokens a request, 1 200 000 a minute: 20 a second).
	tokInfo := func(short float64) RateInfo {
		i := loneInfo([2]Bucket{tidyBucket(0)[0], {Limit: 1_200_000, Remaining: (20 - short) * 1000 * 60, Reset: time.Duration(short / 20 * float64(time.Second)), OK: true}})
		i.RequestsPerMinute, i.TokensPerMinute, i.Tokens = 3600, 1_200_000, 1000
		return i
	}
	for i := 0; i < 3; i++ {
		loneAnswer(c, clk, lat, OutcomeOK, tokInfo(3))
	}
	if p := pace(); math.Abs(p-19.9) > 0.05 {
		t.Errorf("tokens bucket 3 requests' worth under its top: pace %.3f, want 19.9", p)
	}

	// A 429 lowers the pace factor: no hold until it has climbed back.
	i := loneInfo(tidyBucket(20))
	i.RetryAfter = 50 * time.Millisecond
	loneAnswer(c, clk, 0, OutcomeRateLimited, i)
	loneAnswer(c, clk, lat, OutcomeOK, loneInfo(tidyBucket(0)))
	if p := pace(); p > 0.97*20 {
		t.Errorf("after a 429, pace %.3f: want under 97 %% of the rate (no hold)", p)
	}

	// Slow calls (2.5 s): the hold does not apply.
	c, clk = loneAt(t, 2500*time.Millisecond)
	loneAnswer(c, clk, 2500*time.Millisecond, OutcomeOK, loneInfo(tidyBucket(0)))
	if p := pace(); p > lonePace*20+1e-9 {
		t.Errorf("2.5 s calls, a full bucket: pace %.3f, want at most 99.5 %% of the rate (the boost, no hold)", p)
	}
}

// A gateway whose first four readings (its probe's answers) all find the
// bucket at its top and tidy takes the lone pace at once, not half of it
// until an update reads its own pace; one untidy reading among them (a
// request of someone else's in the bucket) keeps the slow start.
func TestTidyStart(t *testing.T) {
	for _, tc := range []struct {
		shorts []float64
		alone  bool
	}{
		{[]float64{1, 1, 1}, false},
		{[]float64{1, 1, 1, 1}, true},
		{[]float64{1, 1, 3, 1, 1}, false},
		{[]float64{1, 1, 6, 1, 1}, false}, // far below the top
	} {
		clk := clock.NewFake(testEpoch)
		c := NewController(StewardPolicy(), clk)
		// The probe: one request every 250 ms, answered from 1.25 s on, 250 ms apart.
		var tks []*Ticket
		for range tc.shorts {
			tk, wait := c.TryAcquire()
			if tk == nil {
				t.Fatalf("probe refused (wait %s)", wait)
			}
			tks = append(tks, tk)
			clk.Advance(250 * time.Millisecond)
		}
		if d := testEpoch.Add(1250 * time.Millisecond).Sub(clk.Now()); d > 0 {
			clk.Advance(d)
		}
		for k, short := range tc.shorts {
			c.Done(tks[k], OutcomeOK, loneInfo(tidyBucket(short)))
			clk.Advance(250 * time.Millisecond)
		}
		p, _, _ := c.SharePace()
		if tc.alone && p < 0.97*20-1e-9 {
			t.Errorf("readings %v under the top: pace %.2f, want the lone pace (19.4 or more)", tc.shorts, p)
		}
		if !tc.alone && math.Abs(p-0.5*0.97*20) > 1e-9 {
			t.Errorf("readings %v under the top: pace %.2f, want half the lone pace (9.7)", tc.shorts, p)
		}
	}
}

// tidyStarted makes a controller that started alone by the tidy start:
// its probe's four answers all found the bucket at its top and tidy. Its
// latency is then taken as 100 ms (the hold's horizon 1 s).
func tidyStarted(t *testing.T) (*Controller, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	var tks []*Ticket
	for range tidyStartRun {
		tk, wait := c.TryAcquire()
		if tk == nil {
			t.Fatalf("probe refused (wait %s)", wait)
		}
		tks = append(tks, tk)
		clk.Advance(shareProbeGap)
	}
	for _, tk := range tks {
		c.Done(tk, OutcomeOK, loneInfo(tidyBucket(1)))
		clk.Advance(50 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.bank || !c.share.lone() {
		t.Fatalf("four tidy readings at the top: not started alone (bank %v, share %.2f)", c.bank, c.share.frac)
	}
	c.latency = 100 * time.Millisecond
	return c, clk
}

// A gateway that started alone spends its buckets' bank once: the hold
// aims at a fifth of the bucket (16 requests under the top of a bucket of
// 20, learned from the first reading under the top), climbing to it at up
// to half the rate above the pace, and keeps it there; a reading under
// half that floor (someone else takes from the key) ends the bank, and
// the hold goes back to two requests under the top. A gateway that did not
// start alone holds two under the top.
func TestLoneBank(t *testing.T) {
	const lat = 100 * time.Millisecond
	c, clk := tidyStarted(t)
	pace := func() float64 { p, _, _ := c.SharePace(); return p }
	for _, tc := range []struct {
		short float64
		want  float64
		why   string
	}{
		{2, 29.9, "two under the top of a bucket of 20: 14 a second more (the bank), capped at half the rate"},
		{10, 25.9, "ten under: six a second more"},
		{16, 19.9, "at the floor: 99.5 % of the rate"},
		{15, 20.9, "one above the floor: one a second more"},
		{19, 17.9, "under half the floor: the bank ends, 10 % of the rate less"},
		{2, 19.9, "the bank over: two under the top holds the pace"},
	} {
		loneAnswer(c, clk, lat, OutcomeOK, loneInfo(tidyBucket(tc.short)))
		if p := pace(); math.Abs(p-tc.want) > 0.05 {
			t.Errorf("bucket %.0f under its top: pace %.3f, want %.2f (%s)", tc.short, p, tc.want, tc.why)
		}
	}

	// Not started alone (an untidy reading among the probe's): no bank.
	c, clk = loneAt(t, lat)
	for i := 0; i < 2; i++ {
		loneAnswer(c, clk, lat, OutcomeOK, loneInfo(tidyBucket(2)))
	}
	if p := pace(); math.Abs(p-19.9) > 0.05 {
		t.Errorf("not started alone, two under the top: pace %.3f, want 19.9 (no bank)", p)
	}

	// A 429 ends the bank.
	c, clk = tidyStarted(t)
	loneAnswer(c, clk, lat, OutcomeOK, loneInfo(tidyBucket(2)))
	i := loneInfo(tidyBucket(20))
	i.RetryAfter = 50 * time.Millisecond
	loneAnswer(c, clk, 0, OutcomeRateLimited, i)
	c.mu.Lock()
	bank := c.bank
	c.mu.Unlock()
	if bank {
		t.Errorf("after a 429 the bank goes on")
	}
}
