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
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// stoppedReason is the reason of the attempts a stop (a signal) left not started.
const stoppedReason = "cancelled before it started"

// cutShort says whether a stop (the first or second signal) cut the run
// short: it left an attempt not started or interrupted one. Only then is the
// run cancelled (exit 130, the report's PARTIAL line). A signal that lands
// once every attempt has ended, as the run ends, cuts nothing short: the run
// is finished and its results give the exit code (docs/guide.md, exit codes).
func (l *launcher) cutShort(ctx context.Context) bool {
	if ctx.Err() == nil && l.opts.Hard.Err() == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopSkips > 0 {
		return true
	}
	for _, st := range l.published {
		if st == status.Interrupted {
			return true
		}
	}
	return false
}

func (l *launcher) buildReport(ctx context.Context) (*report.Report, error) {
	rep, err := report.FromRecord(ctx, l.db, []string{l.runID}, l.opts.Title)
	if err != nil {
		return nil, err
	}
	// Transcripts ride along for the HTML report (and report.json).
	if err := report.LoadTranscripts(ctx, l.db, rep); err != nil {
		return nil, err
	}
	for i := range rep.Tasks {
		for _, t := range l.p.Tasks {
			if t.Task.Name == rep.Tasks[i].Name && t.Task.MaxSamples > 0 {
				rep.Tasks[i].Limit = fmt.Sprintf("≤%d", t.Task.MaxSamples)
			}
		}
	}
	return rep, nil
}

// dryReport is the plan as a report (nothing ran).
func (l *launcher) dryReport() *report.Report {
	rep := &report.Report{Title: l.opts.Title, EvalSet: l.es.File, Plan: l.planLine}
	for _, a := range l.p.Attempts {
		rep.Attempts = append(rep.Attempts, report.AttemptRow{
			Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number, Status: "planned",
			Reason: a.Action + ": " + a.Reason, Carried: a.Action == plan.ActionCarry, Fingerprint: a.Fingerprint, Source: a.Sample.Source,
		})
	}
	return rep
}

// printDry prints the PLAN line, a per-task table and every attempt with its
// action (carry or run), reason and lane.
func (l *launcher) printDry() error {
	w := l.opts.Stdout
	if l.opts.DryJSON {
		return l.printDryJSON(w)
	}
	fmt.Fprintln(w, report.PlanLine(l.planLine))
	fmt.Fprintln(w, l.fc.String())
	for _, n := range l.fc.Notes {
		fmt.Fprintln(w, "  "+n)
	}
	type agg struct{ samples, attempts, run, carry int }
	// carry counts every attempt that does not run (carried results and
	// early-exit skips of samples whose pass is carried).
	per := make([]agg, len(l.p.Tasks))
	seen := map[string]bool{}
	for _, a := range l.p.Attempts {
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
	for i, t := range l.p.Tasks {
		limit := "ramp"
		switch {
		case t.Task.MaxSamples > 0:
			limit = fmt.Sprintf("≤%d", t.Task.MaxSamples)
		case l.exclusive[i]:
			limit = fmt.Sprintf("≤1 (%s exclusive)", l.taskProv[i])
		case !l.es.Fleet.SamplesRamp.Enabled:
			limit = "fixed"
		}
		lanes := map[string]bool{}
		for _, seq := range t.Order {
			if ln := l.bySeq(seq).Lane; ln != "" {
				lanes[ln] = true
			}
		}
		_ = tw.Append([]string{t.Task.Name, l.taskProv[i], fmt.Sprint(per[i].samples), fmt.Sprint(per[i].attempts), fmt.Sprint(per[i].run), fmt.Sprint(per[i].carry), limit, fmt.Sprint(len(lanes))})
	}
	if err := tw.Render(); err != nil {
		return err
	}
	return l.printDryAttempts(w)
}

// printDryAttempts prints every attempt, one plain aligned line each
// (thousands of rows: a boxed table costs more than the whole plan).
func (l *launcher) printDryAttempts(w io.Writer) error {
	bw := bufio.NewWriter(w)
	at := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(at, "#\ttask\tsample\tattempt\taction\treason\tlane")
	// Dispatch order within each task: lanes show their stable member order.
	n := 0
	for _, t := range l.p.Tasks {
		name := report.Plain(t.Task.Name, 60)
		for _, seq := range t.Order {
			a := l.bySeq(seq)
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

func (l *launcher) preflight(ctx context.Context, name string, prov sandbox.Provider, specs []*sandbox.Spec) error {
	pf, ok := prov.(sandbox.Preflighter)
	if !ok {
		return nil
	}
	confirm := l.opts.Confirm
	if confirm == nil {
		confirm = func(string) bool { return false }
	}
	return pf.PreflightRun(ctx, specs, l.budget, l.opts.Stderr, confirm, l.opts.WriteDaemonJSON)
}

// printDryJSON is `launch --dry --json`: the PLAN line, the forecast and
// every attempt with its action, in discovery order.
func (l *launcher) printDryJSON(w io.Writer) error {
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
	}{Plan: l.planLine, Forecast: &l.fc}
	for _, a := range l.p.Attempts {
		out.Attempts = append(out.Attempts, row{Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number, Action: a.Action, Reason: a.Reason, Lane: a.Lane})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
