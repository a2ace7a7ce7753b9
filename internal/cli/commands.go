package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

func openRecord(ctx context.Context, flag string, args []string, env Env) (*record.DB, error) {
	es := ""
	if len(args) > 0 {
		es = args[0]
	}
	dir, err := resolveRecord(flag, es, env)
	if err != nil {
		return nil, err
	}
	return record.Open(ctx, dir)
}

// openRecordRO opens the record for commands that only read it (report,
// tend, lease inspect): nothing is written, so they work on a full disk and
// never wait behind writers. A missing record is bad input (exit 2); a
// damaged one is refused (exit 3).
func openRecordRO(ctx context.Context, flag string, args []string, env Env) (*record.DB, error) {
	es := ""
	if len(args) > 0 {
		es = args[0]
	}
	dir, err := resolveRecord(flag, es, env)
	if err != nil {
		return nil, err
	}
	db, err := record.OpenReadOnly(ctx, dir)
	if errors.Is(err, record.ErrNoRecord) {
		return nil, exitWith(ExitBadInput, err)
	}
	if err != nil {
		return nil, exitWith(ExitInfra, err)
	}
	return db, nil
}

func newReport(env Env) *cobra.Command {
	var recFlag, runID, format, title, logDir, inspectFormat string
	cmd := &cobra.Command{
		Use:   "report [EVALSET]",
		Short: "Render a run's report from the record (terminal, markdown, json, junit, html, inspect)",
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
			if format == "inspect" && inspectFormat != report.InspectEval && inspectFormat != report.InspectJSON {
				return exitWith(ExitBadInput, fmt.Errorf("--inspect-format %q: want eval or json", inspectFormat))
			}
			if format == "html" || format == "json" || format == "inspect" { // the formats that carry transcripts and artifacts
				if err := report.LoadTranscripts(ctx, db, rep); err != nil {
					return err
				}
			}
			if format == "html" { // the trend of the eval set's runs up to this one
				if rep.Trends, err = runTrends(ctx, db, runID); err != nil {
					return err
				}
			}
			judgeReport(ctx, db, runID, rep)
			if format == "inspect" { // one file per task: inspect.go
				return writeInspectLogs(env, rep, args, logDir, inspectFormat)
			}
			return render(env.Stdout, rep, format, env)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().StringVar(&runID, "run", "", "run id (default the newest)")
	cmd.Flags().StringVar(&format, "format", "terminal", "terminal, markdown, json, junit, html (one self-contained page with transcripts) or inspect (one Inspect log per task in --log-dir)")
	cmd.Flags().StringVar(&logDir, "log-dir", "logs", "with --format inspect: the directory the logs are written to (inspect view --log-dir DIR opens it)")
	cmd.Flags().StringVar(&inspectFormat, "inspect-format", report.InspectEval, "with --format inspect: eval (Inspect's ZIP encoding) or json")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	return cmd
}

func render(w io.Writer, rep *report.Report, format string, env Env) error {
	switch format {
	case "terminal":
		return report.Terminal(w, rep, report.TerminalOptions{})
	case "markdown", "md":
		return report.Markdown(w, rep, report.MarkdownOptions{})
	case "json":
		return report.JSON(w, rep)
	case "junit":
		return report.JUnit(w, rep)
	case "comment":
		_, err := io.WriteString(w, report.Comment(rep, report.CommentOptions{}))
		return err
	case "html":
		return report.HTML(w, rep, report.HTMLOptions{})
	}
	return exitWith(ExitBadInput, fmt.Errorf("--format %q: want terminal, markdown, json, junit, comment, html or inspect", format))
}

func newDoctor(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Print what Steward sees of this machine for each sandbox provider: Docker daemon, CPUs, memory, networks, address pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := providerSettingsHere(env)
			if err != nil {
				return err
			}
			out := scrubbed(env.Stdout, env)
			defer out.Flush()
			for _, d := range sandbox.Registered() {
				if d.Doctor == nil {
					continue
				}
				if err := d.Doctor(cmd.Context(), out, sandbox.RunInfo{Getenv: env.Getenv, Settings: settings, Liveness: runlock.Liveness{}}); err != nil {
					return out.Scrubber().Error(fmt.Errorf("%s: %w", d.Name, err))
				}
			}
			return nil
		},
	}
}

// providerSettingsHere reads the providers' sections of _steward.yaml in
// the working directory (kubernetes:), for doctor and sweep.
func providerSettingsHere(env Env) (map[string]any, error) {
	fleet, err := evalset.LoadFleet(evalset.FleetFileName, env.Getenv, evalset.FleetOverrides{})
	if err != nil {
		return nil, exitWith(ExitBadInput, err)
	}
	return fleet.ProviderSettings(), nil
}

