package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/eventlog"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
	"github.com/steward-evals/steward/internal/sandbox"
)

type launchFlags struct {
	dry, rerun, earlyExit, writeDaemonJSON, jsonOut bool
	tasks, samples                                  []string
	concurrency, maxWorkers, maxTasks               int
	budget                                          float64
	shard, title, record, samplesRamp, reportDir    string
	events                                          string
	// providerFlags are the flags providers declare over their sections
	// (sandbox.RegisterSection: --kubeconfig), by name.
	providerFlags map[string]*string
	// --model, --model-base-url, --upstream, -M key=value: over the eval set's model.
	model, modelBaseURL, upstream string
	// --agent: over every task's agent (agent: oracle for a Harbor dataset).
	agent               string
	modelSettings       []string
	tendInterval, grace time.Duration
	// --confirm N and --confirm-samples: more attempts of the selected samples.
	confirm        int
	confirmSamples []string
	// The numeric flags as typed (set by the command line; the action sets
	// the numbers above directly): parsed in launch, so a bad one is
	// reported with every other flag, environment and eval set problem.
	rawConcurrency, rawBudget, rawWorkers, rawTasks string
	rawTendInterval, rawGrace                       string
}

// rawFlag keeps a flag's text for launch to parse (pflag would stop at the
// first bad number and hide every other problem).
type rawFlag struct {
	s   *string
	typ string
}

func (r rawFlag) String() string     { return *r.s }
func (r rawFlag) Set(v string) error { *r.s = v; return nil }
func (r rawFlag) Type() string       { return r.typ }

