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