func newSweep(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "sweep",
		Short: "Remove the sandboxes, containers, networks and untagged built images that dead Steward runs left behind (never a live run's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := providerSettingsHere(env)
			if err != nil {
				return err
			}
			var errs []error
			for _, d := range sandbox.Registered() {
				if d.Sweep == nil {
					continue
				}
				if err := d.Sweep(cmd.Context(), env.Stdout, sandbox.RunInfo{Getenv: env.Getenv, Settings: settings, Liveness: runlock.Liveness{}}); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
				}
			}
			return errors.Join(errs...)
		},
	}
}

func newRamp(env Env) *cobra.Command {
	var recFlag, reason string
	cmd := &cobra.Command{Use: "ramp", Short: "Hold or resume the sample ramp of live runs (through the record)"}
	hold := &cobra.Command{
		Use:   "hold [EVALSET]",
		Short: "Freeze the climb of every live run on this record",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return exitWith(ExitBadInput, errors.New(`--reason is required, e.g. --reason "provider looks unhappy"`))
			}
			return setHold(cmd, recFlag, args, env, reason, "ramp held: "+reason)
		},
	}
	hold.Flags().StringVar(&reason, "reason", "", "why (shown in the panel and the report)")
	resume := &cobra.Command{
		Use:   "resume [EVALSET]",
		Short: "Release a hold",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setHold(cmd, recFlag, args, env, "", "ramp resumed")
		},
	}
	cmd.PersistentFlags().StringVar(&recFlag, "record", "", "record directory")
	cmd.AddCommand(hold, resume)
	return cmd
}

