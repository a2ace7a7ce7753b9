package forecast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
)

// TestSimulatedAccuracy measures the forecast on synthetic histories (the
// table in docs/benchmarks.md); it asserts nothing and runs only with
// FORECAST_SIM=1: go test ./internal/forecast -run Simulated -v.
//
// Each sample has a true mean cost and duration (lognormal across
// samples); each run a factor on durations (the provider's speed that day,
// sd 15 %) and on cost (sd 5 %); each attempt its own noise (cost sd 25 %,
// duration sd 40 %); the run's overhead is 5–10 s; the actual wall time is
// the same list schedule the forecast uses (so only the statistics are
// measured here, not the scheduler model: the quickstart runs measure that).
func TestSimulatedAccuracy(t *testing.T) {
	if os.Getenv("FORECAST_SIM") != "1" {
		t.Skip("FORECAST_SIM=1 runs the simulation")
	}
	fmt.Println("| history runs | new samples | trials | spend: median error | spend: interval holds | time: median error | time: interval holds |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, newFrac := range []float64{0, 0.2} {
		for _, k := range []int{1, 2, 3, 5, 10} {
			row := simulate(k, newFrac, 1000, uint64(k*100+int(newFrac*10)))
			fmt.Println(row)
		}
	}
}

func simulate(k int, newFrac float64, trials int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	ln := func(sd float64) float64 { return math.Exp(rng.NormFloat64()*sd - sd*sd/2) }
	var errU, errS []float64
	holdU, holdS, known := 0, 0, 0
	for range trials {
		type sample struct {
			task, id  string
			cost, dur float64
		}
		var ss []sample
		for ti := range 3 {
			for si := range 30 {
				ss = append(ss, sample{fmt.Sprint("t", ti), fmt.Sprint("s", si), 0.01 * math.Exp(rng.NormFloat64()*0.8), 20 * math.Exp(rng.NormFloat64()*0.7)})
			}
		}
		capc := Capacity{Budget: 8}
		var as []Attempt
		for _, s := range ss {
			as = append(as, Attempt{Task: s.task, Sample: s.id, Model: "m"})
		}
		newS := map[int]bool{}
		for i := range ss {
			if rng.Float64() < newFrac {
				newS[i] = true
			}
		}
		runOnce := func(id string, withNew bool) ([]Obs, Run, float64, float64) {
			f, g := ln(0.15), ln(0.05)
			var obs []Obs
			var usd float64
			durs := make([]float64, len(ss))
			for i, s := range ss {
				if !withNew && newS[i] {
					durs[i] = -1
					continue
				}
				o := Obs{Run: id, Task: s.task, Sample: s.id, Model: "m", USD: s.cost * g * ln(0.25), Seconds: s.dur * f * ln(0.4), Tokens: 1000, Requests: 3}
				obs = append(obs, o)
				usd += o.USD
				durs[i] = o.Seconds
			}
			span := Makespan(as, durs, capc)
			wall := span + 5 + 5*rng.Float64()
			return obs, Run{ID: id, WallSeconds: wall, AttemptsSpanSeconds: span}, usd, wall
		}
		var in Input
		in.Run, in.Cap = as, capc
		for r := range k {
			obs, run, _, _ := runOnce(fmt.Sprint("r", r), false)
			in.History = append(in.History, obs...)
			in.Runs = append([]Run{run}, in.Runs...)
		}
		_, _, usd, wall := runOnce("next", true)
		fc := Predict(in)
		errU = append(errU, math.Abs(fc.USD.Point-usd)/usd)
		errS = append(errS, math.Abs(fc.Seconds.Point-wall)/wall)
		if fc.USD.Known {
			known++
			if fc.USD.Contains(usd) {
				holdU++
			}
			if fc.Seconds.Contains(wall) {
				holdS++
			}
		}
	}
	med := func(xs []float64) float64 { sort.Float64s(xs); return xs[len(xs)/2] }
	hold := func(n int) string {
		if known == 0 {
			return "– (range unknown)"
		}
		return fmt.Sprintf("%.0f %%", 100*float64(n)/float64(known))
	}
	return fmt.Sprintf("| %d | %.0f %% | %d | %.1f %% | %s | %.1f %% | %s |", k, newFrac*100, trials, 100*med(errU), hold(holdU), 100*med(errS), hold(holdS))
}
