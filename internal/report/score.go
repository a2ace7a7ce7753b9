package report

import (
	"math"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/score"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// RateConfidence is the confidence of the intervals shown beside every rate.
const RateConfidence = 0.95

// judgedOutcome says whether an attempt's status is an observation of the
// agent, and whether it passed. Passed counts 1; failed and errored count 0
// (the attempt did not earn a pass); infra, skipped and interrupted are not
// observations (the infrastructure failed, or nothing ran).
func judgedOutcome(s status.Attempt) (pass, judged bool) {
	switch s {
	case status.Passed:
		return true, true
	case status.Failed, status.Errored:
		return false, true
	}
	return false, false
}

// obsKey identifies one observation: the run that produced it and its
// attempt number. A carried row is its producer's observation, so a result
// head carried from base is the same observation on both sides.
type obsKey struct {
	producer string
	attempt  int
}

// sampleObs is one sample's observations on one side, in first-seen order.
type sampleObs struct {
	task, sample, identity, source string
	obs                            map[obsKey]bool // passed?
	keys                           []obsKey
	// last is the last judged row (for reasons in the lists).
	last AttemptRow
}

func (s *sampleObs) tally() stats.Tally {
	var t stats.Tally
	for _, k := range s.keys {
		t.N++
		if s.obs[k] {
			t.Pass++
		}
	}
	return t
}

// observations groups a report's judged attempts by sample, in discovery
// order. side tags observations whose producer is unknown (reports built
// without run ids) so they never count as shared with the other side.
func observations(r *Report, side string) ([]string, map[string]*sampleObs) {
	var order []string
	out := map[string]*sampleObs{}
	for _, a := range r.Attempts {
		k := a.Task + "\x00" + a.Sample
		so := out[k]
		if so == nil {
			so = &sampleObs{task: a.Task, sample: a.Sample, source: a.Source, obs: map[obsKey]bool{}}
			out[k] = so
			order = append(order, k)
		}
		if a.Identity != "" {
			so.identity = a.Identity
		}
		pass, judged := judgedOutcome(a.Status)
		if !judged {
			continue
		}
		prod := a.Run
		if a.Carried {
			prod = a.CarriedFrom
		}
		if prod == "" {
			prod = side + "\x00" + strconv.Itoa(len(so.keys))
		}
		key := obsKey{prod, a.Attempt}
		if _, dup := so.obs[key]; dup {
			continue // the same observation twice (a carried copy beside its original)
		}
		so.obs[key] = pass
		so.keys = append(so.keys, key)
		so.last = a
	}
	return order, out
}

// reducerOf is the task's reducer in r ("" or unknown: the default).
func (r *Report) reducerOf(task string) score.Reducer {
	for _, t := range r.Tasks {
		if t.Name == task {
			if x, err := score.Parse(t.Reducer); err == nil {
				return x
			}
		}
	}
	return score.Default
}

// Rescore computes every task's Score and the overall Score from the
// attempts, each sample scored by its task's reducer (Recount calls it).
func (r *Report) Rescore() {
	order, obs := observations(r, "")
	cost, grading := map[string]float64{}, map[string]float64{}
	var allCost float64
	for _, a := range r.Attempts {
		if _, judged := judgedOutcome(a.Status); judged {
			cost[a.Task] += a.TotalUSD()
			grading[a.Task] += a.GradingCostUSD
			allCost += a.TotalUSD()
		}
	}
	perTask := map[string][]float64{}
	attempts := map[string]int{}
	var all []float64
	allAttempts := 0
	for _, k := range order {
		so := obs[k]
		t := so.tally()
		if t.N == 0 {
			continue
		}
		s := r.reducerOf(so.task).Score(t.Pass, t.N)
		perTask[so.task] = append(perTask[so.task], s)
		attempts[so.task] += t.N
		all = append(all, s)
		allAttempts += t.N
	}
	for i := range r.Tasks {
		t := &r.Tasks[i]
		t.Score, t.CostUSD, t.GradingUSD, t.CostPerPass = nil, cost[t.Name], grading[t.Name], nil
		if sc := perTask[t.Name]; len(sc) > 0 {
			rate := stats.RateOf(sc, attempts[t.Name], RateConfidence)
			t.Score = &rate
			t.CostPerPass = perPass(t.CostUSD, rate)
		}
	}
	r.Score, r.CostPerPass = nil, nil
	if len(all) > 0 {
		rate := stats.RateOf(all, allAttempts, RateConfidence)
		r.Score = &rate
		r.CostPerPass = perPass(allCost, rate)
	}
}

// perPass is cost ÷ expected passes (mean score × samples); nil without
// spend or without a pass.
func perPass(cost float64, r stats.Rate) *float64 {
	passes := r.Mean * float64(r.Samples)
	if cost <= 0 || passes <= 0 {
		return nil
	}
	x := cost / passes
	return &x
}

// formatPerPass is "$0.0123 per pass", or "" when there is none.
func formatPerPass(x *float64) string {
	if x == nil {
		return ""
	}
	return formatUSD(*x) + " per pass"
}

// pct formats a rate as a percentage with one decimal.
func pct(x float64) string {
	return strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
}

// formatScoreRate is "77.5% (61.5–88.9%, n=40)": the rate, its 95 %
// interval and how many samples it rests on; "–" when nothing was judged.
func formatScoreRate(r *stats.Rate) string {
	if r == nil || r.Samples == 0 {
		return "–"
	}
	return pct(r.Mean) + " (" + strconv.FormatFloat(100*r.Interval.Lo, 'f', 1, 64) + "–" + pct(r.Interval.Hi) +
		", n=" + strconv.Itoa(r.Samples) + ")"
}

// points formats a change in rate as signed points: "+2.5 pts", "−12.0 pts".
func points(d float64) string {
	v := 100 * d
	if math.Abs(v) < 0.05 {
		return "±0.0 pts"
	}
	if v < 0 {
		return "−" + strconv.FormatFloat(-v, 'f', 1, 64) + " pts"
	}
	return "+" + strconv.FormatFloat(v, 'f', 1, 64) + " pts"
}

// signed formats a change in points without the unit: "+2.5", "−12.0".
func signed(d float64) string {
	v := 100 * d
	if math.Abs(v) < 0.05 {
		return "0.0"
	}
	if v < 0 {
		return "−" + strconv.FormatFloat(-v, 'f', 1, 64)
	}
	return "+" + strconv.FormatFloat(v, 'f', 1, 64)
}

// formatP formats a p-value: "p = 0.003", "p < 0.001".
func formatP(p float64) string {
	if p < 0.001 {
		return "p < 0.001"
	}
	return "p = " + strconv.FormatFloat(p, 'f', 3, 64)
}

// costPerPassLine is "cost per pass: $0.0123 (qa $0.0100, code $0.0400)",
// or "" when no task has one.
func costPerPassLine(r *Report) string {
	if r.CostPerPass == nil {
		return ""
	}
	var parts []string
	for _, t := range r.Tasks {
		if t.CostPerPass != nil {
			parts = append(parts, t.Name+" "+formatUSD(*t.CostPerPass))
		}
	}
	s := "cost per pass: " + formatUSD(*r.CostPerPass)
	if len(parts) > 1 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
