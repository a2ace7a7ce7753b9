package gateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

var noInfo = RateInfo{Fraction: -1, Remaining: -1}

func acquireN(t *testing.T, c *Controller, n int) []*Ticket {
	t.Helper()
	var ts []*Ticket
	for i := 0; i < n; i++ {
		tk, _ := c.TryAcquire()
		if tk == nil {
			t.Fatalf("acquire %d of %d refused (limit %d, in flight %d)", i+1, n, c.Limit(), c.InFlight())
		}
		ts = append(ts, tk)
	}
	return ts
}

func TestControllerGrowsOnlyWhenSaturated(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	if c.Limit() != 20 {
		t.Fatalf("start limit = %d, want 20", c.Limit())
	}
	// 100 requests one at a time never fill the limit: no growth.
	for i := 0; i < 100; i++ {
		tk := acquireN(t, c, 1)[0]
		clk.Advance(100 * time.Millisecond)
		c.Done(tk, OutcomeOK, noInfo)
	}
	if c.Limit() != 20 {
		t.Fatalf("limit grew to %d while unused", c.Limit())
	}
	// Fill it: the next success grows it (slow start: +1).
	ts := acquireN(t, c, 20)
	if tk, _ := c.TryAcquire(); tk != nil {
		t.Fatal("21st request admitted at limit 20")
	}
	clk.Advance(100 * time.Millisecond)
	c.Done(ts[0], OutcomeOK, noInfo)
	if c.Limit() != 21 {
		t.Fatalf("limit after a saturated success = %d, want 21", c.Limit())
	}
	// The growth consumed the saturation: more successes with no new
	// saturation do not grow it.
	for _, tk := range ts[1:] {
		c.Done(tk, OutcomeOK, noInfo)
	}
	if c.Limit() != 21 {
		t.Fatalf("limit = %d after unsaturated successes, want 21", c.Limit())
	}
	w := c.Window()
	if !w.Saturated || w.Peak != 20 {
		t.Fatalf("window = %+v, want saturated with peak 20", w)
	}
	if w2 := c.Window(); w2.Saturated || w2.Peak != 0 {
		t.Fatalf("window not reset: %+v", w2)
	}
}

// saturate keeps the limit full and returns successes until the limit stops moving or n rounds.
func driveSaturated(c *Controller, clk *clock.Fake, rounds int, info RateInfo) {
	for i := 0; i < rounds; i++ {
		var ts []*Ticket
		for {
			tk, _ := c.TryAcquire()
			if tk == nil {
				break
			}
			ts = append(ts, tk)
		}
		clk.Advance(100 * time.Millisecond)
		for _, tk := range ts {
			c.Done(tk, OutcomeOK, info)
		}
	}
}

func TestControllerSlowStartThenAdditive(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	p := StewardPolicy()
	p.Max = 1000
	c := NewController(p, clk)
	driveSaturated(c, clk, 1, noInfo)
	if got := c.Limit(); got < 21 {
		t.Fatalf("slow start did not grow: %d", got)
	}
	// Cut once, then growth is additive: about +1 per round of a full limit.
	ts := acquireN(t, c, c.Limit()-c.InFlight())
	clk.Advance(time.Second)
	c.Done(ts[0], OutcomeRateLimited, noInfo)
	for _, tk := range ts[1:] {
		c.Done(tk, OutcomeOK, noInfo)
	}
	after := c.Limit()
	clk.Advance(10 * time.Second) // past the cooldown
	driveSaturated(c, clk, 5, noInfo)
	if got := c.Limit(); got < after+3 || got > after+6 {
		t.Fatalf("additive increase over 5 full rounds: %d -> %d, want about +5", after, got)
	}
}

// noProbe is StewardPolicy without the key share, whose probe admits four
// requests a second until the first answer: the tests that fill the limit
// at once before any answer pin the limit's own rules.
func noProbe() Policy {
	p := StewardPolicy()
	p.ShareKey = false
	return p
}

