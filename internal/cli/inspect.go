package cli

import (
	"fmt"
	"os"

	"github.com/steward-evals/steward/internal/report"
)

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
