package gateway

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// Numbers an upstream may send that are not numbers of a rate: no
// infinite limit, remaining count or bank, no negative or centuries-long
// Retry-After. Before the fixes "Inf" read as a limit (the pace NaN or
// Inf), a remaining count of "Inf" as -2⁶³, "retry-after: NaN" as -292
// years and a Retry-After date in 9999 held every request for 292 years
// (its numeric forms were already bounded at 10⁶ s).
func TestParseRateInfoHostile(t *testing.T) {
	now := testEpoch
	for _, v := range []string{"Inf", "+Inf", "infinity", "1e400", "NaN", "-Inf"} {
		h := http.Header{}
		h.Set("x-ratelimit-limit-requests", v)
		h.Set("x-ratelimit-remaining-requests", "600")
		h.Set("x-ratelimit-reset-requests", "30s")
		h.Set("anthropic-ratelimit-tokens-limit", "90000")
		h.Set("anthropic-ratelimit-tokens-remaining", v)
		h.Set("anthropic-ratelimit-tokens-reset", now.Add(time.Second).Format(time.RFC3339))
		info := ParseRateInfo(h, now)
		if info.RequestsPerMinute != 0 || info.Buckets[0].OK || info.Buckets[1].OK || info.RequestsBank != -1 || info.TokensBank != -1 {
			t.Errorf("%q: rpm %v, buckets %+v, banks %v %v: want none", v, info.RequestsPerMinute, info.Buckets, info.RequestsBank, info.TokensBank)
		}
		if info.Remaining != 600 || math.IsInf(info.Fraction, 0) || math.IsNaN(info.Fraction) {
			t.Errorf("%q: remaining %d, fraction %v: want 600 and a finite fraction", v, info.Remaining, info.Fraction)
		}
	}
	for _, ra := range []string{"NaN", "-Inf", "Inf", "1e7", now.Add(12 * 24 * time.Hour).Format(http.TimeFormat), "Fri, 31 Dec 9999 23:59:59 GMT"} {
		h := http.Header{}
		h.Set("retry-after", ra)
		if got := ParseRateInfo(h, now).RetryAfter; got != 0 {
			t.Errorf("retry-after %q read as %v, want 0 (not read)", ra, got)
		}
	}
	h := http.Header{}
	h.Set("retry-after", now.Add(11*24*time.Hour).Format(http.TimeFormat))
	if got := ParseRateInfo(h, now).RetryAfter; got != 11*24*time.Hour {
		t.Errorf("retry-after in 11 days read as %v", got)
	}
}

// A 429 whose Retry-After is a date in 9999 does not hold the gateway:
// the next request goes once the episode's cooldown is over, not in 292
// years.
func TestRetryAfterDateFarAhead(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	c := NewController(StewardPolicy(), clk)
	tk, _ := c.TryAcquire()
	clk.Advance(time.Second)
	h := http.Header{}
	h.Set("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")
	c.Done(tk, OutcomeRateLimited, ParseRateInfo(h, clk.Now()))
	for i := 0; ; i++ {
		if tk, hold := c.TryAcquire(); tk != nil {
			break
		} else if i > 600 {
			t.Fatalf("no admission a minute after the 429 (hold %v)", hold)
		}
		clk.Advance(100 * time.Millisecond)
	}
}

// Finite but enormous numbers: a remaining count beyond int64 stays a
// large count (it read as −2⁶³), and a bucket whose reset says it would
// last for millennia holds that long (heldFor overflowed into a negative
// duration, so a first answer after a slow call read as one from a bucket
// that held less than the call's latency: the probe went on).
func TestParseRateInfoHuge(t *testing.T) {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "1e300")
	h.Set("x-ratelimit-remaining-requests", "9.9e299")
	h.Set("x-ratelimit-reset-requests", "2562047h")
	info := ParseRateInfo(h, testEpoch)
	if info.Remaining <= 0 || math.Abs(info.Fraction-0.99) > 1e-9 {
		t.Fatalf("remaining %d, fraction %v: want a large count, 0.99", info.Remaining, info.Fraction)
	}
	var s keyShare
	r := shareReading{at: testEpoch, f: [2]float64{0.99}, ok: [2]bool{true}}
	if d := s.heldFor(r, info.Buckets); d < 1000*time.Hour {
		t.Fatalf("a bucket 99 %% full with a 2 562 047 h reset holds %v", d)
	}
}
