package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/crashed"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/status"
)

// runRow is one line of `steward runs`.
type runRow struct {
	ID          string        `json:"id"`
	Status      status.Run    `json:"status"`
	Started     time.Time     `json:"started"`
	Finished    time.Time     `json:"finished,omitzero"`
	Duration    time.Duration `json:"duration_ns"`
	Counts      report.Counts `json:"counts"`
	Planned     int           `json:"planned"`
	Unpublished int           `json:"unpublished"`
	User        string        `json:"user,omitempty"`
	Host        string        `json:"host"`
	PID         int           `json:"pid"`
	Container   string        `json:"container,omitempty"`
	// Unknown says why a run recorded as running could be judged neither
	// alive nor dead from here (another machine, mount namespace or boot).
	Unknown string `json:"unknown,omitempty"`
}

func newRuns(env Env) *cobra.Command {
	var recFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs [EVALSET]",
		Short: "List the record's runs: status, counts, duration, who ran them where; marks runs whose process is gone as crashed",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openRecord(ctx, recFlag, args, env)
			if err != nil {
				return err
			}
			defer db.Close()
			rows, err := listRuns(ctx, db, time.Now(), args)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return renderRuns(env.Stdout, rows)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// listRuns marks runs whose process is provably gone as crashed, then lists
// every run, newest first: only the runs of the eval set args names, when
// it names one (a directory's record holds the runs of every eval set in it).
func listRuns(ctx context.Context, db *record.DB, now time.Time, args []string) ([]runRow, error) {
	here := runlock.Here()
	_, unknown, err := crashed.Mark(ctx, db, here, now)
	if err != nil {
		return nil, record.Classify(db.Dir, err)
	}
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	runs = ofEvalSet(runs, args)
	var rows []runRow
	for _, r := range runs {
		owner := crashed.Owner(ctx, db, r)
		row := runRow{ID: r.ID, Status: r.Status, Started: r.Started, Finished: r.Finished, User: owner.User, Host: owner.Host, PID: owner.PID, Container: owner.Container}
		if row.Host == "" {
			row.Host = r.Host
		}
		if r.Finished.IsZero() {
			row.Duration = now.Sub(r.Started)
		} else {
			row.Duration = r.Finished.Sub(r.Started)
		}
		if e := unknown[r.ID]; e != nil {
			row.Unknown = e.Error()
		}
		as, err := db.Attempts(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		rep := &report.Report{}
		for _, a := range as {
			rep.Attempts = append(rep.Attempts, report.AttemptRow{Status: a.Status, Carried: a.CarriedFrom != "", Task: a.Task})
		}
		rep.Recount()
		row.Counts = rep.Counts
		p, err := db.PlanOf(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		row.Planned = len(p.Planned)
		if r.Status != status.Finished && row.Planned > len(as) {
			row.Unpublished = row.Planned - len(as)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ofEvalSet keeps the runs of the eval set args names (a file, or a
// directory meaning its steward.yaml); every run when args names none. A run
// is the eval set's when it recorded the same absolute path, or, for a
// record that moved with its checkout (a CI cache restored elsewhere), the
// same file name at a path that is no longer there.
func ofEvalSet(runs []record.Run, args []string) []record.Run {
	if len(args) == 0 {
		return runs
	}
	path := args[0]
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, evalset.DefaultFileName)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return runs
	}
	var out []record.Run
	for _, r := range runs {
		if record.SameEvalSet(r.EvalSet, abs) {
			out = append(out, r)
		}
	}
	return out
}

func renderRuns(w io.Writer, rows []runRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no runs in the record yet")
		return err
	}
	tw := tablewriter.NewTable(w)
	tw.Header("run", "status", "started", "duration", "attempts", "passed", "failed", "errored", "skipped", "unpublished", "who / where")
	var notes []string
	for _, r := range rows {
		who := r.Host
		if r.User != "" {
			who = r.User + "@" + who
		}
		if r.PID != 0 {
			who += fmt.Sprintf(" pid %d", r.PID)
		}
		if r.Container != "" && len(r.Container) >= 12 {
			who += " (container " + r.Container[:12] + ")"
		}
		st := string(r.Status)
		if r.Unknown != "" {
			st += " (unverified)"
			notes = append(notes, fmt.Sprintf("run %s is recorded as running but %v", r.ID, r.Unknown))
		}
		c := r.Counts
		_ = tw.Append([]string{r.ID, st, r.Started.Local().Format("2006-01-02 15:04:05"), r.Duration.Round(time.Second).String(),
			fmt.Sprint(c.Total), fmt.Sprint(c.Passed), fmt.Sprint(c.Failed), fmt.Sprint(c.Errored + c.Infra), fmt.Sprint(c.Skipped),
			fmt.Sprint(r.Unpublished), report.Plain(who, 80)})
	}
	if err := tw.Render(); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, report.Plain(n, 400)); err != nil {
			return err
		}
	}
	return nil
}

// judgeReport tells a report whose run the record still calls running that
// the run crashed, when its process is provably gone (a report only reads:
// the record is marked by the next launch or `steward runs`).
func judgeReport(ctx context.Context, db *record.DB, runID string, rep *report.Report) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return
	}
	for _, r := range runs {
		if r.ID != runID || r.Status != status.Running {
			continue
		}
		if dead, err := crashed.Judge(ctx, db, r, runlock.Here()); err == nil && dead {
			rep.Crashed = crashed.Reason(crashed.Owner(ctx, db, r))
			rep.Partial = true
		}
	}
}

// dropDeadRuns removes from live the runs whose process is provably gone
// (a killed run's last live state is not a live run).
func dropDeadRuns(ctx context.Context, db *record.DB, live map[string]string) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return
	}
	here := runlock.Here()
	for _, r := range runs {
		if _, ok := live[r.ID]; !ok {
			continue
		}
		if r.Status != status.Running {
			delete(live, r.ID)
			continue
		}
		if dead, err := crashed.Judge(ctx, db, r, here); err == nil && dead {
			delete(live, r.ID)
		}
	}
}
