package report

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// Trends is, per task, the pass rate (with its interval), spend, tokens and
// attempt duration over runs of one eval set, oldest run first: the HTML
// report's trend charts, the job summary's Mermaid chart, `steward trends`.
type Trends struct {
	EvalSet string      `json:"eval_set,omitempty"`
	Runs    []TrendRun  `json:"runs"`
	Tasks   []TaskTrend `json:"tasks"`
}

// TrendRun is one run of the trend (a column).
type TrendRun struct {
	ID      string    `json:"id"`
	Label   string    `json:"label"`
	Started time.Time `json:"started"`
	Record  string    `json:"record,omitempty"`
	// Head marks the run the report is about (the pull request's), beside
	// the base's history.
	Head bool `json:"head,omitempty"`
}

// TaskTrend is one task's points, one per run (nil where the run did not
// judge the task).
type TaskTrend struct {
	Task   string        `json:"task"`
	Points []*TrendPoint `json:"points"`
}

// TrendPoint is one task in one run. USD and Tokens are what the run spent
// on the task itself (carried attempts cost it nothing); Seconds is the
// mean duration of the attempts it ran (0: it ran none); Score counts
// carried results too (the task's state at that run).
type TrendPoint struct {
	Score    *stats.Rate `json:"score,omitempty"`
	USD      float64     `json:"usd"`
	Tokens   int64       `json:"tokens"`
	Seconds  float64     `json:"mean_attempt_seconds"`
	Attempts int         `json:"attempts"`
	Ran      int         `json:"ran"`
}

// TrendLimit is how many runs a trend shows by default (the newest).
const TrendLimit = 20

// AddRun adds rep (one run's report) as the trend's next column.
func (t *Trends) AddRun(rep *Report, run TrendRun) {
	col := len(t.Runs)
	t.Runs = append(t.Runs, run)
	for i := range t.Tasks {
		t.Tasks[i].Points = append(t.Tasks[i].Points, nil)
	}
	idx := map[string]int{}
	for i, tt := range t.Tasks {
		idx[tt.Task] = i
	}
	for _, tr := range rep.Tasks {
		i, ok := idx[tr.Name]
		if !ok {
			i = len(t.Tasks)
			idx[tr.Name] = i
			t.Tasks = append(t.Tasks, TaskTrend{Task: tr.Name, Points: make([]*TrendPoint, col+1)})
		}
		p := &TrendPoint{Score: tr.Score}
		var secs float64
		for _, a := range rep.Attempts {
			if a.Task != tr.Name || a.Status == status.Skipped || a.Status == status.Interrupted {
				continue
			}
			p.Attempts++
			if a.Carried {
				continue
			}
			p.Ran++
			p.USD += a.TotalUSD()
			p.Tokens += a.InputTokens + a.OutputTokens + a.GradingInputTokens + a.GradingOutputTokens
			secs += a.Duration.Seconds()
		}
		if p.Ran > 0 {
			p.Seconds = secs / float64(p.Ran)
		}
		t.Tasks[i].Points[col] = p
	}
}

// TrendRuns picks the runs of a trend from a record's runs (newest first,
// as record.DB.Runs lists them): finished and cancelled ones of evalSet
// ("" = any), at most limit, returned oldest first.
func TrendRuns(runs []record.Run, evalSet string, limit int) []record.Run {
	if limit <= 0 {
		limit = TrendLimit
	}
	var out []record.Run
	for _, r := range runs {
		if evalSet != "" && r.EvalSet != evalSet {
			continue
		}
		if r.Status != status.Finished {
			continue
		}
		out = append(out, r)
		if len(out) == limit {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// TrendsFromRecord adds the given runs of db (oldest first) to t.
func (t *Trends) FromRecord(ctx context.Context, db *record.DB, runs []record.Run, recordLabel string) error {
	for _, r := range runs {
		rep, err := FromRecord(ctx, db, []string{r.ID}, "")
		if err != nil {
			return fmt.Errorf("trends: %w", err)
		}
		if t.EvalSet == "" {
			t.EvalSet = r.EvalSet
		}
		t.AddRun(rep, TrendRun{ID: r.ID, Label: r.Started.UTC().Format("01-02 15:04"), Started: r.Started, Record: recordLabel})
	}
	return nil
}

// Sort orders the trend's columns by start time (several records merged).
func (t *Trends) Sort() {
	order := make([]int, len(t.Runs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return t.Runs[order[a]].Started.Before(t.Runs[order[b]].Started) })
	runs := make([]TrendRun, len(order))
	for k, i := range order {
		runs[k] = t.Runs[i]
	}
	t.Runs = runs
	for ti := range t.Tasks {
		pts := make([]*TrendPoint, len(order))
		for k, i := range order {
			if i < len(t.Tasks[ti].Points) {
				pts[k] = t.Tasks[ti].Points[i]
			}
		}
		t.Tasks[ti].Points = pts
	}
}

// WithHead is a copy of t with rep added as the last column, marked head.
func (t *Trends) WithHead(rep *Report) *Trends {
	c := &Trends{EvalSet: t.EvalSet, Runs: append([]TrendRun(nil), t.Runs...)}
	for _, tt := range t.Tasks {
		c.Tasks = append(c.Tasks, TaskTrend{Task: tt.Task, Points: append([]*TrendPoint(nil), tt.Points...)})
	}
	id := ""
	if len(rep.RunIDs) > 0 {
		id = rep.RunIDs[0]
	}
	c.AddRun(rep, TrendRun{ID: id, Label: "this run", Started: rep.Started, Head: true})
	return c
}