func TestControllerOneCutPerEpisode(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(noProbe(), clk)
	ts := acquireN(t, c, 20)
	clk.Advance(200 * time.Millisecond)
	// All 20 in-flight requests come back 429: one episode, one cut.
	for _, tk := range ts {
		c.Done(tk, OutcomeRateLimited, noInfo)
	}
	if got := c.Limit(); got != 15 {
		t.Fatalf("limit after one episode = %d, want 15 (20 × 0.75)", got)
	}
	if c.Episodes() != 1 {
		t.Fatalf("episodes = %d, want 1", c.Episodes())
	}
	// A request sent before the cut that comes back 429 after the cooldown
	// still belongs to the old episode.
	clk.Advance(time.Second)
	old := acquireN(t, c, 1)[0]
	old.start = clk.Now().Add(-5 * time.Second)
	c.Done(old, OutcomeRateLimited, noInfo)
	if c.Episodes() != 1 || c.Limit() != 15 {
		t.Fatalf("stale 429 started a new episode: episodes %d limit %d", c.Episodes(), c.Limit())
	}
	// A new 429 after the cooldown, for a request sent after the cut: second episode.
	clk.Advance(time.Minute)
	ts = acquireN(t, c, 15)
	clk.Advance(100 * time.Millisecond)
	c.Done(ts[0], OutcomeRateLimited, noInfo)
	if c.Episodes() != 2 || c.Limit() != 11 {
		t.Fatalf("second episode: episodes %d limit %d, want 2 and 11", c.Episodes(), c.Limit())
	}
	for _, tk := range ts[1:] {
		c.Done(tk, OutcomeOK, noInfo)
	}
	// A 429 while the limit is barely used cuts from what is in flight, so the cut bites.
	clk.Advance(time.Minute)
	tk := acquireN(t, c, 1)[0]
	c.Done(tk, OutcomeRateLimited, noInfo)
	if c.Episodes() != 3 || c.Limit() != 1 {
		t.Fatalf("third episode with 1 in flight: episodes %d limit %d, want 3 and 1", c.Episodes(), c.Limit())
	}
	w := c.Window()
	if w.Episodes != 3 || w.RateLimited != 23 || !w.Pushback {
		t.Fatalf("window = %+v", w)
	}
	h := c.History()
	var cuts int
	for _, e := range h {
		if strings.HasPrefix(e.Reason, "rate-limit episode") {
			cuts++
		}
	}
	if cuts != 3 {
		t.Fatalf("history has %d cuts, want 3: %+v", cuts, h)
	}
}

func TestControllerMinimum(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	p := InspectPolicy()
	c := NewController(p, clk)
	for i := 0; i < 20; i++ {
		tk := acquireN(t, c, 1)[0]
		clk.Advance(time.Hour)
		c.Done(tk, OutcomeRateLimited, noInfo)
	}
	if c.Limit() != 10 {
		t.Fatalf("inspect limit after many episodes = %d, want min 10", c.Limit())
	}
	c2 := NewController(StewardPolicy(), clk)
	for i := 0; i < 30; i++ {
		tk := acquireN(t, c2, 1)[0]
		clk.Advance(time.Hour)
		c2.Done(tk, OutcomeRateLimited, noInfo)
	}
	if c2.Limit() != 1 {
		t.Fatalf("steward limit after many episodes = %d, want min 1", c2.Limit())
	}
}

