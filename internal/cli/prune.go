package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/record"
)

func newPrune(env Env) *cobra.Command {
	var recFlag string
	var keepRuns, keepTranscripts int
	var dry bool
	cmd := &cobra.Command{
		Use:   "prune [EVALSET]",
		Short: "Drop from the record what no command needs any more (old runs' carried references, transcripts, ramp history), then shrink the file",
		Long: `Prune keeps, always: the newest --keep-runs runs whole, the newest finished
run whole (what a baseline reads) and every run still running; for every
fingerprint its newest judged attempt (what carry reads, and --rerun's newest
pass, and early exit's skip); the attempts the kept runs carry; every own
attempt that passed, failed or errored at the newest definition of each sample
(what 'steward flaky' and the verdict's base side count); and the transcripts
and artifacts of the attempts the newest --keep-transcripts runs show.

From the other runs it drops their carried references, every other attempt,
their ramp history and plans, and the run itself when none of its attempts is
kept; then it vacuums the record so that the file (and the CI cache holding
it) shrinks. With EVALSET only that eval set's runs are touched. --dry says
what would be dropped and changes nothing.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keepRuns < 1 {
				return exitWith(ExitBadInput, errors.New("--keep-runs must be at least 1"))
			}
			if keepTranscripts < 0 {
				return exitWith(ExitBadInput, errors.New("--keep-transcripts must not be negative"))
			}
			es := ""
			if len(args) > 0 {
				es = args[0]
			}
			dir, err := resolveRecord(recFlag, es, env)
			if err != nil {
				return err
			}
			res, err := pruneRecord(cmd.Context(), dir, args, keepRuns, keepTranscripts, dry)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, pruneSummary(res, dry))
			return nil
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().IntVar(&keepRuns, "keep-runs", record.DefaultKeepRuns, "keep the newest N runs whole")
	cmd.Flags().IntVar(&keepTranscripts, "keep-transcripts", record.DefaultKeepTranscripts, "keep the transcripts and artifacts of the newest M runs")
	cmd.Flags().BoolVar(&dry, "dry", false, "say what would be dropped; change nothing")
	return cmd
}

// pruneRecord prunes the record in dir (only the runs of the eval set args
// names, when it names one). A missing record is bad input.
func pruneRecord(ctx context.Context, dir string, args []string, keepRuns, keepTranscripts int, dry bool) (record.PruneResult, error) {
	if _, err := os.Stat(filepath.Join(dir, record.FileName)); err != nil {
		return record.PruneResult{}, exitWith(ExitBadInput, fmt.Errorf("prune: no record in %s: %w", dir, err))
	}
	db, err := record.Open(ctx, dir)
	if err != nil {
		return record.PruneResult{}, exitWith(ExitInfra, err)
	}
	defer db.Close()
	o := record.PruneOptions{KeepRuns: keepRuns, KeepTranscripts: keepTranscripts, Dry: dry}
	if len(args) > 0 {
		o.InScope = func(r record.Run) bool { return len(ofEvalSet([]record.Run{r}, args)) == 1 }
	}
	res, err := db.Prune(ctx, o)
	if err != nil {
		return res, exitWith(ExitInfra, err)
	}
	if err := db.Close(); err != nil {
		return res, exitWith(ExitInfra, err)
	}
	res.BytesAfter = db.Size()
	return res, nil
}

// pruneSummary says in one line what prune dropped (or would drop).
func pruneSummary(p record.PruneResult, dry bool) string {
	verb := "dropped"
	if dry {
		verb = "would drop"
	}
	if !p.Dropped() {
		return fmt.Sprintf("prune: nothing to drop (%d runs); the record is %s", p.Runs, Bytes(p.BytesAfter))
	}
	s := fmt.Sprintf("prune: %d runs, %d kept whole, %d thinned, %d removed; %s %d carried references, %d attempts, %d transcripts, %d artifacts, %d ramp points",
		p.Runs, p.RunsKeptWhole, p.RunsThinned, p.RunsDropped, verb, p.CarriesDropped, p.AttemptsDropped, p.TranscriptsDropped, p.ArtifactsDropped, p.RampDropped)
	if dry {
		return s + fmt.Sprintf("; the record is %s", Bytes(p.BytesBefore))
	}
	return s + fmt.Sprintf("; the record went from %s to %s", Bytes(p.BytesBefore), Bytes(p.BytesAfter))
}

// Bytes shows a size as people read it: 512 B, 3.4 KiB, 12.0 MiB.
func Bytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
