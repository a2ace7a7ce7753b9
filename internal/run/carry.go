package run

import (
	"context"
	"fmt"
	"strings"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
)

// carried is what the carry stage composed: the PLAN line and the
// forecast. Through plan.Carry it decided for each attempt whether it runs
// or carries a judged result (and why). --dry stops here.
type carried struct {
	*chosen
	planLine string
	fc       forecast.Forecast
}

// carry asks the record for judged results with equal fingerprints and
// composes the PLAN line and the forecast.
func carry(ctx context.Context, ch *chosen) (*carried, error) {
	var hist plan.History
	if ch.db != nil {
		hist = ch.db
	}
	if err := plan.Carry(ctx, ch.p, hist, plan.CarryOptions{Rerun: ch.opts.Rerun, EarlyExit: ch.opts.EarlyExit}); err != nil {
		return nil, record.Classify(ch.es.Fleet.Record, err)
	}
	cr := &carried{chosen: ch, planLine: ch.planLine(), fc: ch.makeForecast(ctx)}
	if s := cr.fc.PlanPart(); s != "" {
		cr.planLine += " · " + s
	}
	return cr, nil
}

// planLine is the PLAN line: attempts, samples × tasks, carried and
// confirming attempts, the budget and its source, the tasks' limits and
// starting setpoints, the shard.
func (ch *chosen) planLine() string {
	p := ch.p
	samples := map[string]bool{}
	run, carry := 0, 0
	for _, a := range p.Attempts {
		samples[p.Tasks[a.Task].Task.Name+"\x00"+a.Sample.ID] = true
		if a.Action == plan.ActionRun {
			run++
		} else {
			carry++ // carried, or skipped because the sample's pass is carried
		}
	}
	parts := []string{
		fmt.Sprintf("%d attempts", len(p.Attempts)),
		fmt.Sprintf("%d samples × %d tasks", len(samples), len(p.Tasks)),
	}
	if carry > 0 {
		parts = append(parts, fmt.Sprintf("%d carried", carry))
	}
	if len(ch.extras) > 0 {
		parts = append(parts, fmt.Sprintf("%d confirming", len(ch.extras)))
	}
	if ch.budget > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d (%s)", ch.budget, ch.budgetSrc))
	} else {
		parts = append(parts, fmt.Sprintf("concurrency unbounded (%s)", ch.budgetSrc))
	}
	for i, t := range p.Tasks {
		switch {
		case t.Task.MaxSamples > 0:
			parts = append(parts, fmt.Sprintf("%s ≤%d", t.Task.Name, t.Task.MaxSamples))
		case ch.exclusive[i]:
			parts = append(parts, fmt.Sprintf("%s ≤1 (%s exclusive)", t.Task.Name, ch.taskProv[i]))
		}
	}
	if sp := ch.startSetpoints(); sp != nil {
		if s := setpointsPart(p, sp); s != "" {
			parts = append(parts, s)
		}
	}
	if ch.opts.Shard != "" {
		parts = append(parts, "shard "+ch.opts.Shard)
	}
	return strings.Join(parts, " · ")
}

// setpointsPart names the starting setpoints of the tasks with work, e.g.
// "setpoints slow 1, fast 2", or by value for many tasks: "setpoints 2 ×9, 1 ×1".
func setpointsPart(p *plan.Plan, sp []int) string {
	work := make([]bool, len(p.Tasks))
	for _, a := range p.Attempts {
		if a.Action == plan.ActionRun {
			work[a.Task] = true
		}
	}
	var named []string
	var vals []int
	count := map[int]int{}
	for i, t := range p.Tasks {
		if !work[i] {
			continue
		}
		named = append(named, fmt.Sprintf("%s %d", t.Task.Name, sp[i]))
		if count[sp[i]] == 0 {
			vals = append(vals, sp[i])
		}
		count[sp[i]]++
	}
	switch {
	case len(named) == 0:
		return ""
	case len(named) <= 4:
		return "setpoints " + strings.Join(named, ", ")
	}
	var byVal []string
	for _, v := range vals {
		byVal = append(byVal, fmt.Sprintf("%d ×%d", v, count[v]))
	}
	return "setpoints " + strings.Join(byVal, ", ")
}

// dryReport is the plan as a report (nothing ran).
func (cr *carried) dryReport() *report.Report {
	rep := &report.Report{Title: cr.opts.Title, EvalSet: cr.es.File, Plan: cr.planLine}
	for _, a := range cr.p.Attempts {
		rep.Attempts = append(rep.Attempts, report.AttemptRow{
			Task: cr.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number, Status: "planned",
			Reason: a.Action + ": " + a.Reason, Carried: a.Action == plan.ActionCarry, Fingerprint: a.Fingerprint, Source: a.Sample.Source,
		})
	}
	return rep
}

// printDry prints the plan (report.WriteDry, or with --json
// report.WriteDryJSON): the PLAN line, the forecast, a row per task and
// every attempt with its action (run, carry or skip), reason and lane.
func (cr *carried) printDry() error {
	d := report.Dry{Plan: cr.planLine, Forecast: &cr.fc}
	for i, t := range cr.p.Tasks {
		limit := "ramp"
		switch {
		case t.Task.MaxSamples > 0:
			limit = fmt.Sprintf("≤%d", t.Task.MaxSamples)
		case cr.exclusive[i]:
			limit = fmt.Sprintf("≤1 (%s exclusive)", cr.taskProv[i])
		case !cr.es.Fleet.SamplesRamp.Enabled:
			limit = "fixed"
		}
		d.Tasks = append(d.Tasks, report.DryTask{Name: t.Task.Name, Provider: cr.taskProv[i], Limit: limit, Order: t.Order})
	}
	for _, a := range cr.p.Attempts {
		d.Attempts = append(d.Attempts, report.DryAttempt{Seq: a.Seq, Task: cr.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Action: a.Action, Reason: a.Reason, Lane: a.Lane})
	}
	if cr.opts.DryJSON {
		return report.WriteDryJSON(cr.opts.Stdout, d)
	}
	return report.WriteDry(cr.opts.Stdout, d)
}