// testEpoch is where the tests' fake clocks start.
var testEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestControllerRetryAfterHonoured(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(noProbe(), clk)
	ts := acquireN(t, c, 20)
	c.Done(ts[0], OutcomeRateLimited, RateInfo{Fraction: -1, Remaining: -1, RetryAfter: 30 * time.Second})
	// Hold: nothing new goes upstream before Retry-After has passed.
	tk, hold := c.TryAcquire()
	if tk != nil || hold != 30*time.Second {
		t.Fatalf("during Retry-After: admitted=%v hold=%s, want refused for 30s", tk != nil, hold)
	}
	// Acquire waits the hold out on the clock; it says when (on the clock)
	// it returned, which can only be once the clock reached Retry-After.
	type acquired struct {
		tk *Ticket
		at time.Time
	}
	got := make(chan acquired)
	go func() {
		tk, _ := c.Acquire(context.Background())
		got <- acquired{tk, clk.Now()}
	}()
	clk.BlockUntil(1) // Acquire waits on its hold's timer
	select {
	case <-got:
		t.Fatal("Acquire returned during the hold")
	default:
	}
	for _, tk := range ts[1:] {
		c.Done(tk, OutcomeOK, noInfo) // no growth inside the cooldown
	}
	if c.Limit() != 15 {
		t.Fatalf("limit moved during the cooldown: %d", c.Limit())
	}
	clk.Advance(29 * time.Second)
	if _, hold := c.TryAcquire(); hold != time.Second {
		t.Fatalf("1s before Retry-After ended: hold %s, want 1s", hold)
	}
	clk.Advance(time.Second)
	select {
	case a := <-got:
		if a.tk == nil {
			t.Fatal("no ticket")
		}
		if end := testEpoch.Add(30 * time.Second); a.at.Before(end) {
			t.Fatalf("Acquire returned at %s, %s before Retry-After ended", a.at.Format(time.TimeOnly), end.Sub(a.at))
		}
		tk := a.tk
		// No rate-limit headers: after the 429 admissions are paced by
		// Retry-After until a success comes with no 429 for a while.
		if !c.Pacing() {
			t.Fatal("not pacing after a 429")
		}
		clk.Advance(2 * time.Second)
		c.Done(tk, OutcomeOK, noInfo)
		if c.Pacing() {
			t.Fatal("still pacing after a quiet success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still blocked after Retry-After")
	}
	// Past the cooldown growth resumes once saturated (additive now).
	driveSaturated(c, clk, 3, noInfo)
	if c.Limit() <= 15 {
		t.Fatalf("no growth after the cooldown: %d", c.Limit())
	}
}

func TestControllerHeadersSlowDownBefore429(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	low := RateInfo{Fraction: 0.05, Remaining: 50}
	driveSaturated(c, clk, 3, low)
	if c.Limit() != 20 {
		t.Fatalf("limit grew to %d while remaining quota was low", c.Limit())
	}
	if w := c.Window(); !w.Pushback || w.RateLimited != 0 {
		t.Fatalf("low remaining not reported as pushback: %+v", w)
	}
	crit := RateInfo{Fraction: 0.01, Remaining: 1}
	ts := acquireN(t, c, 20)
	clk.Advance(100 * time.Millisecond)
	for _, tk := range ts {
		c.Done(tk, OutcomeOK, crit)
	}
	if c.Limit() != 18 {
		t.Fatalf("gentle cut: limit %d, want 18 (one ×0.9 cut for the burst)", c.Limit())
	}
	if c.Episodes() != 0 {
		t.Fatal("a header slowdown counted as a rate-limit episode")
	}
	// Inspect-style ignores headers.
	ci := NewController(InspectPolicy(), clk)
	driveSaturated(ci, clk, 1, crit)
	if ci.Limit() <= 20 {
		t.Fatalf("inspect policy should ignore headers and grow, got %d", ci.Limit())
	}
}

func TestControllerCeilingRaiseAndClamp(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	c.SetCeiling(24)
	driveSaturated(c, clk, 20, noInfo)
	if c.Limit() != 24 {
		t.Fatalf("limit = %d, want stopped at ceiling 24", c.Limit())
	}
	c.SetCeiling(200) // the ramp raises it (R3)
	driveSaturated(c, clk, 3, noInfo)
	if c.Limit() <= 24 {
		t.Fatalf("limit did not grow after the ceiling rose: %d", c.Limit())
	}
	// An episode, then Clamp: the ceiling comes down to where the limit fell (R2).
	ts := acquireN(t, c, c.Limit()-c.InFlight())
	clk.Advance(time.Second)
	for _, tk := range ts {
		c.Done(tk, OutcomeRateLimited, noInfo)
	}
	fell := c.Limit()
	c.Clamp()
	if c.Ceiling() != fell {
		t.Fatalf("ceiling after clamp = %d, want %d", c.Ceiling(), fell)
	}
	clk.Advance(time.Minute)
	driveSaturated(c, clk, 10, noInfo)
	if c.Limit() != fell {
		t.Fatalf("limit grew past the clamp: %d > %d", c.Limit(), fell)
	}
	// Lowering the ceiling below the limit brings the limit down.
	c.SetCeiling(5)
	if c.Limit() != 5 {
		t.Fatalf("limit = %d after ceiling 5", c.Limit())
	}
	var reasons []string
	for _, h := range c.History() {
		reasons = append(reasons, h.Reason)
	}
	joined := strings.Join(reasons, ",")
	for _, want := range []string{"ceiling", "clamp", "rate-limit episode", "slow start"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("history lacks %q: %s", want, joined)
		}
	}
}

