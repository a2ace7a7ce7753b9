package report

import (
	"context"
	"fmt"
	"strings"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/version"
)

// FromRecord builds the report of one or more runs from the record alone, so
// `steward launch`, `steward report`, `steward merge` and the action all
// render the same thing. Attempts keep discovery order within each run; runs
// follow in the order given.
func FromRecord(ctx context.Context, db *record.DB, runIDs []string, title string) (*Report, error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]record.Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	rep := &Report{Title: title, RunIDs: runIDs, Version: version.String()}
	hold, _ := db.Control(ctx, "ramp.hold")
	rep.Hold = hold
	var shards []string
	reducers := map[string]string{}
	planned := map[string]int{}
	for _, id := range runIDs {
		run, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("report: no run %s in the record %s", id, db.Path)
		}
		if rep.EvalSet == "" {
			rep.EvalSet = run.EvalSet
		}
		if rep.Plan == "" {
			rep.Plan = run.Plan
		}
		if rep.Title == "" {
			rep.Title = run.Title
		}
		if rep.Started.IsZero() || run.Started.Before(rep.Started) {
			rep.Started = run.Started
		}
		if run.Finished.After(rep.Finished) {
			rep.Finished = run.Finished
		}
		if run.Shard != "" {
			shards = append(shards, run.Shard)
		}
		if run.Status != status.Finished {
			rep.Partial = true
		}
		if run.Status == status.Crashed {
			rep.Crashed = run.Left
			if rep.Crashed == "" {
				rep.Crashed = "the run stopped before it finished"
			}
		} else if run.Left != "" {
			rep.Left = append(rep.Left, strings.Split(run.Left, "\n")...)
		}
		if run.BudgetUSD > 0 {
			rep.Spend.BudgetUSD = run.BudgetUSD
		}
		as, err := db.Attempts(ctx, id)
		if err != nil {
			return nil, err
		}
		if run.Status != status.Finished {
			if err := unpublished(ctx, db, rep, id, as); err != nil {
				return nil, err
			}
		}
		for _, a := range as {
			row := AttemptRow{
				Task: a.Task, Sample: a.Sample, Attempt: a.Attempt, Status: a.Status, Score: a.Score,
				Answer: a.Answer, Explanation: a.Explanation, Reason: a.Reason, Carried: a.CarriedFrom != "", CarriedFrom: a.CarriedFrom,
				Duration: a.Duration, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens, CostUSD: a.CostUSD,
				GradingInputTokens: a.Grading.InputTokens, GradingOutputTokens: a.Grading.OutputTokens, GradingCostUSD: a.Grading.CostUSD,
				Fingerprint: a.Fingerprint, Log: a.Log, Source: a.Source, Details: detailsOf(a),
				Run: id, Identity: record.Identity(a.Task, a.Sample, a.Parts),
			}
			fillTries(&row, a)
			rep.Attempts = append(rep.Attempts, row)
			if row.Carried {
				// Carried rows keep what the producing run spent; this run saved it.
				rep.Spend.SavedUSD += row.TotalUSD()
				rep.Spend.SavedInputTokens += a.InputTokens + a.Grading.InputTokens
				rep.Spend.SavedOutputTokens += a.OutputTokens + a.Grading.OutputTokens
				continue
			}
			if a.Status == status.Skipped && strings.HasPrefix(a.Reason, "budget spent") {
				rep.Spend.BudgetStopped = true
			}
			rep.Spend.USD += row.TotalUSD()
			rep.Spend.InputTokens += a.InputTokens + a.Grading.InputTokens
			rep.Spend.OutputTokens += a.OutputTokens + a.Grading.OutputTokens
			rep.Spend.Requests += a.Requests + a.Grading.Requests
			rep.Spend.GradingUSD += a.Grading.CostUSD
			rep.Spend.GradingInputTokens += a.Grading.InputTokens
			rep.Spend.GradingOutputTokens += a.Grading.OutputTokens
			rep.Spend.GradingRequests += a.Grading.Requests
		}
		settings, err := db.TasksOf(ctx, id)
		if err != nil {
			return nil, err
		}
		for name, ts := range settings {
			if _, seen := reducers[name]; !seen && ts.Reducer != "" {
				reducers[name] = ts.Reducer
			}
			if ts.Attempts > planned[name] {
				planned[name] = ts.Attempts
			}
		}
		pts, err := db.Ramp(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, p := range pts {
			rep.Ramp = append(rep.Ramp, RampPoint{
				At: p.At, Task: p.Task, Setpoint: p.Setpoint, Ceiling: p.Ceiling, Limit: p.ConnLimit, Decision: p.Decision,
				Reason: p.Reason, Pushback: p.Pushback, Retries: p.Retries, Errored: p.Errored, Saturated: p.Saturated,
			})
		}
	}
	rep.Shard = strings.Join(shards, ", ")
	rep.Recount()
	for i := range rep.Tasks {
		rep.Tasks[i].Reducer = reducers[rep.Tasks[i].Name]
		rep.Tasks[i].Planned = planned[rep.Tasks[i].Name]
	}
	rep.Rescore()
	// The last setpoint per task, from the ramp history.
	last := map[string]int{}
	for _, p := range rep.Ramp {
		last[p.Task] = p.Setpoint
	}
	for i := range rep.Tasks {
		rep.Tasks[i].Setpoint = last[rep.Tasks[i].Name]
	}
	if rep.Spend.BudgetUSD > 0 && rep.Spend.USD > rep.Spend.BudgetUSD {
		rep.Spend.OverBudgetUSD = rep.Spend.USD - rep.Spend.BudgetUSD
	}
	return rep, nil
}

// unpublished adds the attempts run id planned but never published.
func unpublished(ctx context.Context, db *record.DB, rep *Report, id string, as []record.Attempt) error {
	p, err := db.PlanOf(ctx, id)
	if err != nil {
		return err
	}
	done := map[int]bool{}
	for _, a := range as {
		done[a.Seq] = true
	}
	for _, pl := range p.Planned {
		if !done[pl.Seq] {
			rep.Unpublished = append(rep.Unpublished, fmt.Sprintf("%s/%s#%d", pl.Task, pl.Sample, pl.Attempt))
		}
	}
	return nil
}
