package gateway

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// Hostile or broken rate-limit headers and usage, fed to one gateway's
// controller on a fake clock (issue 25's pacing for a shared key): the
// upstream is untrusted, the agent in the sandbox sets the tokens a
// request uses. Whatever they say, the pace stays a finite number above
// zero, and once the provider answers sanely again the gateway paces at
// the key's rate: no NaN that sticks, no stall, no 429 storm.

// Every attack runs for 30 s (six calls' latency at 10 s calls), the
// upstream's broken headers or usage in a share of its answers, then sane
// answers: through it the pace is a finite number (the gap never
// negative), and after it (10 s or six latencies to settle, longer where
// the tokens a request uses must average back) the gateway
// sends 85–101 % of the key's rate with few 429s. Before the fixes: Inf
// limits made the pace NaN (pacing off: a 429 storm), a limit of 1e-300
// a minute or usage of 2⁶³ tokens overflowed the gap into a negative one
// (everything admitted at once), and usage of 10¹⁵ tokens left a pace of
// one request in centuries after the upstream came back to its senses.
func TestHostileRateHeaders(t *testing.T) {
	type attack struct {
		name   string
		settle time.Duration
		f      func(h http.Header, tokens *int64, o *Outcome)
		every  int
	}
	set := func(kv ...string) func(http.Header, *int64, *Outcome) {
		return func(h http.Header, _ *int64, _ *Outcome) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] == "" {
					h.Del(kv[i])
				} else {
					h.Set(kv[i], kv[i+1])
				}
			}
		}
	}
	const (
		lim, rem, reset         = "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"
		tlim, trem, treset      = "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"
		alim, arem, areset      = "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"
		settle, settleTokens    = 10 * time.Second, 5 * time.Minute
		tokensMax, tokensAbsurd = math.MaxInt64, int64(1e15)
		tokensTPM, everyAnswer  = int64(1200000), 1
	)
	usage := func(n int64) func(http.Header, *int64, *Outcome) {
		return func(h http.Header, tokens *int64, _ *Outcome) {
			set(tlim, "1200000", trem, "1200000", treset, "0s")(h, tokens, nil)
			*tokens = n
		}
	}
	attacks := []attack{
		{"limit Inf", settle, set(lim, "Inf"), 7},
		{"limit and remaining +Inf", settle, set(lim, "+Inf", rem, "Inf"), 7},
		{"limit infinity, remaining 1e400", settle, set(lim, "infinity", rem, "1e400"), 3},
		{"limit 1e-300", settle, set(lim, "1e-300"), 7},
		{"remaining NaN", settle, set(rem, "NaN"), 3},
		{"remaining over the limit", settle, set(rem, "1e9"), 3},
		{"remaining negative", settle, set(rem, "-5"), 3},
		{"reset -5s", settle, set(reset, "-5s"), 2},
		{"reset 2562047h", settle, set(reset, "2562047h"), 2},
		{"reset 1e308ms", settle, set(reset, "1e308ms"), 2},
		{"reset NaNs", settle, set(reset, "NaNs"), 2},
		{"reset year 9999", settle, set(reset, "9999-12-31T23:59:59Z"), 2},
		{"reset year 1", settle, set(reset, "0001-01-01T00:00:00Z"), 2},
		{"full then empty", settle, set(rem, "0", reset, "1s"), 2},
		{"empty, reset 0s", settle, set(rem, "0", reset, "0s"), 2},
		{"interval 60 times longer", settle, func(h http.Header, tokens *int64, o *Outcome) {
			r, _ := time.ParseDuration(h.Get(reset))
			h.Set(reset, (60 * r).String())
		}, 2},
		{"anthropic reset an hour ago", settle, func(h http.Header, tokens *int64, o *Outcome) {
			set(alim, "1200", arem, h.Get(rem), areset, testEpoch.Add(-time.Hour).Format(time.RFC3339Nano), lim, "")(h, tokens, o)
		}, everyAnswer},
		{"retry-after NaN", settle, func(h http.Header, _ *int64, o *Outcome) {
			if *o == OutcomeRateLimited {
				h.Del("retry-after-ms")
				h.Set("retry-after", "NaN")
			}
		}, everyAnswer},
		{"429s without headers", settle, func(h http.Header, _ *int64, o *Outcome) {
			if *o == OutcomeRateLimited {
				for k := range h {
					delete(h, k)
				}
			}
		}, everyAnswer},
		{"tokens bucket Inf", settle, set(tlim, "Inf", trem, "Inf", treset, "1s"), everyAnswer},
		{"tokens bucket alone, no usage", settle, func(h http.Header, tokens *int64, o *Outcome) {
			set(lim, "", tlim, "1200000", trem, "600000", treset, "500ms")(h, tokens, o)
			*tokens = 0
		}, everyAnswer},
		{"usage 2^63-1 tokens", settleTokens, usage(tokensMax), 5},
		{"usage 1e15 tokens", settleTokens, usage(tokensAbsurd), 5},
		{"usage the whole TPM", settleTokens, usage(tokensTPM), 5},
	}
	for _, lat := range []time.Duration{time.Second, 10 * time.Second} {
		for _, a := range attacks {
			t.Run(fmt.Sprintf("%v/%s", lat, a.name), func(t *testing.T) {
				n := 0
				d := newKeySim(t, 1, 1200, 0, 0, lat)
				d.fast429 = lat > time.Second // at slow calls the 429s come back first
				d.hostile = func(_ time.Time, h http.Header, tokens *int64, o *Outcome) {
					if n++; n%a.every == 0 {
						a.f(h, tokens, o)
					}
				}
				attack := max(30*time.Second, 6*lat)
				d.run(attack)
				s, r := d.mark()
				t.Logf("while attacked: %.2f of the key's rate, %d of %d refused", float64(s)/attack.Seconds()/20, r, s)
				d.sane(a.name, max(a.settle, 6*lat), 30*time.Second, 0.85, 1.01)
			})
		}
	}
}

