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
	// longer held at its end.
	Goodput float64
	// Share429 is the share of upstream requests answered 429 over the
	// whole run.
	Share429 float64
	// FailedSamples is the number of samples with a call that gave up.
	FailedSamples, Samples int
	// SteadyAt is when the admitted rate reached 0.9 of the limit for good
	// (every window from there to the halving); -1 when it never did.
	SteadyAt time.Duration
	// Recovery is how many windows after the halving passed before the
	// admitted rate stayed at 0.9 of the new limit or more (0: it never
	// fell below); -1 when it never came back.
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
		span := float64(to-from) * step.Seconds()
		a, b := r.Series[from-1], r.Series[to-1]
		capacity := math.Inf(1)
		if s.RPM > 0 {
			capacity = float64(s.RPM)/60*span + a.BucketRequests - b.BucketRequests
		}
		if s.TPM > 0 && s.TokensPerCall > 0 {
			c := (float64(s.TPM)/60*span + a.BucketTokens - b.BucketTokens) / float64(s.TokensPerCall)
			capacity = math.Min(capacity, c)
		}
		sum.Goodput = float64(admitted) / capacity
	}
	per := int(window / step)
	// rate in window k (steps [k*per, (k+1)*per)) against the limit then.
	ok := func(k int) (bool, bool) {
		lo, hi := k*per, (k+1)*per
		if hi > len(r.Series) {
			return false, false
		}
		n := 0
		for _, p := range r.Series[lo:hi] {
			n += p.Admitted
		}
		return float64(n) >= 0.9*r.Series[hi-1].LimitRate*window.Seconds(), true
	}
	nPre := int(pre / window)
	for k := nPre - 1; k >= 0; k-- {
		if good, _ := ok(k); !good {
			if k+1 < nPre {
				sum.SteadyAt = time.Duration(k+1) * window
			}
			break
		}
		if k == 0 {
			sum.SteadyAt = 0
		}
	}
	if s.HalveAt > 0 && s.HalveAt%window == 0 {
		first := int(s.HalveAt / window)
		last := -1
		for k := first; ; k++ {
			good, exists := ok(k)
			if !exists {
				break
			}
			if !good {
				last = k
			}
			if k == first {
				sum.Recovery = 0
			}
		}
		if last >= 0 {
			sum.Recovery = last - first + 1
			if _, exists := ok(last + 1); !exists {
				sum.Recovery = -1
			}
		}
	}
	return sum
}