func newLaunch(env Env) *cobra.Command {
	var f launchFlags
	cmd := &cobra.Command{
		Use:   "launch [EVALSET]",
		Short: "Run an eval set (default ./steward.yaml)",
		Long: `Run an eval set: plan the attempts, carry unchanged judged results from the
record, run the rest in sandboxes under the sandbox budget and the sample
ramp, and print the results table in discovery order.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "steward.yaml"
			if len(args) == 1 {
				path = args[0]
			}
			rep, cancelled, err := launch(cmd.Context(), env, path, f, cmd.Flags().Changed)
			if err != nil {
				return err
			}
			if f.dry {
				return nil
			}
			if code := exitFor(rep, cancelled); code != ExitOK {
				return exitWith(code, nil)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.dry, "dry", false, "print the plan (what would run, what is carried and why) and exit")
	fl.StringSliceVar(&f.tasks, "task", nil, "run only tasks matching these globs")
	fl.StringSliceVar(&f.samples, "sample", nil, "run only samples whose id matches these globs")
	fl.Var(rawFlag{&f.rawConcurrency, "int"}, "max-concurrency", "sandbox budget: live sandboxes machine-wide (wins over max_sandboxes)")
	fl.Var(rawFlag{&f.rawBudget, "float"}, "budget", "stop starting attempts once this many USD are spent")
	fl.BoolVar(&f.rerun, "rerun", false, "carry only passed results; run failed ones again")
	fl.BoolVar(&f.earlyExit, "early-exit", false, "after an attempt passes, do not dispatch the sample's remaining attempts")
	fl.IntVar(&f.confirm, "confirm", 0, "also run N more attempts of every selected sample, numbered after the highest the record holds at the sample's definition (new observations for `steward flaky`, never carried from the night before)")
	fl.StringSliceVar(&f.confirmSamples, "confirm-samples", nil, "with --confirm: only these samples, as task/sample (comma-separated or repeated)")
	fl.StringVar(&f.shard, "shard", "", "run one slice of the eval set, e.g. 2/4")
	fl.StringVar(&f.title, "title", "", "report title")
	fl.StringVar(&f.record, "record", "", "record directory (default .steward beside the eval set)")
	f.providerFlags = map[string]*string{}
	for _, sec := range sandbox.Sections() {
		for _, sf := range sec.Flags {
			f.providerFlags[sf.Name] = fl.String(sf.Name, "", sf.Usage)
		}
	}
	fl.StringVar(&f.agent, "agent", "", "every task's agent command (replaces agent:, as if written there); oracle runs a Harbor dataset's reference solutions (docs/harbor.md)")
	fl.StringVar(&f.model, "model", "", "the model's name (replaces model.name, as if written there: fingerprints and carry alike)")
	fl.StringVar(&f.modelBaseURL, "model-base-url", "", "the upstream's base URL (replaces model.base_url)")
	fl.StringVar(&f.upstream, "upstream", "", "the upstream: "+strings.Join(gateway.Upstreams(), ", ")+" (replaces model.upstream)")
	fl.StringArrayVarP(&f.modelSettings, "model-setting", "M", nil, "a model setting key=value, the value read as YAML (-M temperature=0.2; repeatable; set over model.settings)")
	fl.Var(rawFlag{&f.rawWorkers, "int"}, "max-workers", "worker processes to pack tasks into")
	fl.Var(rawFlag{&f.rawTasks, "int"}, "max-tasks", "tasks running at once (default all)")
	fl.StringVar(&f.samplesRamp, "samples-ramp", "", `sample ramp range "40,300", or "false"`)
	fl.Var(rawFlag{&f.rawTendInterval, "duration"}, "tend-interval", "ramp control window")
	fl.StringVar(&f.reportDir, "report-dir", "", "also write "+report.FormatFiles()+" here")
	fl.BoolVar(&f.jsonOut, "json", false, "print the JSON report on stdout instead of the table")
	fl.StringVar(&f.events, "events", "", "write the launch's events (attempts, tend decisions, live state, end) here as JSON Lines as they happen; a file or a FIFO with a reader")
	fl.BoolVar(&f.writeDaemonJSON, "write-daemon-json", false, "accept the address-pool fix (write daemon.json, with a backup) without asking")
	f.grace = 30 * time.Second
	fl.Var(rawFlag{&f.rawGrace, "duration"}, "grace", "after the first signal, how long running attempts may finish (default 30s)")
	return cmd
}

func launch(ctx context.Context, env Env, path string, f launchFlags, changed func(string) bool) (_ *report.Report, _ bool, err error) {
	var ov evalset.FleetOverrides
	// Every flag and environment problem is reported together with the
	// eval set's and _steward.yaml's (one per line, exit 2).
	var probs []evalset.Error
	bad := func(file, field, format string, args ...any) {
		probs = append(probs, evalset.Error{File: file, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	whole := func(name, raw string, n *int) bool {
		if raw == "" {
			return true
		}
		v, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			bad("flag", "--"+name, "invalid argument %q: want a whole number", raw)
			return false
		}
		*n = v
		return true
	}
	if changed("max-concurrency") && whole("max-concurrency", f.rawConcurrency, &f.concurrency) && f.concurrency < 1 {
		bad("flag", "--max-concurrency", "must be at least 1, got %d", f.concurrency)
	}
	if f.rawBudget != "" {
		v, err := strconv.ParseFloat(strings.TrimSpace(f.rawBudget), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			bad("flag", "--budget", "invalid argument %q: want an amount in USD, e.g. 2.50", f.rawBudget)
		} else {
			f.budget = v
		}
	}
	if f.budget < 0 {
		bad("flag", "--budget", "must not be negative, got %g", f.budget)
	}
	if changed("max-workers") && whole("max-workers", f.rawWorkers, &f.maxWorkers) {
		ov.MaxWorkers = &f.maxWorkers
	}
	if changed("max-tasks") && whole("max-tasks", f.rawTasks, &f.maxTasks) {
		ov.MaxTasks = &f.maxTasks
	}
	if changed("samples-ramp") {
		ov.SamplesRamp = &f.samplesRamp
	}
	duration := func(name, raw string, d *time.Duration) bool {
		if raw == "" {
			return true
		}
		v, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			bad("flag", "--"+name, "invalid argument %q: want a duration, e.g. 30s or 2m", raw)
			return false
		}
		*d = v
		return true
	}
	if changed("tend-interval") && duration("tend-interval", f.rawTendInterval, &f.tendInterval) {
		ov.TendInterval = &f.tendInterval
	}
	if duration("grace", f.rawGrace, &f.grace) && f.grace < 0 {
		bad("flag", "--grace", "must not be negative, got %s", f.grace)
	}
	if changed("record") {
		ov.Record = &f.record
	}
	for name, v := range f.providerFlags {
		if changed(name) {
			if ov.ProviderFlags == nil {
				ov.ProviderFlags = map[string]string{}
			}
			ov.ProviderFlags[name] = *v
		}
	}
	if changed("model") {
		ov.Model = &f.model
	}
	if changed("agent") {
		ov.Agent = &f.agent
	}
	if changed("model-base-url") {
		ov.ModelBaseURL = &f.modelBaseURL
	}
	if changed("upstream") {
		ov.Upstream = &f.upstream
	}
	ov.ModelSettings = f.modelSettings
	var workerTimeout time.Duration
	if v := env.Getenv("STEWARD_WORKER_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			bad("env", "STEWARD_WORKER_TIMEOUT", "%q: want a duration of at least 1s, e.g. 20s", v)
		}
		workerTimeout = d
	}
	es, err := evalset.Load(path, evalset.LoadOptions{Getenv: env.Getenv, Flags: ov})
	if len(probs) > 0 {
		var verrs *evalset.Errors
		switch {
		case err == nil:
			return nil, false, &evalset.Errors{List: probs}
		case errors.As(err, &verrs):
			verrs.List = append(verrs.List, probs...)
			return nil, false, verrs
		}
	}
	if err != nil {
		return nil, false, err
	}
	opts := run.Options{
		EvalSet: es, TaskGlobs: f.tasks, SampleGlobs: f.samples, Concurrency: f.concurrency, BudgetUSD: f.budget,
		Rerun: f.rerun, EarlyExit: f.earlyExit, Dry: f.dry, DryJSON: f.dry && f.jsonOut, Shard: f.shard, Title: f.title,
		ConfirmAttempts: f.confirm, ConfirmSamples: f.confirmSamples,
		Stdout: env.Stdout, Stderr: env.Stderr, TTY: env.StderrTTY, Color: env.StderrTTY && env.Getenv("NO_COLOR") == "",
		Getenv: env.Getenv, Exe: env.Exe, Providers: sandbox.Factory{Getenv: env.Getenv}, Grace: f.grace, Hard: env.Hard,
		WriteDaemonJSON: f.writeDaemonJSON, FleetFlags: ov, Confirm: confirmer(env), Workers: env.Exe != "",
		WorkerTimeout: workerTimeout,
	}
	var res *run.Result
	if f.events != "" && !f.dry {
		w, oerr := openEvents(f.events)
		if oerr != nil {
			return nil, false, exitWith(ExitBadInput, oerr)
		}
		events := eventlog.New(w)
		opts.Observe = events.Observe
		// "end" goes last, once the reports are written (or the launch
		// failed); a stalled reader then gets 10 s, or until the second
		// signal, and never holds up the reports.
		defer func() {
			var rep *report.Report
			var cancelled bool
			if res != nil {
				rep, cancelled = res.Report, res.Cancelled
			}
			events.End(rep, cancelled, err)
			cctx, cancel := context.WithTimeout(env.Hard, 10*time.Second)
			defer cancel()
			if cerr := events.Close(cctx); cerr != nil {
				fmt.Fprintf(env.Stderr, "steward: --events %s: %v\n", f.events, cerr)
			}
			w.Close()
		}()
	}
	res, err = run.Launch(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	if f.dry {
		return res.Report, false, nil
	}
	rep := res.Report
	if rep != nil && res.Forecast != nil && res.Forecast.Runs > 0 {
		rep.Forecast = res.Forecast
	}
	if d := es.Decide; d != nil && rep != nil {
		rep.Decide = &report.DecideSettings{Rounds: d.Rounds, PerRound: d.PerRound, Attempts: d.Attempts, USD: d.USD, Time: time.Duration(d.Time)}
	}
	if f.jsonOut {
		if err := report.JSON(env.Stdout, rep); err != nil {
			return nil, false, err
		}
	} else if err := report.Terminal(env.Stdout, rep, report.TerminalOptions{Color: opts.Color, NoPlan: true}); err != nil {
		return nil, false, err
	}
	if f.reportDir != "" {
		if err := report.WriteFiles(f.reportDir, rep); err != nil {
			return nil, false, err
		}
	}
	return rep, res.Cancelled, nil
}

// openEvents opens --events' file for writing, truncated. It refuses a
// file that holds anything but events (a forgotten FILE argument would
// otherwise wipe the eval set, or the record), and a FIFO with no reader:
// the launch does not wait for one.
func openEvents(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		b := make([]byte, len(`{"event":`))
		r, err := os.Open(path)
		if err == nil {
			_, err = io.ReadFull(r, b)
			r.Close()
		}
		if err != nil || string(b) != `{"event":` {
			return nil, fmt.Errorf("--events %s: the file exists and is not an events file; it would be overwritten (choose another path, or remove it)", path)
		}
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ENXIO) {
		if fi, serr := os.Stat(path); serr == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			return nil, fmt.Errorf("--events %s: a FIFO with no reader (start the reader first)", path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--events: %w", err)
	}
	return w, nil
}

// confirmer asks on a terminal; declining is the default, and without a
// terminal nothing is asked.
func confirmer(env Env) func(string) bool {
	return func(q string) bool {
		if !env.StdinTTY || env.Stdin == nil {
			fmt.Fprintf(env.Stderr, "%s [y/N] no (not a terminal; pass --write-daemon-json to accept)\n", q)
			return false
		}
		fmt.Fprintf(env.Stderr, "%s [y/N] ", q)
		line, _ := bufio.NewReader(env.Stdin).ReadString('\n')
		line = strings.ToLower(strings.TrimSpace(line))
		return line == "y" || line == "yes"
	}
}
