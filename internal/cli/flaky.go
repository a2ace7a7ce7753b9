package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/stats"
)

// flakyConfidence is the confidence of the intervals `steward flaky` shows.
const flakyConfidence = 0.95

// flakyReport is `steward flaky --json`.
type flakyReport struct {
	// EvalSet is the eval set whose runs were read ("" = every eval set).
	EvalSet    string  `json:"evalset"`
	Confidence float64 `json:"confidence"`
	// All: every sample's ledger row, not only the flaky ones.
	All     bool       `json:"all"`
	Samples []flakyRow `json:"samples"`
}

// flakyRow is one sample at one identity (definition).
type flakyRow struct {
	Task     string `json:"task"`
	Sample   string `json:"sample"`
	Identity string `json:"identity"`
	Flaky    bool   `json:"flaky"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Errored  int    `json:"errored"`
	Judged   int    `json:"judged"`
	// Rate is passed/judged and Interval its Wilson interval; both absent
	// when nothing was judged.
	Rate       *float64        `json:"rate,omitempty"`
	Interval   *stats.Interval `json:"interval,omitempty"`
	Runs       int             `json:"runs"`
	MaxAttempt int             `json:"max_attempt"`
	FirstSeen  time.Time       `json:"first_seen,omitzero"`
	LastSeen   time.Time       `json:"last_seen,omitzero"`
}

func newFlaky(env Env) *cobra.Command {
	var recFlag string
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "flaky [EVALSET]",
		Short: "List the record's flaky samples: mixed passed and failed attempts at one definition, with the pass rate and its 95% interval",
		Long: `List the flaky samples of the record: samples that both passed and failed at
one identity (the same task, sample and fingerprint parts: the same
definition), over every run the record holds. Carried attempts are copies
and never count; errored attempts are counted apart and are no verdict.

Each row shows passed/judged, the observed pass rate with its 95% Wilson
interval, how many runs produced the attempts and when the last one ended.
Rows are in task, sample order (stable and diffable from night to night);
a sample whose definition changed has a row per definition.

With EVALSET, only that eval set's runs are read; without, every run of the
record. --all lists every sample's ledger row, flaky or not. Build the
evidence with 'steward launch --confirm N' (a nightly job on main).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openRecordRO(ctx, recFlag, args, env)
			if err != nil {
				return err
			}
			defer db.Close()
			evalSet := ""
			if len(args) == 1 {
				if evalSet, err = filepath.Abs(args[0]); err != nil {
					return exitWith(ExitBadInput, fmt.Errorf("EVALSET %s: %w", args[0], err))
				}
			}
			rep, err := flakyLedger(ctx, db, evalSet, all)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return renderFlaky(env.Stdout, rep)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "list every sample's ledger row, not only the flaky ones")
	return cmd
}

// flakyLedger reads the ledger of evalSet's runs ("" = every run). An eval
// set none of the record's runs launched is bad input, naming those it holds.
func flakyLedger(ctx context.Context, db *record.DB, evalSet string, all bool) (*flakyReport, error) {
	if evalSet != "" {
		runs, err := db.Runs(ctx)
		if err != nil {
			return nil, exitWith(ExitInfra, err)
		}
		seen := map[string]bool{}
		var others []string
		for _, r := range runs {
			if r.EvalSet == evalSet {
				seen = nil
				break
			}
			if !seen[r.EvalSet] {
				seen[r.EvalSet] = true
				others = append(others, r.EvalSet)
			}
		}
		if seen != nil && len(others) > 0 {
			sort.Strings(others)
			return nil, exitWith(ExitBadInput, fmt.Errorf("the record %s holds no run of %s; its runs are of %s (omit EVALSET and pass --record to read them all)", db.Path, evalSet, strings.Join(others, ", ")))
		}
	}
	rows, err := db.Ledger(ctx, evalSet)
	if err != nil {
		return nil, exitWith(ExitInfra, err)
	}
	rep := &flakyReport{EvalSet: evalSet, Confidence: flakyConfidence, All: all, Samples: []flakyRow{}}
	for _, r := range rows {
		if !all && !r.Flaky() {
			continue
		}
		x := flakyRow{Task: r.Task, Sample: r.Sample, Identity: r.Identity, Flaky: r.Flaky(), Passed: r.Passed, Failed: r.Failed,
			Errored: r.Errored, Judged: r.Judged(), Runs: r.Runs, MaxAttempt: r.MaxAttempt, FirstSeen: r.First.UTC(), LastSeen: r.Last.UTC()}
		if r.First.IsZero() {
			x.FirstSeen = time.Time{}
		}
		if r.Last.IsZero() {
			x.LastSeen = time.Time{}
		}
		if n := r.Judged(); n > 0 {
			rate := float64(r.Passed) / float64(n)
			iv := stats.Wilson(float64(r.Passed), float64(n), flakyConfidence)
			x.Rate, x.Interval = &rate, &iv
		}
		rep.Samples = append(rep.Samples, x)
	}
	return rep, nil
}

func renderFlaky(w io.Writer, rep *flakyReport) error {
	if len(rep.Samples) == 0 {
		msg := "no flaky samples in the record (no sample both passed and failed at one definition)"
		if rep.All {
			msg = "no samples in the record yet"
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	tw := tablewriter.NewTable(w)
	tw.Header("task", "sample", "passed", "rate", "interval", "errored", "runs", "last seen", "definition")
	flaky := 0
	for _, r := range rep.Samples {
		rate, iv := "–", "–"
		if r.Rate != nil {
			rate = fmt.Sprintf("%.1f%%", 100**r.Rate)
			iv = fmt.Sprintf("%.1f–%.1f%%", 100*r.Interval.Lo, 100*r.Interval.Hi)
		}
		last := "–"
		if !r.LastSeen.IsZero() {
			last = r.LastSeen.Format("2006-01-02 15:04 UTC")
		}
		sample := r.Sample
		if rep.All && r.Flaky {
			sample += " (flaky)"
		}
		if r.Flaky {
			flaky++
		}
		_ = tw.Append([]string{report.Plain(r.Task, 80), report.Plain(sample, 80), fmt.Sprintf("%d/%d", r.Passed, r.Judged), rate, iv,
			fmt.Sprint(r.Errored), fmt.Sprint(r.Runs), last, r.Identity[:min(8, len(r.Identity))]})
	}
	if err := tw.Render(); err != nil {
		return err
	}
	unit := "samples are"
	if flaky == 1 {
		unit = "sample is"
	}
	_, err := fmt.Fprintf(w, "%d %s flaky (passed and failed at one definition); intervals are 95%% Wilson; carried attempts are not counted\n", flaky, unit)
	return err
}
