package connsim

import (
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/ramp"
)

// singleRamp is one runner with work, its samples at once moved by the
// real ramp through RampTend, against 1 200 RPM enforced per second.
func singleRamp(t *testing.T, lat time.Duration, work int) Shared {
	t.Helper()
	rc, err := ramp.New(ramp.Config{Range: ramp.DefaultRange}, []ramp.TaskSpec{{Name: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	s := Shared{Scenario: Scenario{Latency: lat, Jitter: 0.2, Interval: time.Second, RPM: 1200,
		Duration: time.Hour, CallsPerSample: 3, Policy: gateway.StewardPolicy(), Seed: 1}, EndWhenDone: true}
	s.Runners = []Runner{{Work: work, Tend: RampTend(rc, 10*time.Second, nil)}}
	return s
}

// At 10 s calls the provider keeps about 194 calls busy, more than the
// ramp's start of 50: the ramp, read from the gateway's window, climbs to
// its top; at 1.5 s calls (about 29 busy) the gateway, not the samples,
// is the bound, and the ramp stays at its start. The run ends when the
// work is done.
func TestRampTendFollowsTheProvider(t *testing.T) {
	for _, c := range []struct {
		lat      time.Duration
		work     int
		min, max int // the highest setpoint
	}{{10 * time.Second, 1000, 190, 200}, {1500 * time.Millisecond, 400, 50, 50}} {
		s := singleRamp(t, c.lat, c.work)
		tends := 0
		inner := s.Runners[0].Tend
		s.Runners[0].Tend = func(v *Tending) time.Duration { tends++; return inner(v) }
		r := RunShared(s)
		top := 0
		for _, p := range r.Series {
			top = max(top, p.Setpoint)
		}
		rr := r.Runners[0]
		if top < c.min || top > c.max {
			t.Errorf("%s: the samples at once peaked at %d, want %d–%d", c.lat, top, c.min, c.max)
		}
		if rr.Samples != c.work || rr.FailedSamples != 0 || rr.Finished == 0 {
			t.Errorf("%s: %d samples done, %d failed, finished at %s; want %d, none, finished", c.lat, rr.Samples, rr.FailedSamples, rr.Finished, c.work)
		}
		if end := r.Series[len(r.Series)-1].T; end > rr.Finished+time.Second {
			t.Errorf("%s: the run went on to %s after the work finished at %s", c.lat, end, rr.Finished)
		}
		if tends < 2 {
			t.Errorf("%s: %d tends", c.lat, tends)
		}
	}
}

// With FollowLimit a runner's samples at once are its connection limit
// (Inspect's samples follow its connections): 20 at the start, growing
// with the limit to its maximum of 100 at 10 s calls, where the provider
// never refuses (100 calls of 10 s ask half its rate).
func TestFollowLimitSamplesFollowConnections(t *testing.T) {
	p := gateway.Policy{Name: "inspect", Start: 20, Min: 10, Max: 100, Cut: 0.8, MinCooldown: time.Second}
	s := Shared{Scenario: Scenario{Latency: 10 * time.Second, Jitter: 0.2, Interval: time.Second, RPM: 1200,
		Duration: time.Hour, CallsPerSample: 3, Policy: p, Seed: 1}, EndWhenDone: true}
	s.Runners = []Runner{{Work: 600, FollowLimit: true}}
	r := RunShared(s)
	if got := r.Series[0].Running; got != 20 {
		t.Errorf("running after 1 s: %d, want the start limit 20", got)
	}
	top := 0
	for _, pt := range r.Series {
		top = max(top, pt.Running)
		if pt.Running > pt.ConnLimit && pt.RateLimited == 0 {
			t.Errorf("t=%s: %d samples running over a limit of %d that never fell", pt.T, pt.Running, pt.ConnLimit)
		}
	}
	if top != 100 || r.RateLimited != 0 || r.Runners[0].Samples != 600 {
		t.Errorf("peak running %d, %d 429s, %d samples done; want 100, none, 600", top, r.RateLimited, r.Runners[0].Samples)
	}
}

// Without KeepCost every try of a call draws its tokens anew, so calls
// refused by a token bucket come back smaller and the admitted calls
// average under the mean; with it they average the mean (within 2 %).
func TestKeepCostRetriesTheSameRequest(t *testing.T) {
	avg := func(keep bool) float64 {
		p := gateway.Policy{Name: "inspect", Start: 20, Min: 10, Max: 100, Cut: 0.8, MinCooldown: time.Second}
		s := Shared{Scenario: Scenario{Latency: 300 * time.Millisecond, Jitter: 0.2, Interval: time.Second, RPM: 3600, TPM: 1_200_000,
			TokensPerCall: 1000, TokenJitter: 0.5, Duration: 2 * time.Minute, CallsPerSample: 3, Policy: p, Seed: 1}, KeepCost: keep}
		s.Runners = []Runner{{Samples: 40}}
		r := RunShared(s)
		adm, tok := 0, 0
		for _, pt := range r.Series {
			adm += pt.Admitted
			tok += pt.Tokens
		}
		if r.RateLimited*10 < r.Requests {
			t.Fatalf("keep %v: %d 429s of %d requests, want a tenth or more for the test to mean anything", keep, r.RateLimited, r.Requests)
		}
		return float64(tok) / float64(adm)
	}
	drawn, kept := avg(false), avg(true)
	if kept < 980 || kept > 1020 || drawn > kept-10 {
		t.Errorf("admitted tokens a call: %.0f drawn anew, %.0f kept; want the kept ones at 1000 ± 2 %% and the drawn ones under", drawn, kept)
	}
}
