package report

import (
	"strings"

	"github.com/steward-evals/steward/internal/status"
)

// Tally counts rows by status into c (Total, Reused and the status counts;
// Running and Queued are live-panel counts and are left as they are).
func (c *Counts) Tally(rows []AttemptRow) {
	for _, a := range rows {
		c.Total++
		// Reused counts carried judged results, as the live panel does: an
		// early-exit skip that refers to the skip recorded before is skipped.
		if a.Carried && a.Status != status.Skipped {
			c.Reused++
		}
		c.Add(a.Status)
	}
}

// Add counts one attempt of status st (not in Total: the live panel counts
// the plan's attempts, published or not).
func (c *Counts) Add(st status.Attempt) {
	switch st {
	case status.Passed:
		c.Passed++
	case status.Failed:
		c.Failed++
	case status.Errored:
		c.Errored++
	case status.Infra:
		c.Infra++
	case status.Skipped:
		c.Skipped++
	case status.Interrupted:
		c.Interrupted++
	}
}

// EarlyExitSaving is what early exit saved (S4): how many attempts it
// skipped (this run's skips and the ones a re-run refers to) and their
// estimated cost, each at the mean cost of its sample's attempts that ran
// (carried ones included; 0 when none of them cost anything).
func (r *Report) EarlyExitSaving() (n int, usd float64) {
	type key struct{ task, sample string }
	cost, ran := map[key]float64{}, map[key]int{}
	for _, a := range r.Attempts {
		if a.Status != status.Skipped {
			k := key{a.Task, a.Sample}
			cost[k] += a.TotalUSD()
			ran[k]++
		}
	}
	for _, a := range r.Attempts {
		if a.Status == status.Skipped && strings.HasPrefix(a.Reason, "early exit") {
			n++
			if k := (key{a.Task, a.Sample}); ran[k] > 0 {
				usd += cost[k] / float64(ran[k])
			}
		}
	}
	return n, usd
}

// Recount recomputes Counts and Tasks from Attempts, so that every renderer
// shows numbers that agree with the rows (after a merge, or when a report is
// built from the record). Tasks keep their discovery order (existing entries
// first, then tasks first seen in Attempts) and their Setpoint and Limit.
func (r *Report) Recount() {
	r.Counts = Counts{}
	r.Counts.Tally(r.Attempts)
	r.PassWithinBudget = withinBudget(r.Attempts)
	index := map[string]int{}
	tasks := make([]TaskReport, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		if _, dup := index[t.Name]; dup {
			continue
		}
		index[t.Name] = len(tasks)
		t.Counts = Counts{}
		tasks = append(tasks, t)
	}
	for _, a := range r.Attempts {
		i, ok := index[a.Task]
		if !ok {
			i = len(tasks)
			index[a.Task] = i
			tasks = append(tasks, TaskReport{Name: a.Task})
		}
		tasks[i].Counts.Tally([]AttemptRow{a})
	}
	for i := range tasks {
		tasks[i].PassRate = tasks[i].Counts.PassRate()
	}
	r.Tasks = tasks
	r.Rescore()
}
