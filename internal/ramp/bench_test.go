package ramp

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

// benchPolicies are the sample policies BenchmarkRampPolicies compares.
func benchPolicies() []simPolicy {
	return []simPolicy{
		{Name: "steward ramp", Kind: polRamp},
		{Name: "fixed max_samples 50", Kind: polFixed, Fixed: 50},
		{Name: "inspect-style", Kind: polInspect},
		{Name: "unlimited", Kind: polUnlimited},
	}
}

func benchName(s string) string { return strings.ReplaceAll(s, " ", "-") }

// BenchmarkRampPolicies runs the same simulated workload under each sample
// policy for each provider limit and prints the table in docs/benchmarks.md.
//
//	go test -run '^$' -bench RampPolicies -benchtime 1x ./internal/ramp/
func BenchmarkRampPolicies(b *testing.B) {
	var rows []simResult
	for _, sc := range simScenarios() {
		for _, pol := range benchPolicies() {
			var r simResult
			b.Run(sc.Name+"/"+benchName(pol.Name), func(b *testing.B) {
				for range b.N {
					r = runSim(sc, pol)
				}
				reportMetrics(b, r)
			})
			rows = append(rows, r)
		}
	}
	fmt.Fprintln(os.Stdout)
	writeTable(os.Stdout, rows)
}

func reportMetrics(b *testing.B, r simResult) {
	b.ReportMetric(r.Goodput, "goodput/limit")
	b.ReportMetric(r.Share429, "429/request")
	b.ReportMetric(float64(r.Failed), "failed-samples")
	b.ReportMetric(r.Settle, "steady-s")
	b.ReportMetric(float64(r.Reversals), "reversals")
	b.ReportMetric(r.Swing, "swing")
	b.ReportMetric(r.Idle, "waiting/running")
}

// stepDownCandidates are the reversal sizes compared to choose DownDefault.
func stepDownCandidates() []StepDown {
	return []StepDown{DownStep, DownFactor80, DownHalf, DownToLimit}
}

// BenchmarkRampStepDown compares the step-down candidates (R2) on every
// scenario, for two workloads and three seeds each, with Saturated fed as
// the rules say and, as an experiment, gated on gateway queueing. It prints
// the means.
//
//	go test -run '^$' -bench RampStepDown -benchtime 1x ./internal/ramp/
func BenchmarkRampStepDown(b *testing.B) {
	for range b.N {
		writeStepDown(os.Stdout)
	}
}

func writeStepDown(w io.Writer) {
	workloads := []struct {
		name string
		mod  func(*simConfig)
	}{
		{"4 tasks", func(*simConfig) {}},
		{"2 tasks", func(c *simConfig) { c.Tasks, c.SamplesPerTask = 2, 10000 }},
	}
	fmt.Fprintln(w, "\n| Saturated fed | workload | limit | step-down | goodput | 429 share | waiting share | setpoint swing | reversals |")
	fmt.Fprintln(w, "|---|---|---|---|---:|---:|---:|---:|---:|")
	for _, qg := range []bool{false, true} {
		feed := "as the rules say"
		if qg {
			feed = "gated on gateway queue"
		}
		for _, wl := range workloads {
			for _, sc := range simScenarios() {
				for _, d := range stepDownCandidates() {
					var g, s429, idle, sw float64
					rev := 0
					const seeds = 3
					for seed := uint64(1); seed <= seeds; seed++ {
						c := sc
						c.Seed = seed
						wl.mod(&c)
						r := runSim(c, simPolicy{Name: policyName(d), Kind: polRamp, Down: d, QueueGate: qg})
						g += r.Goodput
						s429 += r.Share429
						idle += r.Idle
						sw += r.Swing
						rev += r.Reversals
					}
					fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f%% | %.2f%% | %.0f%% | %.1f%% | %.1f |\n",
						feed, wl.name, sc.Name, d, 100*g/seeds, 100*s429/seeds, 100*idle/seeds, 100*sw/seeds, float64(rev)/seeds)
				}
			}
		}
	}
}

// TestSimDeterministic: the simulation gives the same figures every time.
func TestSimDeterministic(t *testing.T) {
	sc := simScenarios()[2]
	sc.Horizon = 600
	a := runSim(sc, simPolicy{Name: "r", Kind: polRamp})
	b := runSim(sc, simPolicy{Name: "r", Kind: polRamp})
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a.Windows[len(a.Windows)-1], b.Windows[len(b.Windows)-1])
	}
}

// TestSimRampAgainstBaselines checks, in the simulation, the behaviour the
// ramp is for: it climbs from the start, gets closer to the provider's limit
// than fixed 50 and the Inspect-style policy, fails no sample, keeps 429s
// rare where unlimited drowns in them, and reverses when the limit halves.
func TestSimRampAgainstBaselines(t *testing.T) {
	sc := simScenarios()[2] // rpm, halved at 450 s
	sc.Horizon = 600
	res := map[string]simResult{}
	for _, p := range benchPolicies() {
		res[p.Name] = runSim(sc, p)
	}
	ramp := res["steward ramp"]
	if ramp.Failed != 0 || ramp.Share429 > 0.05 {
		t.Errorf("ramp: %d failed samples, 429 share %.3f", ramp.Failed, ramp.Share429)
	}
	for _, other := range []string{"fixed max_samples 50", "inspect-style", "unlimited"} {
		if ramp.Goodput <= res[other].Goodput {
			t.Errorf("ramp goodput %.3f not above %s's %.3f", ramp.Goodput, other, res[other].Goodput)
		}
	}
	if u := res["unlimited"]; u.Failed == 0 || u.Share429 < 0.5 {
		t.Errorf("unlimited: %d failed, 429 share %.3f; the simulated provider is not pushing back", u.Failed, u.Share429)
	}
	ws := ramp.Windows
	if ws[0].Total != 280 || ws[1].Total != 360 {
		t.Errorf("ramp did not climb from 4 × 50 by 80 a window: %d, %d", ws[0].Total, ws[1].Total)
	}
	reversed := false
	for _, w := range ws {
		if w.T > sc.HalveAt && w.T <= sc.HalveAt+60 && strings.Contains(w.Decision, "reverse:") {
			reversed = true
		}
	}
	if !reversed {
		t.Errorf("no reversal within a minute of the halving:\n%s", trace(ramp))
	}
}
