package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
)

// newCompare is `steward compare`: any two runs judged as the pull request
// comparison judges head against base, so a change can be judged locally
// before it is pushed.
func newCompare(env Env) *cobra.Command {
	var recFlag, baseRecord, format, confidence, minEffect string
	cmd := &cobra.Command{
		Use:   "compare [RECORD] BASE_RUN HEAD_RUN",
		Short: "Judge one run against another as the pull request comparison does: verdict, intervals, per-sample changes",
		Long: `Judge HEAD_RUN against BASE_RUN with the verdict the action gives a pull request
(a paired test per task, Holm across tasks; docs/judging.md). Both runs are in
the record (RECORD, --record, or .steward here); with --base-record BASE_RUN is
read from another record (main's, restored from CI). A run id may be "newest"
(the record's newest run) or "previous" (the one before it).`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 3 {
				if recFlag != "" {
					return exitWith(ExitBadInput, errors.New("name the record once: RECORD or --record"))
				}
				recFlag, args = args[0], args[1:]
			}
			opts := report.CompareOptions{Confidence: report.DefaultConfidence, MinEffect: report.DefaultMinEffect, MinEffectSet: true}
			var errs []error
			if confidence != "" {
				x, err := strconv.ParseFloat(strings.TrimSuffix(confidence, "%"), 64)
				if strings.HasSuffix(confidence, "%") {
					x /= 100
				}
				if err != nil || x < 0.5 || x >= 1 {
					errs = append(errs, fmt.Errorf("--confidence %q: want a level from 0.5 to below 1 (0.95 or 95%%)", confidence))
				}
				opts.Confidence = x
			}
			if minEffect != "" {
				x, err := strconv.ParseFloat(minEffect, 64)
				if err != nil || x < 0 || x > 100 {
					errs = append(errs, fmt.Errorf("--min-effect %q: want points from 0 to 100 (5 is five points of pass rate)", minEffect))
				}
				opts.MinEffect = x / 100
			}
			switch format {
			case "terminal", "markdown", "md", "json", "html":
			default:
				errs = append(errs, fmt.Errorf("--format %q: want terminal, markdown, json or html", format))
			}
			if err := errors.Join(errs...); err != nil {
				return exitWith(ExitBadInput, err)
			}
			headDB, err := openRecordRO(ctx, recFlag, nil, env)
			if err != nil {
				return err
			}
			defer headDB.Close()
			baseDB := headDB
			if baseRecord != "" {
				if baseDB, err = openRecordRO(ctx, baseRecord, nil, env); err != nil {
					return err
				}
				defer baseDB.Close()
			}
			baseID, err := resolveRun(ctx, baseDB, args[0])
			if err != nil {
				return err
			}
			headID, err := resolveRun(ctx, headDB, args[1])
			if err != nil {
				return err
			}
			label := "run " + baseID
			if baseRecord != "" {
				label += " of " + baseDB.Path
			}
			head, err := compareRuns(ctx, baseDB, headDB, baseID, headID, label, opts, format == "html")
			if err != nil {
				return exitWith(ExitInfra, err)
			}
			switch format {
			case "json":
				return report.WriteComparisonJSON(env.Stdout, head.Comparison)
			case "markdown", "md":
				return report.ComparisonMarkdown(env.Stdout, head.Comparison)
			case "html":
				return report.HTML(env.Stdout, head, report.HTMLOptions{})
			}
			return report.ComparisonTerminal(env.Stdout, head.Comparison)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory (default .steward)")
	cmd.Flags().StringVar(&baseRecord, "base-record", "", "read BASE_RUN from this record instead")
	cmd.Flags().StringVar(&format, "format", "terminal", "terminal, markdown, json or html")
	cmd.Flags().StringVar(&confidence, "confidence", "", "confidence of the tests and intervals (default 0.95)")
	cmd.Flags().StringVar(&minEffect, "min-effect", "", "smallest change that matters, in points (default 5)")
	return cmd
}

// resolveRun reads a run id, "newest" or "previous".
func resolveRun(ctx context.Context, db *record.DB, id string) (string, error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return "", exitWith(ExitInfra, err)
	}
	switch id {
	case "newest", "previous":
		i := 0
		if id == "previous" {
			i = 1
		}
		if len(runs) <= i {
			return "", exitWith(ExitBadInput, fmt.Errorf("%s: the record %s holds %d run(s)", id, db.Path, len(runs)))
		}
		return runs[i].ID, nil
	}
	for _, r := range runs {
		if r.ID == id {
			return id, nil
		}
	}
	return "", exitWith(ExitBadInput, fmt.Errorf("run %s: no such run in the record %s (`steward runs` lists them)", id, db.Path))
}

// compareRuns judges run headID of headDB against run baseID of baseDB as
// the pull request comparison does, and returns head's report with the
// comparison; sideBySide adds the per-sample side by side (HTML).
func compareRuns(ctx context.Context, baseDB, headDB *record.DB, baseID, headID, label string, opts report.CompareOptions, sideBySide bool) (*report.Report, error) {
	base, err := report.FromRecord(ctx, baseDB, []string{baseID}, "")
	if err != nil {
		return nil, err
	}
	runs, err := baseDB.Runs(ctx)
	if err != nil {
		return nil, err
	}
	if err := baseEvidence(ctx, baseDB, runs, base); err != nil {
		return nil, err
	}
	if err := knownFlaky(ctx, baseDB, base); err != nil {
		return nil, err
	}
	head, err := report.FromRecord(ctx, headDB, []string{headID}, "")
	if err != nil {
		return nil, err
	}
	opts.Flaky = base.KnownFlaky
	head.Comparison = report.Compare(head, base, label, opts)
	if sideBySide {
		head.SideBySide = report.SideBySide(head, base)
	}
	return head, nil
}
