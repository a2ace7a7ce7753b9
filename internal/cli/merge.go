package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/merge"
	"github.com/steward-evals/steward/internal/report"
)

func newMerge(env Env) *cobra.Command {
	var out, format, title, evalSet string
	var shards int
	cmd := &cobra.Command{
		Use:   "merge --out DIR RECORD...",
		Short: "Combine shard records into one record and one report",
		Long: `Combine the newest run of each shard record (the .steward directories that
matrix jobs uploaded) into one run in the record at --out, then print its
report. Rows come out in the whole eval set's discovery order.

The shard count comes from the records' "i/n" (or --shards N). A missing
slice is an error that names it (and, with --eval-set, the tasks and samples
that are in no record). The same run given twice counts once; a record whose
newest run is not a shard run (a cache restored into a shard job that never
ran) is left out with a warning; two runs that disagree on an attempt are
reported by task and sample.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return exitWith(ExitBadInput, errors.New("--out is required: the record directory to merge into"))
			}
			if shards < 0 {
				return exitWith(ExitBadInput, fmt.Errorf("--shards must be at least 1, got %d", shards))
			}
			rep, err := runMerge(cmd.Context(), out, args, merge.Options{Title: title, Shards: shards, EvalSet: evalSet, Getenv: env.Getenv, Warn: mergeWarnings(env.Stderr)})
			if err != nil {
				return err
			}
			if err := render(env.Stdout, rep, format, env); err != nil {
				return err
			}
			if code := exitFor(rep, false); code != ExitOK {
				return exitWith(code, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "record directory to merge into")
	cmd.Flags().StringVar(&format, "format", "terminal", report.FormatNames(false, true))
	cmd.Flags().StringVar(&title, "title", "", "report title")
	cmd.Flags().IntVar(&shards, "shards", 0, "how many shards to expect (default: the n of the records' i/n)")
	cmd.Flags().StringVar(&evalSet, "eval-set", "", "the eval set the shards ran, to name what a missing shard held")
	return cmd
}

// runMerge is merge.Merge with its bad input as exit 2.
func runMerge(ctx context.Context, out string, inputs []string, o merge.Options) (*report.Report, error) {
	rep, err := merge.Merge(ctx, out, inputs, o)
	if errors.Is(err, merge.ErrBadInput) {
		return nil, exitWith(ExitBadInput, err)
	}
	return rep, err
}

// mergeWarnings prints a merge's warnings on w (nil: drops them).
func mergeWarnings(w io.Writer) func(string) {
	return func(msg string) {
		if w != nil {
			fmt.Fprintln(w, "steward merge: "+msg)
		}
	}
}
