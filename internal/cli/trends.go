package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
)

// newTrends is `steward trends`: per task, the pass rate with its
// interval, spend, tokens and attempt time over the record's runs of one
// eval set (or over several records' runs, merged by start time).
func newTrends(env Env) *cobra.Command {
	var records []string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "trends [EVALSET]",
		Short: "Per task, the pass rate (95% CI), spend, tokens and attempt time over the record's runs of one eval set",
		Long: `Show, per task, the pass rate with its 95% interval, what the run spent on the
task, its tokens and the mean time of the attempts it ran, over the finished
runs of one eval set, oldest first (the newest --limit runs). EVALSET names
the eval set (default: the newest run's); --record may be given several times
(main's record restored from CI beside this checkout's): their runs are
merged by start time. The HTML report (steward report --format html, steward
view) draws the same trend as charts.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if limit < 2 {
				return exitWith(ExitBadInput, fmt.Errorf("--limit %d: want 2 runs or more", limit))
			}
			if len(records) == 0 {
				records = []string{""}
			}
			t := &report.Trends{}
			for _, rf := range records {
				db, err := openRecordRO(ctx, rf, args, env)
				if err != nil {
					return err
				}
				err = addTrends(ctx, db, t, args, limit, len(records) > 1)
				db.Close()
				if err != nil {
					return err
				}
			}
			t.Sort()
			if n := len(t.Runs); n > limit {
				t.Runs = t.Runs[n-limit:]
				for i := range t.Tasks {
					t.Tasks[i].Points = t.Tasks[i].Points[n-limit:]
				}
			}
			if asJSON {
				return report.WriteTrendsJSON(env.Stdout, t)
			}
			return report.TrendsTerminal(env.Stdout, t)
		},
	}
	cmd.Flags().StringArrayVar(&records, "record", nil, "record directory (repeat to merge several records' runs)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", report.TrendLimit, "the newest runs to show")
	return cmd
}

// addTrends adds db's finished runs of the eval set args names (default:
// the newest run's) to t.
func addTrends(ctx context.Context, db *record.DB, t *report.Trends, args []string, limit int, label bool) error {
	runs, err := db.Runs(ctx)
	if err != nil {
		return exitWith(ExitInfra, err)
	}
	runs = ofEvalSet(runs, args)
	evalSet := ""
	if len(args) == 0 && len(runs) > 0 {
		evalSet = runs[0].EvalSet
	}
	lbl := ""
	if label {
		lbl = db.Path
	}
	if err := t.FromRecord(ctx, db, report.TrendRuns(runs, evalSet, limit), lbl); err != nil {
		return exitWith(ExitInfra, err)
	}
	return nil
}

// runTrends is the trend a run's report shows: the finished runs of its
// eval set up to it (it included, whatever its status), at most
// report.TrendLimit; nil with fewer than two.
func runTrends(ctx context.Context, db *record.DB, runID string) (*report.Trends, error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var this record.Run
	for _, r := range runs {
		if r.ID == runID {
			this = r
		}
	}
	if this.ID == "" {
		return nil, errors.New("trends: no run " + runID)
	}
	var before []record.Run
	for _, r := range runs {
		if r.ID != runID && !r.Started.After(this.Started) {
			before = append(before, r)
		}
	}
	picked := report.TrendRuns(before, this.EvalSet, report.TrendLimit-1)
	if len(picked) == 0 {
		return nil, nil
	}
	t := &report.Trends{}
	if err := t.FromRecord(ctx, db, append(picked, this), ""); err != nil {
		return nil, err
	}
	return t, nil
}
