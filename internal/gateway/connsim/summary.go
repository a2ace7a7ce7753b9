package connsim

import (
	"math"
	"time"
)

// Summary is what the benchmark matrix reports for one run.
type Summary struct {
	// Goodput is what the provider admitted in the second half of the run
	// before the halving, as a share of what it could admit in that span:
	// its refill plus what its buckets held at the start of the span and no
	// longer held at its end. Requests or tokens, whichever is used more.
	Goodput float64
	// Share429 is the share of upstream requests answered 429 over the
	// whole run.
	Share429 float64
	// FailedSamples is the number of samples with a call that gave up.
	FailedSamples, Samples int
	// SteadyAt is the end of the first window whose admissions reached
	// 0.9 of the limit; -1 when none did before the halving.
	SteadyAt time.Duration
	// Recovery is how many windows after the halving stayed under 0.9 of
	// the new limit before one reached it (0: the first did); -1 when none
	// did.
	Recovery int
	// Window is the window the two above are measured in.
	Window time.Duration
	// PeakInFlight is the most calls in flight at once.
	PeakInFlight int
}

// Summarize measures r. window is the measurement window (0: the larger of
// the scenario's interval and 10 s, the default tend window).
func Summarize(s Scenario, r Result, window time.Duration) Summary {
	step := s.Step
	if step == 0 {
		step = time.Second
	}
	if window == 0 {
		window = max(s.Interval, 10*time.Second)
		if s.Interval == 0 {
			window = time.Minute
		}
	}
	sum := Summary{Window: window, FailedSamples: r.FailedSamples, Samples: r.Samples, SteadyAt: -1, Recovery: -1, PeakInFlight: r.PeakInFlight}
	if r.Requests > 0 {
		sum.Share429 = float64(r.RateLimited) / float64(r.Requests)
	}
	pre := s.Duration
	if s.HalveAt > 0 {
		pre = s.HalveAt
	}
	// Goodput over [pre/2, pre).
	from, to := int(pre/2/step), int(pre/step)
	if to > len(r.Series) {
		to = len(r.Series)
	}
	if from > 0 && to > from {
		admitted := 0
		for _, p := range r.Series[from:to] {
			admitted += p.Admitted
		}
		tok := 0
		for _, p := range r.Series[from:to] {
			tok += p.Tokens
		}
		span := float64(to-from) * step.Seconds()
		a, b := r.Series[from-1], r.Series[to-1]
		if s.RPM > 0 {
			sum.Goodput = float64(admitted) / (float64(s.RPM)/60*span + a.BucketRequests - b.BucketRequests)
		}
		if s.TPM > 0 {
			sum.Goodput = math.Max(sum.Goodput, float64(tok)/(float64(s.TPM)/60*span+a.BucketTokens-b.BucketTokens))
		}
	}
	per := int(window / step)
	// rate in window k (steps [k*per, (k+1)*per)) against the limit then.
	ok := func(k int) (bool, bool) {
		lo, hi := k*per, (k+1)*per
		if hi > len(r.Series) {
			return false, false
		}
		n, tok := 0, 0
		for _, p := range r.Series[lo:hi] {
			n += p.Admitted
			tok += p.Tokens
		}
		return utilisation(r.Series[hi-1], n, tok, window) >= 0.9, true
	}
	nPre := int(pre / window)
	for k := 0; k < nPre; k++ {
		if good, _ := ok(k); good {
			sum.SteadyAt = time.Duration(k+1) * window
			break
		}
	}
	if s.HalveAt > 0 && s.HalveAt%window == 0 {
		first := int(s.HalveAt / window)
		for k := first; ; k++ {
			good, exists := ok(k)
			if !exists {
				break
			}
			if good {
				sum.Recovery = k - first
				break
			}
		}
	}
	return sum
}

// utilisation is the larger of the requests and the tokens admitted in d
// as a share of what the limits in force at p allow in d.
func utilisation(p Point, requests, tokens int, d time.Duration) float64 {
	u := 0.0
	if p.RPM > 0 {
		u = float64(requests) / (float64(p.RPM) / 60 * d.Seconds())
	}
	if p.TPM > 0 {
		u = math.Max(u, float64(tokens)/(float64(p.TPM)/60*d.Seconds()))
	}
	return u
}