func TestControllerFixedUntouched(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(FixedPolicy(10), clk)
	driveSaturated(c, clk, 5, noInfo)
	ts := acquireN(t, c, 10)
	for _, tk := range ts {
		c.Done(tk, OutcomeRateLimited, RateInfo{Fraction: 0, Remaining: 0, RetryAfter: time.Second})
	}
	c.SetCeiling(100)
	c.Clamp()
	driveSaturated(c, clk, 5, RateInfo{Fraction: 0, Remaining: 0})
	if c.Limit() != 10 || c.Ceiling() != 10 || !c.Fixed() {
		t.Fatalf("fixed controller moved: limit %d ceiling %d", c.Limit(), c.Ceiling())
	}
	if tk, _ := c.TryAcquire(); tk == nil {
		t.Fatal("fixed mode held requests after a 429")
	}
}

func TestControllerAcquireBlocksUntilDone(t *testing.T) {
	c := NewController(FixedPolicy(1), clock.NewFake(testEpoch))
	first, _ := c.TryAcquire()
	// The second Acquire may return only after Done: whether Done had
	// begun when it returned is recorded, not guessed from a pause.
	var doneBegun atomic.Bool
	got := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background())
		if err == nil && !doneBegun.Load() {
			err = errors.New("second Acquire admitted at limit 1, before Done")
		}
		got <- err
	}()
	doneBegun.Store(true)
	c.Done(first, OutcomeOK, noInfo)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(ctx); err == nil {
		t.Fatal("Acquire on a full limit with a cancelled context succeeded")
	}
}

func TestParseRateInfo(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		h     map[string]string
		frac  float64
		rem   int64
		retry time.Duration
	}{
		{"none", nil, -1, -1, 0},
		{"openai", map[string]string{"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "40",
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "100"}, 0.1, 40, 0},
		{"anthropic", map[string]string{"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "5",
			"anthropic-ratelimit-output-tokens-limit": "1000", "anthropic-ratelimit-output-tokens-remaining": "900"}, 0.1, 5, 0},
		{"retry-after seconds", map[string]string{"retry-after": "3"}, -1, -1, 3 * time.Second},
		{"retry-after-ms wins", map[string]string{"retry-after": "3", "retry-after-ms": "250"}, -1, -1, 250 * time.Millisecond},
		{"retry-after date", map[string]string{"retry-after": now.Add(7 * time.Second).Format(http.TimeFormat)}, -1, -1, 7 * time.Second},
		{"remaining zero without limit", map[string]string{"x-ratelimit-remaining-requests": "0"}, 0, 0, 0},
		{"garbage", map[string]string{"x-ratelimit-remaining-requests": "lots", "retry-after": "soon"}, -1, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			got := ParseRateInfo(h, now)
			if got.Fraction != tc.frac || got.Remaining != tc.rem || got.RetryAfter != tc.retry {
				t.Fatalf("got %+v, want fraction %v remaining %d retry %s", got, tc.frac, tc.rem, tc.retry)
			}
		})
	}
}

func TestControllerPacesAtTheAnnouncedRate(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	// 60 RPM announced, remaining quota low: admissions are spaced at
	// 60/0.97 per minute, whatever the concurrency limit allows.
	low := RateInfo{Fraction: 0.05, Remaining: 3, RequestsPerMinute: 60}
	tk := acquireN(t, c, 1)[0]
	clk.Advance(time.Second)
	c.Done(tk, OutcomeOK, low)
	if !c.Pacing() {
		t.Fatal("not pacing with 5% of the quota left")
	}
	first, _ := c.TryAcquire()
	if first == nil {
		t.Fatal("first paced request refused")
	}
	if tk, wait := c.TryAcquire(); tk != nil || wait < time.Second || wait > 1100*time.Millisecond {
		t.Fatalf("second request admitted=%v wait=%s, want refused for ~1.03s", tk != nil, wait)
	}
	clk.Advance(1031 * time.Millisecond)
	if tk, _ := c.TryAcquire(); tk == nil {
		t.Fatal("refused after the pace gap")
	}
	// A TPM limit over the tokens a request uses sets the pace too: 6000
	// TPM at 1000 tokens a request is 6 a minute, 10.3 s apart.
	c2 := NewController(StewardPolicy(), clk)
	tk = acquireN(t, c2, 1)[0]
	c2.Done(tk, OutcomeOK, RateInfo{Fraction: 0.05, Remaining: 300, TokensPerMinute: 6000, Tokens: 1000})
	acquireN(t, c2, 1)
	if _, wait := c2.TryAcquire(); wait < 10*time.Second || wait > 11*time.Second {
		t.Fatalf("TPM pace gap %s, want ~10.3s", wait)
	}
	// With a rate announced, pacing is how the rate is held: it stays on
	// when the quota recovers (Little's law, not a stop-and-go).
	clk.Advance(2 * time.Second)
	tk = acquireN(t, c, 1)[0]
	c.Done(tk, OutcomeOK, RateInfo{Fraction: 0.5, Remaining: 30, RequestsPerMinute: 60})
	if !c.Pacing() {
		t.Fatal("pacing stopped although the provider announces its rate")
	}
	// Fixed mode never paces.
	cf := NewController(FixedPolicy(4), clk)
	tk = acquireN(t, cf, 1)[0]
	cf.Done(tk, OutcomeRateLimited, RateInfo{Fraction: 0, Remaining: 0, RequestsPerMinute: 60, RetryAfter: time.Second})
	acquireN(t, cf, 4)
}

