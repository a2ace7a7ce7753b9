package connsim

import (
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/ramp"
)

// The case: 1 200 RPM enforced per second (a bucket of 20), calls
// of 1.5 s, more samples than the provider takes. Little's law wants about
// 30 calls in flight; a controller stuck at its start of 20 uses two
// thirds of the limit, and one that bursts into the one-second bucket
// meets a storm of 429s. Simulated time: the controller's clock is the
// simulation's.
func TestShortIntervalLimitGrowsPast20WithoutStorm(t *testing.T) {
	for _, jitter := range []float64{0, 0.2} {
		s := Scenario{
			Latency: 1500 * time.Millisecond, Jitter: jitter, RPM: 1200, Interval: time.Second,
			Samples: 100, CallsPerSample: 10, Duration: 5 * time.Minute,
			Policy: gateway.StewardPolicy(), Seed: 7,
		}
		r := Run(s)
		sum := Summarize(s, r, 10*time.Second)
		top := 0
		for _, p := range r.Series {
			top = max(top, p.ConnLimit)
		}
		if top <= 20 || r.PeakInFlight < 28 {
			t.Errorf("jitter %.1f: limit peaked at %d, %d in flight at most; want past 20 and about 30 in flight (20/s × 1.5 s)", jitter, top, r.PeakInFlight)
		}
		if sum.Share429 > 0.01 {
			t.Errorf("jitter %.1f: %.2f %% of requests got 429, want at most 1 %%", jitter, 100*sum.Share429)
		}
		if sum.Goodput < 0.95 {
			t.Errorf("jitter %.1f: goodput %.3f of the limit, want at least 0.95", jitter, sum.Goodput)
		}
		if r.FailedSamples != 0 || r.Samples < 500 {
			t.Errorf("jitter %.1f: %d of %d samples failed", jitter, r.FailedSamples, r.Samples)
		}
		if sum.SteadyAt < 0 || sum.SteadyAt > 30*time.Second {
			t.Errorf("jitter %.1f: steady state at %v, want within 30 s", jitter, sum.SteadyAt)
		}
	}
}

// A halved limit is followed within three windows, with few 429s, at
// short and long latencies, RPM- and TPM-bound.
func TestHalvedLimitRecovers(t *testing.T) {
	for _, lat := range []time.Duration{1500 * time.Millisecond, 30 * time.Second} {
		for _, tpm := range []bool{false, true} {
			s := Scenario{
				Latency: lat, Jitter: 0.2, RPM: 1200, Interval: time.Second, TokensPerCall: 1000,
				Samples: int(30*lat.Seconds()) + 50, CallsPerSample: 10, Duration: 20 * time.Minute, HalveAt: 10 * time.Minute,
				Policy: gateway.StewardPolicy(), Seed: 3,
			}
			if tpm {
				s.RPM, s.TPM = 3600, 1_200_000
			}
			r := Run(s)
			sum := Summarize(s, r, 0)
			if sum.Recovery < 0 || sum.Recovery > 3 || sum.Share429 > 0.01 || r.FailedSamples > 0 || sum.Goodput < 0.95 {
				t.Errorf("latency %s tpm %v: recovery %d windows, 429 %.2f %%, %d failed, goodput %.3f", lat, tpm, sum.Recovery, 100*sum.Share429, r.FailedSamples, sum.Goodput)
			}
		}
	}
}

// R2/R3 at scale: 60 ramped tasks at the top of their range (200 each,
// 12 000 samples) behind a provider that takes all of them at 30 s a call
// can have every sample's call in flight at once: the ceiling follows the
// sum of setpoints, and nothing in the controller caps it lower.
func TestEverySampleInFlightAtScale(t *testing.T) {
	tasks := make([]ramp.TaskSpec, 60)
	for i := range tasks {
		tasks[i].Name = "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	rc, err := ramp.New(ramp.Config{Range: ramp.Range{Enabled: true, Lo: 50, Hi: 200}}, tasks)
	if err != nil {
		t.Fatal(err)
	}
	sat := make([]ramp.TaskSignals, len(tasks))
	for i := range sat {
		sat[i].Saturated = true
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var d ramp.Decision
	for i := 0; i < 20; i++ {
		now = now.Add(10 * time.Second)
		d = rc.Tend(now, ramp.Signals{}, sat)
	}
	if d.Total() != 12000 || d.Ceiling != 12000 {
		t.Fatalf("ramp at the top: total %d, ceiling %d, want 12000 and 12000", d.Total(), d.Ceiling)
	}
	s := Scenario{
		Latency: 30 * time.Second, RPM: 60 * 1000 * 60, Samples: d.Total(), CallsPerSample: 1000,
		Duration: 3 * time.Minute, Policy: gateway.StewardPolicy(), Ceiling: d.Ceiling, Seed: 1,
	}
	r := Run(s)
	if r.PeakInFlight != 12000 || r.RateLimited != 0 {
		t.Fatalf("peak in flight %d with %d 429s, want all 12000 samples' calls and none", r.PeakInFlight, r.RateLimited)
	}
}

// An idle account's bucket starts full: a minute's quota banked. Paced at
// the rate alone, the gateway would leave it unused; it spends it (down to
// a tenth) without a 429, at short and long latencies, while a bucket
// enforced per second banks nothing to spend and is paced as before.
func TestFullBucketBankIsSpent(t *testing.T) {
	for _, lat := range []time.Duration{1500 * time.Millisecond, 30 * time.Second} {
		for _, iv := range []time.Duration{0, time.Second} {
			s := Scenario{
				Latency: lat, Jitter: 0.2, RPM: 1200, Interval: iv, Samples: int(40*lat.Seconds()) + 100, CallsPerSample: 10,
				Duration: 5 * time.Minute, Policy: gateway.StewardPolicy(), Seed: 11,
			}
			r := Run(s)
			admitted := 0
			for _, p := range r.Series {
				admitted += p.Admitted
			}
			refill := 20 * s.Duration.Seconds()
			switch {
			case r.RateLimited != 0:
				t.Errorf("latency %s interval %s: %d 429s", lat, iv, r.RateLimited)
			case iv == 0 && float64(admitted) < refill+0.6*1200-20*lat.Seconds():
				t.Errorf("latency %s, full-minute bucket: admitted %d in 5 min, want the refill %.0f plus most of the banked 1 200", lat, admitted, refill)
			case iv > 0 && float64(admitted) > refill+20:
				t.Errorf("latency %s, per-second bucket: admitted %d, more than the refill %.0f and the bucket", lat, admitted, refill)
			}
		}
	}
}
