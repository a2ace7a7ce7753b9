// Package forecast predicts what a launch will spend and how long it will
// take, from the record's history of the same samples: pure functions over
// plain values, no I/O.
//
// The method (docs/benchmarks.md measures it): every earlier finished run
// that judged some of the plan's samples is replayed over the attempts that
// will run (carried ones cost nothing): each attempt takes the cost, tokens
// and duration that run saw for the same task, sample and model (else the
// sample's mean over the other runs, else that run's mean for the task at
// that model). The replayed durations are scheduled on the sandbox budget
// and the tasks' limits (groups run as one serial lane), and the run's own
// overhead (setup, teardown, what is not an attempt) is added. With k ≥ 2
// replays the forecast is their mean and the range a 95 % prediction
// interval for one more run (mean ± t·sd·√(1+1/k)); with one replay the
// range is unknown and said to be. Attempts whose task has no history at
// the model are unknown: they are counted, not guessed.
package forecast

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"time"
)

// Attempt is one attempt the launch will run.
type Attempt struct {
	Task, Sample string
	// Model identifies the model the attempt asks (its fingerprint's model
	// part): history at another model does not predict it.
	Model string
	// Lane is the group lane ("" = none): a lane's attempts run one after
	// another.
	Lane string
}

// Obs is one attempt an earlier run ran itself (not carried).
type Obs struct {
	Run, Task, Sample, Model string
	USD                      float64
	Tokens, Requests         int64
	Seconds                  float64
}

// Run is an earlier finished run: its wall time and the span of its own
// attempts (first start to last finish); the difference is its overhead.
type Run struct {
	ID                  string
	WallSeconds         float64
	AttemptsSpanSeconds float64
}

// Capacity is what bounds how much runs at once.
type Capacity struct {
	// Budget is the sandbox budget (0 = unbounded).
	Budget int
	// TaskLimit is a task's fixed limit (max_samples, or 1 when exclusive);
	// absent: the ramp, which may climb to RampTop.
	TaskLimit map[string]int
	// RampTop is the ramp's upper bound (default 200).
	RampTop int
	// RPM and TPM are the provider's announced limits (0 = unknown).
	RPM, TPM float64
}

// Input is everything a forecast reads.
type Input struct {
	Run     []Attempt
	Carried int // attempts that will not run (carried, or skipped with a carried pass)
	History []Obs
	Runs    []Run // newest first; only these runs' observations are replayed
	Cap     Capacity
	// BudgetUSD is --budget (0 = none).
	BudgetUSD float64
	// MaxRuns bounds the replayed runs (default 10, the newest).
	MaxRuns int
}