// TestControllerWeighsTheGapByTheRequestsSize: while the tokens limit holds
// the pace, the gap after a request is the pace's gap weighed by what the
// request costs against the average one, its input moving with its size
// and its output the average's; the requests limit's gap is a floor, a
// weight is held within [¼, 4], and a request of untold size keeps the
// plain gap.
func TestControllerWeighsTheGapByTheRequestsSize(t *testing.T) {
	learned := func(rpm, tpm float64) (*Controller, *clock.Fake) {
		clk := clock.NewFake(testEpoch)
		c := NewController(StewardPolicy(), clk)
		// One answered request of size 1 000: 1 000 tokens, 800 of them
		// input. Remaining 5 %: pacing.
		tk, _ := c.TryAcquireSized(1000)
		clk.Advance(time.Second)
		c.Done(tk, OutcomeOK, RateInfo{Fraction: 0.05, Remaining: 3, RequestsPerMinute: rpm, TokensPerMinute: tpm, Tokens: 1000, InputTokens: 800})
		if !c.Pacing() {
			t.Fatal("not pacing")
		}
		return c, clk
	}
	gapAfter := func(c *Controller, clk *clock.Fake, size float64) time.Duration {
		t.Helper()
		clk.Advance(time.Hour) // any earlier schedule is long past
		first, _ := c.TryAcquireSized(size)
		if first == nil {
			t.Fatalf("size %v refused with the schedule past", size)
		}
		tk, wait := c.TryAcquireSized(size)
		if tk != nil || wait <= 0 {
			t.Fatalf("size %v: a second request admitted at once (or held with no wait)", size)
		}
		// Given up on: nothing learned, nothing left in flight (and the
		// weight's extra given back: the next case starts clean anyway).
		c.Done(first, OutcomeCancelled, RateInfo{})
		return wait
	}
	near := func(got, want time.Duration) bool {
		return math.Abs(float64(got-want)) <= 0.01*float64(want)
	}
	// 6 000 TPM at 1 000 tokens a request (6 a minute) under 600 RPM: the
	// tokens hold the pace, 60/6/0.97 = 10.31 s apart.
	c, clk := learned(600, 6000)
	plain := c.paceGap()
	if !near(plain, 10309*time.Millisecond) {
		t.Fatalf("plain gap %v, want 10.31 s", plain)
	}
	for _, tc := range []struct {
		size   float64
		weight float64
	}{
		{0, 1},                  // untold
		{1000, 1},               // the average
		{2000, 1.8},             // twice the input: 1 000 + 800 tokens
		{250, 0.4},              // a quarter of it: 1 000 − 600
		{100000, maxCostWeight}, // an image's bytes
		{1, minCostWeight},
	} {
		if got, want := gapAfter(c, clk, tc.size), time.Duration(tc.weight*float64(plain)); !near(got, want) {
			t.Errorf("size %v: gap %v, want %v (weight %v)", tc.size, got, want, tc.weight)
		}
	}
	// Weighed, the pace keeps its rate: over requests whose sizes average
	// what the controller learned, the gaps average the plain one.
	var sum time.Duration
	sizes := []float64{500, 1500, 750, 1250, 1000, 600, 1400}
	for _, size := range sizes {
		sum += gapAfter(c, clk, size)
	}
	if mean := sum / time.Duration(len(sizes)); !near(mean, plain) {
		t.Errorf("mean gap over sizes averaging the learned one %v, want the plain %v", mean, plain)
	}
	// A large request answered with no usage (a 400 for a bad body): it
	// cost nothing, so the schedule gives back what its size added, and
	// the next request waits the plain gap. A sandbox's large bodies that
	// the provider refuses cannot take four gaps a turn. (A 429 keeps it:
	// the key is over.)
	clk.Advance(time.Hour)
	big, _ := c.TryAcquireSized(100000)
	if big == nil {
		t.Fatal("a large request refused with the schedule past")
	}
	if _, wait := c.TryAcquireSized(1000); !near(wait, maxCostWeight*plain) {
		t.Fatalf("after a large request: wait %v, want %v", wait, maxCostWeight*plain)
	}
	c.Done(big, OutcomeOK, RateInfo{Fraction: 0.05, Remaining: 3, RequestsPerMinute: 600, TokensPerMinute: 6000})
	if _, wait := c.TryAcquireSized(1000); !near(wait, plain) {
		t.Fatalf("after a large request answered with no usage: wait %v, want the plain gap %v", wait, plain)
	}
	// A slow key (600 TPM at 1 000 tokens: one request a minute and more
	// apart): a large request's gap, four of the pace's, is not taken
	// for a schedule left by a pace long gone (over a minute's wait).
	slow, slowClk := learned(600, 1000)
	gSlow := slow.paceGap()
	if got := gapAfter(slow, slowClk, 100000); !near(got, maxCostWeight*gSlow) {
		t.Errorf("slow key: a large request's gap %v, want %v", got, maxCostWeight*gSlow)
	}
	// Not a size: untold.
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5} {
		if got := gapAfter(slow, slowClk, bad); !near(got, gSlow) {
			t.Errorf("size %v: gap %v, want the plain %v", bad, got, gSlow)
		}
	}
	// 6 RPM over 60 000 TPM: the requests hold the pace; a request costing
	// four times the average still fits in the requests' gap, a small one
	// never goes sooner.
	c, clk = learned(6, 60000)
	plain = c.paceGap()
	for _, size := range []float64{1, 1000, 100000} {
		if got := gapAfter(c, clk, size); !near(got, plain) {
			t.Errorf("requests bound, size %v: gap %v, want the requests' %v", size, got, plain)
		}
	}
	// 12 RPM over 6 000 TPM: tokens bind at 6 a minute, the requests' gap
	// is half the pace's, so a small request waits that half, not less.
	c, clk = learned(12, 6000)
	plain = c.paceGap()
	if got := gapAfter(c, clk, 1); !near(got, plain/2) {
		t.Errorf("small request: gap %v, want the requests' %v", got, plain/2)
	}
}

