package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olekukonko/tablewriter"

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

// printDry prints the PLAN line, a per-task table and every attempt with its
// action (carry or run), reason and lane.
func (cr *carried) printDry() error {
	w := cr.opts.Stdout
	if cr.opts.DryJSON {
		return cr.printDryJSON(w)
	}
	fmt.Fprintln(w, report.PlanLine(cr.planLine))
	fmt.Fprintln(w, cr.fc.String())
	for _, n := range cr.fc.Notes {
		fmt.Fprintln(w, "  "+n)
	}
	type agg struct{ samples, attempts, run, carry int }
	// carry counts every attempt that does not run (carried results and
	// early-exit skips of samples whose pass is carried).
	per := make([]agg, len(cr.p.Tasks))
	seen := map[string]bool{}
	for _, a := range cr.p.Attempts {
		g := &per[a.Task]
		g.attempts++
		if a.Action == plan.ActionRun {
			g.run++
		} else {
			g.carry++
		}
		k := fmt.Sprint(a.Task, "\x00", a.Sample.ID)
		if !seen[k] {
			seen[k] = true
			g.samples++
		}
	}
	tw := tablewriter.NewTable(w)
	tw.Header("task", "provider", "samples", "attempts", "run", "carry", "limit", "lanes")
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
		lanes := map[string]bool{}
		for _, seq := range t.Order {
			if ln := cr.p.BySeq(seq).Lane; ln != "" {
				lanes[ln] = true
			}
		}
		_ = tw.Append([]string{t.Task.Name, cr.taskProv[i], fmt.Sprint(per[i].samples), fmt.Sprint(per[i].attempts), fmt.Sprint(per[i].run), fmt.Sprint(per[i].carry), limit, fmt.Sprint(len(lanes))})
	}
	if err := tw.Render(); err != nil {
		return err
	}
	return cr.printDryAttempts(w)
}

// printDryAttempts prints every attempt, one plain aligned line each
// (thousands of rows: a boxed table costs more than the whole plan).
func (cr *carried) printDryAttempts(w io.Writer) error {
	bw := bufio.NewWriter(w)
	at := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(at, "#\ttask\tsample\tattempt\taction\treason\tlane")
	// Dispatch order within each task: lanes show their stable member order.
	n := 0
	for _, t := range cr.p.Tasks {
		name := report.Plain(t.Task.Name, 60)
		for _, seq := range t.Order {
			a := cr.p.BySeq(seq)
			n++
			lane := a.Lane
			if lane != "" {
				lane = report.Plain(strings.TrimPrefix(lane, t.Task.Name+"/"), 60)
			}
			fmt.Fprintf(at, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", n, name, report.Plain(a.Sample.ID, 60), a.Number, a.Action, report.Plain(a.Reason, 200), lane)
		}
	}
	if err := at.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// printDryJSON is `launch --dry --json`: the PLAN line, the forecast and
// every attempt with its action, in discovery order.
func (cr *carried) printDryJSON(w io.Writer) error {
	type row struct {
		Task    string `json:"task"`
		Sample  string `json:"sample"`
		Attempt int    `json:"attempt"`
		Action  string `json:"action"`
		Reason  string `json:"reason"`
		Lane    string `json:"lane,omitempty"`
	}
	out := struct {
		Plan     string             `json:"plan"`
		Forecast *forecast.Forecast `json:"forecast"`
		Attempts []row              `json:"attempts"`
	}{Plan: cr.planLine, Forecast: &cr.fc}
	for _, a := range cr.p.Attempts {
		out.Attempts = append(out.Attempts, row{Task: cr.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number, Action: a.Action, Reason: a.Reason, Lane: a.Lane})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
