// Package run is the supervisor: a launch is a walk of stages, load →
// choose → carry → begin → prepare → dispatch → finish, each a function that
// returns a value set once by that stage and read (never written) by the
// ones after it (docs/architecture.md, "How a launch runs"). Only dispatch
// keeps mutable state, its tallies, behind their own lock. Attempts run
// through internal/attempt, in this process or in worker processes
// (internal/worker); the report is built from the record.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/tend"
)

// Options configure one launch. The CLI fills them from flags.
type Options struct {
	EvalSet *evalset.EvalSet
	// Filters (globs).
	TaskGlobs, SampleGlobs []string
	// Concurrency is --max-concurrency (0 = unset).
	Concurrency int
	BudgetUSD   float64
	Rerun       bool
	EarlyExit   bool
	Dry         bool
	// DryJSON prints the dry run as JSON (the PLAN line, the forecast and
	// every attempt's action) instead of tables (launch --dry --json).
	DryJSON bool
	Shard   string // "i/n" or ""
	Title   string

	Stdout, Stderr io.Writer
	// TTY: redraw the panel in place; otherwise plain periodic lines.
	TTY   bool
	Color bool
	// Getenv reads the real API key (model.api_key_env) and STEWARD_* settings.
	Getenv func(string) string
	// Exe is the steward binary (STEWARD_BIN for local sandboxes, copied into docker ones).
	Exe string
	// Providers makes sandbox providers by name.
	Providers ProviderFactory
	// Grace is how long running attempts may finish after a soft cancel (default 30s).
	Grace time.Duration
	// Hard, when done, aborts running attempts at once (the second signal).
	Hard context.Context
	// PanelInterval between plain panel lines (default 10s; CI logs).
	PanelInterval time.Duration
	// Confirm asks the user a yes/no question (nil = decline: the default answer).
	Confirm func(question string) bool
	// WriteDaemonJSON accepts the address-pool fix without asking.
	WriteDaemonJSON bool
	// Workers runs each task in its own worker process (W1): `Exe __worker`
	// (internal/worker).
	Workers bool
	// WorkerTimeout is how long a worker may leave the heartbeat unanswered
	// before it is killed (0 = worker.DefaultTimeout).
	WorkerTimeout time.Duration
	// FleetFlags are the fleet settings given as flags; they keep winning
	// when the live run re-reads _steward.yaml.
	FleetFlags evalset.FleetOverrides
	// ConfirmAttempts is --confirm: this many more attempts of every
	// selected sample, numbered after the highest attempt number the
	// record holds at the sample's identity (plan.Confirm); ConfirmSamples
	// ("task/sample", --confirm-samples) selects the samples, none = every
	// sample of the plan.
	ConfirmAttempts int
	ConfirmSamples  []string
	// Observe, when set, is told of each thing the launch writes to the
	// record as it writes it (an attempt's row, the live state), so a
	// caller waits for these instead of polling the record. It runs on
	// the launch's goroutines and must not block.
	Observe func(Event)
}

// Event is one thing a launch has just written to the record: exactly one
// field is set.
type Event struct {
	// Attempt is an attempt's published row.
	Attempt *record.Attempt
	// Live is the live state `steward tend` reads (Tended: after a tend).
	Live *tend.LiveState
	// Tend is one tend's ramp decisions, as the ramp history keeps them.
	Tend *Tended
}

// Tended is one tend's decisions (a point per task) in run RunID.
type Tended struct {
	RunID  string
	Points []record.RampPoint
}

// ProviderFactory makes the sandbox provider for a name, or says whether it
// answers here (Registry: the registered providers).
type ProviderFactory interface {
	Provider(ctx context.Context, name string, run RunInfo) (sandbox.Provider, error)
	Available(ctx context.Context, name string) bool
}

// RunInfo is what a provider needs to label what it creates (D4).
type RunInfo = sandbox.RunInfo