func TestControllerLittleCap(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	// 600 RPM (10/s) and 2 s per request: about 20 in flight use the limit;
	// the limit goes to Little's target 1.2 × 0.97 × 10/s × 2 s + 2 ≈ 26 and
	// no further, even with plenty of quota.
	info := RateInfo{Fraction: 0.9, Remaining: 540, RequestsPerMinute: 600}
	for i := 0; i < 30; i++ {
		var ts []*Ticket
		for {
			tk, _ := c.TryAcquire()
			if tk == nil {
				break
			}
			ts = append(ts, tk)
		}
		clk.Advance(2 * time.Second)
		for _, tk := range ts {
			c.Done(tk, OutcomeOK, info)
		}
	}
	if got := c.Limit(); got < 25 || got > 29 {
		t.Fatalf("limit %d, want about 26 (Little's law target)", got)
	}
	// Inspect-style has no such cap.
	ci := NewController(InspectPolicy(), clk)
	driveSaturated(ci, clk, 30, info)
	if ci.Limit() < 90 {
		t.Fatalf("inspect limit %d", ci.Limit())
	}
}

// No fixed maximum below what the limit needs: the default ceiling is the
// hard one (100 000), a configured hard ceiling caps the ramp's, and 0
// hands the ceiling back when the ramp lets go.
func TestControllerHardCeiling(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	if c.Ceiling() != 100000 {
		t.Fatalf("default ceiling %d, want 100000 (no fixed maximum)", c.Ceiling())
	}
	// 60 000 RPM at 2 s a call wants about 2 300 in flight: the limit goes there.
	info := RateInfo{Fraction: 0.9, Remaining: 54000, RequestsPerMinute: 60000}
	driveLatency(c, clk, 3, 2*time.Second, info)
	if got := c.Limit(); got < 2000 || got > 2500 {
		t.Fatalf("limit %d, want about 1.2 × 0.97 × 1000/s × 2 s + 2 = 2330", got)
	}
	p := StewardPolicy()
	p.HardMax = 500
	c = NewController(p, clk)
	c.SetCeiling(12000) // the ramp's sum of setpoints
	if c.Ceiling() != 500 {
		t.Fatalf("ceiling %d above the hard ceiling 500", c.Ceiling())
	}
	driveLatency(c, clk, 3, 2*time.Second, info)
	if c.Limit() != 500 {
		t.Fatalf("limit %d, want the hard ceiling 500", c.Limit())
	}
	c.SetCeiling(24)
	c.SetCeiling(0)
	if c.Ceiling() != 500 {
		t.Fatalf("ceiling %d after SetCeiling(0), want it handed back (500)", c.Ceiling())
	}
}

