package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/report"
)

func newReport(env Env) *cobra.Command {
	var recFlag, runID, format, title, logDir, inspectFormat string
	cmd := &cobra.Command{
		Use:   "report [EVALSET]",
		Short: "Render a run's report from the record (" + strings.ReplaceAll(report.FormatNames(false, false), " or ", ", ") + ")",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openRecordRO(ctx, recFlag, args, env)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.Runs(ctx)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return exitWith(ExitBadInput, fmt.Errorf("the record %s holds no runs yet", db.Path))
			}
			if runID == "" {
				// The newest run of the eval set named: a directory's record
				// holds the runs of every eval set in it.
				mine := ofEvalSet(runs, args)
				if len(mine) == 0 {
					return exitWith(ExitBadInput, fmt.Errorf("the record %s holds no runs of %s (%d of other eval sets; name one with --run)", db.Path, args[0], len(runs)))
				}
				runID = mine[0].ID
			}
			known := false
			for _, r := range runs {
				known = known || r.ID == runID
			}
			if !known {
				return exitWith(ExitBadInput, fmt.Errorf("--run %s: no such run in the record %s", runID, db.Path))
			}
			rep, err := report.FromRecord(ctx, db, []string{runID}, title)
			if err != nil {
				return err
			}
			f, _ := report.LookupFormat(format)    // an unknown one is refused by render, below
			dir := f.Name != "" && f.Render == nil // inspect: a directory of files
			if dir && inspectFormat != report.InspectEval && inspectFormat != report.InspectJSON {
				return exitWith(ExitBadInput, fmt.Errorf("--inspect-format %q: want eval or json", inspectFormat))
			}
			if f.Transcripts { // the formats that carry transcripts and artifacts
				if err := report.LoadTranscripts(ctx, db, rep); err != nil {
					return err
				}
			}
			if f.Trends { // the trend of the eval set's runs up to this one
				if rep.Trends, err = runTrends(ctx, db, runID); err != nil {
					return err
				}
			}
			judgeReport(ctx, db, runID, rep)
			if dir { // one file per task: writeInspectLogs
				return writeInspectLogs(env, rep, args, logDir, inspectFormat)
			}
			return render(env.Stdout, rep, format, env)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().StringVar(&runID, "run", "", "run id (default the newest)")
	cmd.Flags().StringVar(&format, "format", "terminal", report.FormatNames(true, false))
	cmd.Flags().StringVar(&logDir, "log-dir", "logs", "with --format inspect: the directory the logs are written to (inspect view --log-dir DIR opens it)")
	cmd.Flags().StringVar(&inspectFormat, "inspect-format", report.InspectEval, "with --format inspect: eval (Inspect's ZIP encoding) or json")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	return cmd
}

// render writes rep to w in the format named (report.Formats).
func render(w io.Writer, rep *report.Report, format string, env Env) error {
	if f, ok := report.LookupFormat(format); ok && f.Render != nil {
		return f.Render(w, rep)
	}
	return exitWith(ExitBadInput, fmt.Errorf("--format %q: want %s", format, report.FormatNames(false, false)))
}

// writeInspectLogs writes rep as one Inspect log per task into dir and
// prints each file's path. The samples' inputs and targets come from the
// eval set (args, else ./steward.yaml, else the run's own); without it each sample's input is
// its first model call's, and stderr says so.
func writeInspectLogs(env Env, rep *report.Report, args []string, dir, format string) error {
	path := ""
	if len(args) > 0 {
		path = args[0]
	} else if _, err := os.Stat("steward.yaml"); err != nil && rep.EvalSet != "" {
		path = rep.EvalSet // the eval set the run was launched with
	}
	opts, err := report.InspectOptionsFor(path, env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "steward report: the eval set was not read (%v): the logs take each sample's input from its first model call and have no targets\n", err)
	}
	opts.Format = format
	files, err := report.WriteInspect(dir, rep, opts)
	for _, f := range files {
		fmt.Fprintln(env.Stdout, f)
	}
	if err != nil {
		return exitWith(ExitInfra, err)
	}
	return nil
}