// Two broken upstreams that hold the pace at its floor (2 % of the key's
// rate) for as long as they answer so, while every request goes through:
// the key share trusts the remaining counts, and needs readings to climb.
// bucketsOn429sOnly is an upstream that tells its buckets on 429s only;
// usage false: its served answers carry no usage either (not completions:
// an agent's models list).
func bucketsOn429sOnly(usage bool) func(time.Time, http.Header, *int64, *Outcome) {
	return func(_ time.Time, h http.Header, tok *int64, o *Outcome) {
		if *o == OutcomeRateLimited {
			return
		}
		for k := range h {
			delete(h, k)
		}
		if !usage {
			*tok = 0
		}
	}
}

// TestHeadersOn429sOnlyDoNotHoldTheFloor: a provider that tells its
// buckets on 429s only (the first reading a 429: the share at the floor,
// and at the floor no 429 comes again) does not hold the pace there: served
// completions with no reading for a span drop the share (keyShare.unread).
func TestHeadersOn429sOnlyDoNotHoldTheFloor(t *testing.T) {
	for _, lat := range []time.Duration{time.Second, 10 * time.Second} {
		t.Run(lat.String(), func(t *testing.T) {
			d := newKeySim(t, 1, 1200, 0, 0, lat)
			d.fast429 = true
			d.hostile = bucketsOn429sOnly(true)
			d.run(6 * lat)
			d.mark()
			d.run(6 * lat)
			s, r := d.mark()
			if f := float64(s-r) / (6 * lat.Seconds()) / 20; f < 0.5 {
				t.Errorf("served %.2f of the key's rate (%d of %d refused) with the provider's bucket never empty", f, r, s)
			}
		})
	}
}

// TestUnreadNeedsCompletions: served answers without usage (an agent's
// models list, which the provider answers without buckets) leave the share
// as it is; a completion a span after the last reading drops it.
func TestUnreadNeedsCompletions(t *testing.T) {
	d := newKeySim(t, 1, 1200, 0, 0, time.Second)
	d.rl = 0 // the first answer a 429: the share at the floor
	frac := func() float64 {
		d.cs[0].mu.Lock()
		defer d.cs[0].mu.Unlock()
		return d.cs[0].share.frac
	}
	d.hostile = bucketsOn429sOnly(false)
	d.run(20 * time.Second)
	if f := frac(); f <= 0 {
		t.Fatalf("answers without usage dropped the share (frac %v)", f)
	}
	d.hostile = bucketsOn429sOnly(true)
	d.run(5 * time.Second)
	if f := frac(); f > 0 {
		t.Errorf("completions without buckets for 5 s left the share at %v of the lone pace", f)
	}
}