// driveLatency fills the limit, lets lat pass and answers everything, rounds times.
func driveLatency(c *Controller, clk *clock.Fake, rounds int, lat time.Duration, info RateInfo) {
	for i := 0; i < rounds; i++ {
		var ts []*Ticket
		for {
			tk, _ := c.TryAcquire()
			if tk == nil {
				break
			}
			ts = append(ts, tk)
		}
		clk.Advance(lat)
		for _, tk := range ts {
			c.Done(tk, OutcomeOK, info)
		}
	}
}

// The bank of a bucket comes from the remaining count and the reset time;
// a short-interval bucket, a full one, or a reset to the second banks nothing.
func TestParseRateInfoBank(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    map[string]string
		reqs float64
	}{
		// 300 a minute, 45 left, full again in 51 s: a minute's bucket holding 45.
		{"minute bucket", map[string]string{"x-ratelimit-limit-requests": "300", "x-ratelimit-remaining-requests": "45", "x-ratelimit-reset-requests": "51s"}, 45},
		// 1 200 a minute per second: 600 "left" is 10 of 20, full in 500 ms.
		{"one-second bucket", map[string]string{"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "600", "x-ratelimit-reset-requests": "500ms"}, -1},
		{"full", map[string]string{"x-ratelimit-limit-requests": "300", "x-ratelimit-remaining-requests": "300", "x-ratelimit-reset-requests": "0s"}, -1},
		{"anthropic reset to the second", map[string]string{"anthropic-ratelimit-requests-limit": "300", "anthropic-ratelimit-requests-remaining": "45",
			"anthropic-ratelimit-requests-reset": now.Add(51 * time.Second).Format(time.RFC3339)}, -1},
		{"garbage", map[string]string{"x-ratelimit-limit-requests": "300", "x-ratelimit-remaining-requests": "45", "x-ratelimit-reset-requests": "soon"}, -1},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := ParseRateInfo(h, now).RequestsBank; math.Abs(got-tc.reqs) > 1e-9 {
			t.Errorf("%s: bank %v, want %v", tc.name, got, tc.reqs)
		}
	}
	// Spent on top of the pace: 600 RPM (10/s) with 500 banked of a
	// minute's bucket is 10 × 0.97 + (500 − 60)/10 s = 53.7 a second.
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	tk := acquireN(t, c, 1)[0]
	clk.Advance(time.Second)
	c.Done(tk, OutcomeOK, RateInfo{Fraction: 0.8, Remaining: 500, RequestsPerMinute: 600, RequestsBank: 500, TokensBank: -1})
	// Admit at one instant until the pace refuses: n admissions took the
	// schedule from 20 ms behind (the slack) to wait ahead, n gaps.
	n, wait := 0, time.Duration(0)
	for {
		tk, w := c.TryAcquire()
		if tk == nil {
			wait = w
			break
		}
		n++
	}
	if gap := (wait + paceSlack) / time.Duration(n); gap < 18*time.Millisecond || gap > 19200*time.Microsecond {
		t.Fatalf("pace gap with a bank %s (%d admitted, wait %s), want 1/53.7 s ≈ 18.6 ms", gap, n, wait)
	}
}