// ErrBadInput marks errors caused by the user's input (exit code 2).
var ErrBadInput = sandbox.ErrBadInput // one sentinel: providers refuse configuration with it too

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// Result of a launch.
type Result struct {
	Report    *report.Report
	Cancelled bool
	// Forecast is what the launch predicted before it ran (launch --dry
	// prints it; the PLAN line holds it when the record had history).
	Forecast *forecast.Forecast
}

// launch is what Launch was given and made before the first stage: read
// by every stage, written by none.
type launch struct {
	opts  Options // defaults filled in; Stderr scrubbed (initSecrets)
	es    *evalset.EvalSet
	runID string // "" for --dry
	start time.Time
	// secrets are the values of the fleet's secrets (masked like the key);
	// scrubber removes them and the key from every string a process
	// Steward ran produced, before it is stored or printed.
	secrets  []string
	scrubber *secret.Scrubber
}

// Launch runs (or with Dry, plans) the eval set.
func Launch(ctx context.Context, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	l := &launch{opts: opts, es: opts.EvalSet, start: time.Now()}
	if !opts.Dry {
		l.runID = time.Now().UTC().Format("20060102-150405-") + record.NewID("")[:6]
	}
	flush := l.initSecrets()
	defer flush()
	res, err := l.walk(ctx)
	return res, l.scrubber.Error(err)
}

// withDefaults is o with its unset fields' defaults.
func (o Options) withDefaults() Options {
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Grace == 0 {
		o.Grace = 30 * time.Second
	}
	if o.Hard == nil {
		o.Hard = context.Background()
	}
	if o.PanelInterval == 0 {
		o.PanelInterval = 10 * time.Second
	}
	return o
}

// walk runs the stages: load → choose → carry; --dry stops there, a real
// launch goes on with execute's.
func (l *launch) walk(ctx context.Context) (*Result, error) {
	printWarnings(l.opts.Stderr, l.es)
	ld, err := load(ctx, l)
	if err != nil {
		return nil, err
	}
	if ld.db != nil {
		defer ld.db.Close()
	}
	ch, err := choose(ctx, ld)
	if err != nil {
		return nil, err
	}
	cr, err := carry(ctx, ch)
	if err != nil {
		return nil, err
	}
	if l.opts.Dry {
		return &Result{Report: cr.dryReport(), Forecast: &cr.fc}, cr.printDry()
	}
	if err := ch.refuseUnsupportedEnvironments(); err != nil {
		return nil, err
	}
	res, err := execute(ctx, cr)
	if res != nil {
		res.Forecast = &cr.fc
	}
	return res, err
}

// execute walks the stages that run: begin → prepare → dispatch → finish.
// The session begin returns ends the run in the record however the walk
// ends (crashed or aborted unless finish recorded it).
func execute(ctx context.Context, cr *carried) (_ *Result, err error) {
	b, err := begin(ctx, cr)
	if err != nil {
		return nil, err
	}
	var d *dispatch
	var res *Result
	finished := false
	defer func() { b.end(err, finished, d) }()
	pr, err := prepare(ctx, b)
	defer pr.close()
	if err != nil {
		return nil, err
	}
	d, err = dispatchStage(ctx, pr)
	if errors.Is(err, record.ErrDiskFull) {
		finished = true
		return nil, d.finishOnRecordError()
	}
	if err != nil {
		return nil, err
	}
	res, finished, err = finish(ctx, d)
	return res, err
}

// lockPath is the run's lock file (runlock), beside the record.
func (l *launch) lockPath() string {
	if l.runID == "" {
		return ""
	}
	p, err := filepath.Abs(filepath.Join(l.es.Fleet.Record, "runs", l.runID+".lock"))
	if err != nil {
		return filepath.Join(l.es.Fleet.Record, "runs", l.runID+".lock")
	}
	return p
}

func (l *launch) observe(e Event) {
	if l.opts.Observe != nil {
		l.opts.Observe(e)
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// printWarnings says what the eval set asks for that Steward ignores.
func printWarnings(w io.Writer, es *evalset.EvalSet) {
	for _, warn := range es.Warnings {
		fmt.Fprintf(w, "steward: warning: %s\n", warn.Error())
	}
}