// FuzzRateHeaders feeds a gateway's controller answers whose rate-limit
// headers, usage, outcome and latency are arbitrary (twelve answers from
// one input, each header value one of the input's fields, the requests
// bucket's flipping between two sets as flip's bits say): no panic, the
// pace a finite number and its gap never negative, the limit at least one.
func FuzzRateHeaders(f *testing.F) {
	f.Add("1200", "600", "500ms", "1200", "1200", "0s", "90000", "9000", "54s", "1", int64(1000), int64(800), uint32(4000), uint8(0), uint16(0x0f0f), uint16(1000))
	f.Add("Inf", "Inf", "-5s", "1200", "0", "1s", "1e-300", "NaN", "2562047h", "NaN", int64(-1), int64(-1), uint32(0), uint8(1), uint16(0xaaaa), uint16(0))
	f.Add("1e308", "1e308", "0s", "1e-300", "1e-300", "1ms", "1", "0", "1e308ms", "9999999", int64(1<<62), int64(1<<62), uint32(1<<31), uint8(2), uint16(0x5555), uint16(30000))
	f.Add("50", "0", "2026-01-01T00:00:30Z", "50", "50", "0s", "40000", "0", "0001-01-01T00:00:00Z", "Fri, 31 Dec 9999 23:59:59 GMT", int64(0), int64(5), uint32(1), uint8(3), uint16(0), uint16(10))
	f.Fuzz(func(t *testing.T, rl, rr, rt, rl2, rr2, rt2, tl, tr, tt, ra string, tokens, input int64, size uint32, outcomes uint8, flip, latMs uint16) {
		clk := clock.NewFake(testEpoch)
		c := NewController(StewardPolicy(), clk)
		for i := 0; i < 12; i++ {
			var tk *Ticket
			for j := 0; tk == nil; j++ {
				// Sizes from 0 (untold) to size and back, a request's size
				// against the average moving the pace's gap (costWeight).
				if tk, _ = c.TryAcquireSized(float64(size) * float64(i%3) / 2); tk == nil {
					if j > 1000 {
						return // held: a long Retry-After or a slow pace (allowed)
					}
					clk.Advance(100 * time.Millisecond)
				}
			}
			clk.Advance(time.Duration(latMs) * time.Millisecond)
			h := http.Header{}
			for k, v := range map[string]string{
				"x-ratelimit-limit-requests": rl, "x-ratelimit-remaining-requests": rr, "x-ratelimit-reset-requests": rt,
				"anthropic-ratelimit-tokens-limit": tl, "anthropic-ratelimit-tokens-remaining": tr, "anthropic-ratelimit-tokens-reset": tt,
				"retry-after": ra,
			} {
				h.Set(k, v)
			}
			if flip>>i&1 == 1 {
				h.Set("x-ratelimit-limit-requests", rl2)
				h.Set("x-ratelimit-remaining-requests", rr2)
				h.Set("x-ratelimit-reset-requests", rt2)
			}
			info := ParseRateInfo(h, clk.Now())
			info.Tokens, info.InputTokens = tokens, input
			o := Outcome(outcomes>>(i%4*2)) & 3
			c.Done(tk, o, info)
			c.mu.Lock()
			p, g, lim, frac := c.paceRate(), c.paceGap(), c.limit, c.share.frac
			gs, _ := c.gapFor(float64(size))
			c.mu.Unlock()
			if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || g < 0 || gs < 0 || lim < 1 || math.IsNaN(frac) {
				t.Fatalf("answer %d (%v, %+v): pace %v, gap %v (sized %v), limit %v, share %v", i, o, info, p, g, gs, lim, frac)
			}
			// A size weighs the gap within ¼–4 of the pace's, whatever
			// the usage and limits told.
			if g < math.MaxInt64/8 && (float64(gs) > maxCostWeight*float64(g)+1 || float64(gs) < minCostWeight*float64(g)-1) {
				t.Fatalf("answer %d (%v, %+v): size %d weighs the gap %v to %v, outside ¼–4", i, o, info, size, g, gs)
			}
		}
	})
}