// setHold writes the ramp hold (reason) or its release ("") into the record,
// where live runs read it at their next tend (R5).
func setHold(cmd *cobra.Command, recFlag string, args []string, env Env, reason, said string) error {
	db, err := openRecord(cmd.Context(), recFlag, args, env)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SetControl(cmd.Context(), run.HoldKey, reason, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s (live runs apply it at their next tend)\n", said)
	return nil
}

func newTend(env Env) *cobra.Command {
	var recFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tend [EVALSET]",
		Short: "Show the live ramp state of running invocations: setpoints, connection ceiling, signals, last decision",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecordRO(cmd.Context(), recFlag, args, env)
			if errors.Is(err, record.ErrNoRecord) {
				fmt.Fprintf(env.Stdout, "no live run: %v\n", errors.Unwrap(err))
				return nil
			}
			if err != nil {
				return err
			}
			defer db.Close()
			live, err := db.Live(cmd.Context())
			if err != nil {
				return err
			}
			dropDeadRuns(cmd.Context(), db, live)
			if len(live) == 0 {
				fmt.Fprintln(env.Stdout, "no live run on this record has tended yet")
				return nil
			}
			ids := make([]string, 0, len(live))
			for id := range live {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if asJSON {
					fmt.Fprintln(env.Stdout, live[id])
					continue
				}
				var s run.LiveState
				if err := json.Unmarshal([]byte(live[id]), &s); err != nil {
					return fmt.Errorf("read live state of %s: %w", id, err)
				}
				if s.Tended {
					fmt.Fprintf(env.Stdout, "run %s  (%s)  tended %s ago\n", s.RunID, s.EvalSet, time.Since(s.At).Round(time.Second))
				} else {
					fmt.Fprintf(env.Stdout, "run %s  (%s)  started %s ago, not tended yet\n", s.RunID, s.EvalSet, time.Since(s.At).Round(time.Second))
				}
				fmt.Fprintf(env.Stdout, "  %s\n  %s\n", report.PlanLine(s.Plan), report.CountsLine(s.Counts))
				fmt.Fprintf(env.Stdout, "  samples_ramp %s · budget %d · connection ceiling %d · limit %d", s.Range, s.Budget, s.Decision.Ceiling, s.Decision.Signals.ConnLimit)
				if s.Held != "" {
					fmt.Fprintf(env.Stdout, " · HELD: %s", s.Held)
				}
				if s.Tended {
					fmt.Fprintf(env.Stdout, "\n  signals: pushback %v · retries %d of %d requests\n  decision: %s\n", s.Decision.Signals.Pushback, s.Decision.Signals.Retries, s.Decision.Signals.Requests, s.Decision.Reason)
				} else {
					fmt.Fprintf(env.Stdout, "\n  not tended yet: starting setpoints\n")
				}
				at := func(v []int, i int) int {
					if i < len(v) {
						return v[i]
					}
					return 0
				}
				for i, name := range s.Tasks {
					var td string
					if i < len(s.Decision.Tasks) {
						td = fmt.Sprintf(" · %s: %s", s.Decision.Tasks[i].Action, s.Decision.Tasks[i].Reason)
					}
					line := fmt.Sprintf("  %-20s setpoint %4d (cap %d) · running %4d", name, at(s.Setpoints, i), at(s.Caps, i), at(s.Running, i))
					if n := at(s.Starting, i); n > 0 {
						line += fmt.Sprintf(" · starting %d", n)
					}
					fmt.Fprintf(env.Stdout, "%s · queued %5d%s\n", line, at(s.Queued, i), td)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON state")
	return cmd
}

func newLease(env Env) *cobra.Command {
	var recFlag, token string
	var ownerGone, quiescent bool
	cmd := &cobra.Command{Use: "lease", Short: "Inspect and recover shared_state leases"}
	inspect := &cobra.Command{
		Use:   "inspect [KEY]",
		Short: "Show who holds a lease, with its owner token (the only place the token is shown)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecordRO(cmd.Context(), recFlag, nil, env)
			if err != nil {
				return err
			}
			defer db.Close()
			key := ""
			if len(args) == 1 {
				key = args[0]
			}
			ls, err := db.Leases(cmd.Context(), key)
			if err != nil {
				return err
			}
			if len(ls) == 0 {
				if key != "" {
					fmt.Fprintf(env.Stdout, "lease %q is free\n", key)
				} else {
					fmt.Fprintln(env.Stdout, "no lease is held")
				}
				return nil
			}
			for _, l := range ls {
				fmt.Fprintf(env.Stdout, "key:      %s\nrun:      %s\ntask:     %s\nowner:    pid %d on %s\nsince:    %s\ntoken:    %s\n\n", l.Key, l.RunID, l.Task, l.PID, l.Host, l.Acquired.Format(time.RFC3339), l.Token)
			}
			fmt.Fprintln(env.Stdout, "Steward never takes a lease over. Once you have checked that the owner is gone and the shared state is quiescent:\n  steward lease recover KEY --token TOKEN --owner-gone --state-quiescent")
			return nil
		},
	}
	recover := &cobra.Command{
		Use:   "recover KEY",
		Short: "Free a lease whose owner is gone (needs the owner token and both confirmations)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" || !ownerGone || !quiescent {
				return exitWith(ExitBadInput, errors.New("recover needs --token (from `steward lease inspect`), --owner-gone and --state-quiescent: confirm the owner has terminated and the shared state is quiescent"))
			}
			db, err := openRecord(cmd.Context(), recFlag, nil, env)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Recover(cmd.Context(), args[0], token); err != nil {
				return exitWith(ExitBadInput, err)
			}
			fmt.Fprintf(env.Stdout, "lease %q recovered\n", args[0])
			return nil
		},
	}
	recover.Flags().StringVar(&token, "token", "", "the owner token shown by `steward lease inspect`")
	recover.Flags().BoolVar(&ownerGone, "owner-gone", false, "confirm the owning process has terminated")
	recover.Flags().BoolVar(&quiescent, "state-quiescent", false, "confirm the shared state is quiescent")
	cmd.PersistentFlags().StringVar(&recFlag, "record", "", "record directory (default .steward)")
	cmd.AddCommand(inspect, recover)
	return cmd
}

// newInternal makes the hidden commands the registered sandbox providers
// run themselves (docker: the gateway relay).
func newInternal(env Env) []*cobra.Command {
	var out []*cobra.Command
	for _, d := range sandbox.Registered() {
		for _, ic := range d.Internal {
			out = append(out, &cobra.Command{
				Use:    ic.Name + " " + ic.Usage,
				Short:  ic.Short,
				Hidden: true,
				Args:   cobra.ExactArgs(ic.Args),
				RunE: func(cmd *cobra.Command, args []string) error {
					return ic.Run(cmd.Context(), args, env.Stderr)
				},
			})
		}
	}
	return out
}

func newWorker(env Env) *cobra.Command {
	var forTasks string
	cmd := &cobra.Command{
		Use:    run.WorkerArg,
		Short:  "internal: a worker process that runs one or more tasks' attempts for the supervisor",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The worker runs in a process group of its own, so a terminal's
			// ^C reaches only the supervisor, which decides when attempts stop
			// (abort) or the run ends. The context ends when the worker itself
			// is signalled or its supervisor is gone: it then aborts and
			// removes its sandboxes.
			return run.Worker(cmd.Context(), env.Stdin, env.Stdout, env.Stderr, run.Registry{Getenv: env.Getenv}, env.Getenv)
		},
	}
	cmd.Flags().StringVar(&forTasks, "for", "", "the tasks this worker runs (informational, shown in ps)")
	return cmd
}

// IsWorker says whether args start a worker process (main prepares those to
// outlive a dead supervisor long enough to clean up).
func IsWorker(args []string) bool { return len(args) > 0 && args[0] == run.WorkerArg }

// Supervises says whether args start a command that runs sandboxes
// (launch, action): main makes it the reaper of orphaned agent processes.
func Supervises(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		return a == "launch" || a == "action"
	}
	return false
}