// Range is a prediction: Point, and Lo–Hi when Known.
type Range struct {
	Point float64 `json:"point"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Known bool    `json:"range_known"`
}

// Contains reports whether x lies in the range (a point only range
// contains nothing but itself).
func (r Range) Contains(x float64) bool {
	if !r.Known {
		return x == r.Point
	}
	return r.Lo <= x && x <= r.Hi
}

// Forecast is the prediction.
type Forecast struct {
	Attempts int `json:"attempts"` // attempts that will run
	Carried  int `json:"carried"`
	// Unknown attempts have no history at their task and model: they are
	// not in USD, Tokens or Seconds.
	Unknown int `json:"unknown"`
	// Runs is how many earlier runs were replayed (0: nothing is known).
	Runs    int   `json:"runs"`
	USD     Range `json:"usd"`
	Tokens  Range `json:"tokens"`
	Seconds Range `json:"seconds"`
	// RateBound is the wall time the provider's announced limits alone
	// need (0: no limit known, or none binds).
	RateBoundSeconds float64 `json:"rate_bound_seconds,omitempty"`
	// OverBudget: the forecast spend exceeds --budget, which will stop the run.
	OverBudget bool     `json:"over_budget,omitempty"`
	Notes      []string `json:"notes,omitempty"`
}

type key struct{ task, sample, model string }
type tkey struct{ task, model string }

// Predict computes the forecast.
func Predict(in Input) Forecast {
	f := Forecast{Attempts: len(in.Run), Carried: in.Carried}
	if len(in.Run) == 0 {
		f.USD, f.Tokens, f.Seconds = Range{Known: true}, Range{Known: true}, Range{Known: true}
		return f
	}
	maxRuns := in.MaxRuns
	if maxRuns <= 0 {
		maxRuns = 10
	}
	wanted := map[tkey]bool{}
	for _, a := range in.Run {
		wanted[tkey{a.Task, a.Model}] = true
	}
	// Observations by run, by sample and by task; runs that saw none of
	// the plan's tasks are not replayed.
	type agg struct {
		usd, sec float64
		tok, req int64
		n        int
	}
	add := func(g *agg, o Obs) { g.usd += o.USD; g.sec += o.Seconds; g.tok += o.Tokens; g.req += o.Requests; g.n++ }
	inRun := map[string]map[key][]Obs{}
	taskInRun := map[string]map[tkey]*agg{}
	sampleAll := map[key]*agg{}
	taskAll := map[tkey]bool{}
	for _, o := range in.History {
		tk := tkey{o.Task, o.Model}
		if !wanted[tk] {
			continue
		}
		k := key{o.Task, o.Sample, o.Model}
		if inRun[o.Run] == nil {
			inRun[o.Run], taskInRun[o.Run] = map[key][]Obs{}, map[tkey]*agg{}
		}
		inRun[o.Run][k] = append(inRun[o.Run][k], o)
		if taskInRun[o.Run][tk] == nil {
			taskInRun[o.Run][tk] = &agg{}
		}
		add(taskInRun[o.Run][tk], o)
		if sampleAll[k] == nil {
			sampleAll[k] = &agg{}
		}
		add(sampleAll[k], o)
		taskAll[tk] = true
	}
	var runs []Run
	for _, r := range in.Runs {
		if len(inRun[r.ID]) > 0 && len(runs) < maxRuns {
			runs = append(runs, r)
		}
	}
	f.Runs = len(runs)
	known := make([]bool, len(in.Run))
	for i, a := range in.Run {
		known[i] = taskAll[tkey{a.Task, a.Model}]
		if !known[i] {
			f.Unknown++
		}
	}
	if f.Runs == 0 {
		f.Notes = append(f.Notes, "no earlier run of these tasks at this model: spend and time unknown")
		return f
	}
	var usd, tok, sec []float64
	for _, r := range runs {
		var ru, rt, rq float64
		durs := make([]float64, len(in.Run))
		nth := map[key]int{}
		for i, a := range in.Run {
			if !known[i] {
				durs[i] = -1
				continue
			}
			k := key{a.Task, a.Sample, a.Model}
			var u, s float64
			var t, q int64
			if os := inRun[r.ID][k]; len(os) > 0 {
				o := os[nth[k]%len(os)]
				nth[k]++
				u, t, q, s = o.USD, o.Tokens, o.Requests, o.Seconds
			} else if g := sampleAll[k]; g != nil {
				n := float64(g.n)
				u, t, q, s = g.usd/n, int64(float64(g.tok)/n), int64(float64(g.req)/n), g.sec/n
			} else if g := taskInRun[r.ID][tkey{a.Task, a.Model}]; g != nil {
				n := float64(g.n)
				u, t, q, s = g.usd/n, int64(float64(g.tok)/n), int64(float64(g.req)/n), g.sec/n
			} else {
				// The task is known from other runs only: their task mean.
				var g agg
				for _, m := range taskInRun {
					if x := m[tkey{a.Task, a.Model}]; x != nil {
						g.usd += x.usd
						g.sec += x.sec
						g.tok += x.tok
						g.req += x.req
						g.n += x.n
					}
				}
				n := float64(g.n)
				u, t, q, s = g.usd/n, int64(float64(g.tok)/n), int64(float64(g.req)/n), g.sec/n
			}
			ru += u
			rt += float64(t)
			rq += float64(q)
			durs[i] = s
		}
		wall := Makespan(in.Run, durs, in.Cap) + math.Max(0, r.WallSeconds-r.AttemptsSpanSeconds)
		if b := rateBound(rq, rt, in.Cap); b > wall {
			wall = b
		}
		f.RateBoundSeconds = math.Max(f.RateBoundSeconds, rateBound(rq, rt, in.Cap))
		usd, tok, sec = append(usd, ru), append(tok, rt), append(sec, wall)
	}
	f.USD, f.Tokens, f.Seconds = predictive(usd), predictive(tok), predictive(sec)
	if f.Runs == 1 {
		f.Notes = append(f.Notes, "one earlier run: range unknown")
	}
	if f.Unknown > 0 {
		f.Notes = append(f.Notes, fmt.Sprintf("%d attempts without history: not counted", f.Unknown))
	}
	if in.Cap.RPM == 0 && in.Cap.TPM == 0 {
		f.Notes = append(f.Notes, "provider limits unknown")
	}
	if in.BudgetUSD > 0 && f.USD.Point > in.BudgetUSD {
		f.OverBudget = true
		f.Notes = append(f.Notes, fmt.Sprintf("over the $%.2f budget: the run stops when it is spent", in.BudgetUSD))
	}
	return f
}

func rateBound(requests, tokens float64, c Capacity) float64 {
	var b float64
	if c.RPM > 0 {
		b = math.Max(b, requests/c.RPM*60)
	}
	if c.TPM > 0 {
		b = math.Max(b, tokens/c.TPM*60)
	}
	return b
}

// predictive is the mean of xs and, for two or more, the 95 % prediction
// interval of one more draw (Student's t), clipped at 0.
func predictive(xs []float64) Range {
	k := float64(len(xs))
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= k
	r := Range{Point: m, Lo: m, Hi: m}
	if len(xs) < 2 {
		return r
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss / (k - 1))
	w := tQuantile975(len(xs)-1) * sd * math.Sqrt(1+1/k)
	r.Lo, r.Hi, r.Known = math.Max(0, m-w), m+w, true
	return r
}

// tQuantile975 is Student's t 0.975 quantile for df degrees of freedom.
func tQuantile975(df int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df < len(table) {
		return table[df]
	}
	return 1.96 + 2.4/float64(df) // within 0.01 of the exact value past 30
}

// Makespan schedules the attempts (durations in seconds; a negative one is
// unknown and left out) on the capacity: a lane's attempts as one serial
// job, a free slot to the task with the most rounds left (C7), every task
// within its limit and all within the budget.
func Makespan(as []Attempt, durs []float64, c Capacity) float64 {
	top := c.RampTop
	if top <= 0 {
		top = 200
	}
	taskIdx := map[string]int{}
	var queues [][]float64
	lanes := map[string]int{} // lane → index in its task's queue
	for i, a := range as {
		if durs[i] < 0 {
			continue
		}
		t, ok := taskIdx[a.Task]
		if !ok {
			t = len(queues)
			taskIdx[a.Task] = t
			queues = append(queues, nil)
		}
		if a.Lane != "" {
			if j, ok := lanes[a.Lane]; ok {
				queues[t][j] += durs[i]
				continue
			}
			lanes[a.Lane] = len(queues[t])
		}
		queues[t] = append(queues[t], durs[i])
	}
	limits := make([]int, len(queues))
	for name, t := range taskIdx {
		l, ok := c.TaskLimit[name]
		if !ok || l <= 0 {
			l = top
			if c.Budget > 0 && c.Budget < l {
				l = c.Budget
			}
		}
		limits[t] = l
	}
	budget := c.Budget
	if budget <= 0 {
		budget = math.MaxInt
	}
	next := make([]int, len(queues))
	running := make([]int, len(queues))
	h := &finishHeap{}
	now, total := 0.0, 0
	for {
		for total < budget {
			best, bestRounds := -1, -1.0
			for t := range queues {
				if next[t] >= len(queues[t]) || running[t] >= limits[t] {
					continue
				}
				rounds := float64(len(queues[t])-next[t]) / float64(limits[t])
				if rounds > bestRounds {
					best, bestRounds = t, rounds
				}
			}
			if best < 0 {
				break
			}
			heap.Push(h, finish{now + queues[best][next[best]], best})
			next[best]++
			running[best]++
			total++
		}
		if h.Len() == 0 {
			return now
		}
		e := heap.Pop(h).(finish)
		now = e.at
		running[e.task]--
		total--
	}
}

type finish struct {
	at   float64
	task int
}
type finishHeap []finish

func (h finishHeap) Len() int           { return len(h) }
func (h finishHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h finishHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *finishHeap) Push(x any)        { *h = append(*h, x.(finish)) }
func (h *finishHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// String is the forecast on one line, e.g.
// "forecast $0.42 ($0.38–$0.47) · 3m10s (2m50s–3m40s) · from 4 runs".
func (f Forecast) String() string {
	if f.Attempts == 0 {
		return "forecast $0 · 0s (nothing runs)"
	}
	if f.Runs == 0 {
		return "forecast unknown (no history of these tasks at this model)"
	}
	parts := []string{"forecast " + f.USD.format(usd) + " · " + f.Seconds.format(dur)}
	if f.Runs == 1 {
		parts = append(parts, "from 1 run (range unknown)")
	} else {
		parts = append(parts, fmt.Sprintf("from %d runs", f.Runs))
	}
	if f.Unknown > 0 {
		parts = append(parts, fmt.Sprintf("%d attempts unknown", f.Unknown))
	}
	if f.OverBudget {
		parts = append(parts, "over budget")
	}
	return strings.Join(parts, " · ")
}

func (r Range) format(fm func(float64) string) string {
	if !r.Known || fm(r.Lo) == fm(r.Hi) {
		return fm(r.Point)
	}
	return fmt.Sprintf("%s (%s–%s)", fm(r.Point), fm(r.Lo), fm(r.Hi))
}

func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.4f", v)
	case v < 100:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.0f", v)
}

func dur(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", s)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(math.Round(s)))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// PlanPart is the forecast as the PLAN line's last part, e.g.
// "forecast $0.38–$0.47, 2m50s–3m40s"; "" when nothing is known or nothing
// runs (the line stays as it was).
func (f Forecast) PlanPart() string {
	if f.Attempts == 0 || f.Runs == 0 {
		return ""
	}
	span := func(r Range, fm func(float64) string) string {
		if !r.Known || fm(r.Lo) == fm(r.Hi) {
			return "~" + fm(r.Point)
		}
		return fm(r.Lo) + "–" + fm(r.Hi)
	}
	s := "forecast " + span(f.USD, usd) + ", " + span(f.Seconds, dur)
	if f.Unknown > 0 {
		s += fmt.Sprintf(" (+%d unknown)", f.Unknown)
	}
	return s
}
