// Package run is the supervisor: it walks a plan with the scheduler, the
// sandbox providers, the model gateway, the ramp and the record, and returns
// the report built from the record.
package run

import (
	"context"
	"errors"
	"fmt"
	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/runlock"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/shard"
	"github.com/steward-evals/steward/internal/status"
	"golang.org/x/sync/errgroup"
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
	Live *LiveState
	// Tend is one tend's ramp decisions, as the ramp history keeps them.
	Tend *Tended
}

// Tended is one tend's decisions (a point per task) in run RunID.
type Tended struct {
	RunID  string
	Points []record.RampPoint
}

// publish writes one attempt's row to the record (S6) and tells Observe.
func (l *launcher) publish(ctx context.Context, row record.Attempt) error {
	l.scrubRow(&row) // whatever produced the row: an attempt, a host hook, a worker's end
	if err := l.db.Publish(ctx, row); err != nil {
		return err
	}
	l.observe(Event{Attempt: &row})
	return nil
}

func (l *launcher) observe(e Event) {
	if l.opts.Observe != nil {
		l.opts.Observe(e)
	}
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

// launcher is one launch. Its state is grouped by what guards it.
type launcher struct {
	// Set by the load, plan and carry stages (one goroutine) and read-only
	// once execute starts.
	opts      Options
	es        *evalset.EvalSet // es.Fleet.SamplesRamp is written by tendLoop only, which alone reads it afterwards
	p         *plan.Plan
	seqIndex  map[int]*plan.Attempt
	extras    []plan.Extra // --confirm's attempts (workers add them too)
	fc        forecast.Forecast
	db        *record.DB
	runID     string
	start     time.Time
	providers map[string]sandbox.Provider
	taskProv  []string // provider name per plan task
	exclusive []bool   // per plan task
	specs     []*sandbox.Spec
	// sampleSpecs are the specs of samples with environments of their own
	// (harbor.go), by sampleKey; Prepare fills their images.
	sampleSpecs map[string]*sandbox.Spec
	// sampleErrs: samples whose environment prepare could not make (harbor.go).
	sampleErrs map[string]attempt.SampleEnvError
	budget     int
	budgetSrc  string
	planLine   string

	// Set by the prepare and dispatch stages before the goroutines that
	// read them start; read-only afterwards. disp guards its own state.
	gw    *gateway.Gateway
	gwURL map[string]string // provider -> base URL sandboxes use
	// judgeURL is the gateway's loopback URL for the model judge ("" if no task has one).
	judgeURL string
	apiKey   string
	secrets  []string // values of the fleet's secrets: masked like the key
	items    []sched.Item
	seqOf    []int       // item id -> attempt seq
	itemOf   map[int]int // attempt seq -> item id
	disp     *sched.Dispatcher
	tasks    *taskTracker // closes a task's done channel when it finishes
	runner   runner

	// scrubber removes the key and the secrets from every string a process
	// Steward ran produced, before it is stored or printed (initSecrets).
	scrubber *secret.Scrubber

	// mu guards the run's tallies: written by attempts, task lifecycles
	// and the tend loop; read by the panel, tend and the finish stage.
	mu        sync.Mutex
	published map[int]status.Attempt // seq -> status, for counts
	errWin    []int                  // errored attempts this window, per task
	spentStop bool
	left      []string
	hold      string
	reused    int
	recordErr error
	stopSkips int // attempts a stop (signal) left not started
	full      diskFull

	// panelLast is the last panel line printed: the panel loop's alone
	// (panelFinal runs after the loop has stopped).
	panelLast string

	// gwMu guards the gateway's listeners, opened on demand (workers ask
	// for theirs from their reader goroutines).
	gwMu      sync.Mutex
	gwListen  map[string]string
	gwCtx     context.Context
	gwServing *errgroup.Group // every listener's Serve; waited for by prepared.close
}

// Launch runs (or with Dry, plans) the eval set.
func Launch(ctx context.Context, opts Options) (*Result, error) {
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	if opts.Grace == 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.Hard == nil {
		opts.Hard = context.Background()
	}
	if opts.PanelInterval == 0 {
		opts.PanelInterval = 10 * time.Second
	}
	l := &launcher{opts: opts, es: opts.EvalSet, start: time.Now(), published: map[int]status.Attempt{}}
	if !opts.Dry {
		l.runID = time.Now().UTC().Format("20060102-150405-") + record.NewID("")[:6]
	}
	flush := l.initSecrets()
	defer flush()
	res, err := l.launch(ctx)
	return res, l.scrubber.Error(err)
}

// launch walks the first stages, load → plan → carry; --dry stops after
// carry, a real launch goes on with execute's stages.
func (l *launcher) launch(ctx context.Context) (*Result, error) {
	printWarnings(l.opts.Stderr, l.es)
	if err := l.load(ctx); err != nil {
		return nil, err
	}
	if l.db != nil {
		defer l.db.Close()
	}
	if err := l.planStage(ctx); err != nil {
		return nil, err
	}
	if err := l.carry(ctx); err != nil {
		return nil, err
	}
	if l.opts.Dry {
		return &Result{Report: l.dryReport(), Forecast: &l.fc}, l.printDry()
	}
	if err := l.refuseUnsupportedEnvironments(); err != nil {
		return nil, err
	}
	res, err := l.execute(ctx)
	if res != nil {
		res.Forecast = &l.fc
	}
	return res, err
}

// load builds the plan (attempts in discovery order) and opens the record;
// --dry only reads it (and a missing record means no history).
func (l *launcher) load(ctx context.Context) error {
	es := l.es
	p, err := plan.Build(es, plan.Options{TaskGlobs: l.opts.TaskGlobs, SampleGlobs: l.opts.SampleGlobs})
	if err != nil {
		return badInput("%v", err)
	}
	if len(p.Attempts) == 0 {
		return badInput("the filters select no attempts (tasks %v, samples %v)", l.opts.TaskGlobs, l.opts.SampleGlobs)
	}
	l.p = p
	l.seqIndex = map[int]*plan.Attempt{}
	for _, a := range p.Attempts {
		l.seqIndex[a.Seq] = a
	}
	var db *record.DB
	if l.opts.Dry {
		db, err = record.OpenReadOnly(ctx, es.Fleet.Record)
		if errors.Is(err, record.ErrNoRecord) {
			db, err = nil, nil
		}
	} else {
		db, err = record.Open(ctx, es.Fleet.Record)
	}
	if err != nil {
		return err
	}
	l.db = db
	return nil
}

// planStage picks each task's provider and the budget, resolves images
// named by tag into the fingerprints and keeps this shard's attempts.
func (l *launcher) planStage(ctx context.Context) error {
	if err := l.chooseProviders(ctx); err != nil {
		return err
	}
	if err := l.resolveImages(ctx); err != nil {
		return err
	}
	if err := l.confirm(ctx); err != nil {
		return err
	}
	if l.opts.Shard != "" {
		return l.applyShard(ctx)
	}
	return nil
}

// carry asks the record for judged results with equal fingerprints and
// composes the PLAN line.
func (l *launcher) carry(ctx context.Context) error {
	var hist plan.History
	if l.db != nil {
		hist = l.db
	}
	if err := plan.Carry(ctx, l.p, hist, plan.CarryOptions{Rerun: l.opts.Rerun, EarlyExit: l.opts.EarlyExit}); err != nil {
		return record.Classify(l.es.Fleet.Record, err)
	}
	l.planLine = l.makePlanLine()
	l.fc = l.makeForecast(ctx)
	if s := l.fc.PlanPart(); s != "" {
		l.planLine += " · " + s
	}
	return nil
}

// applyShard keeps this shard's attempts: a sample's attempts stay together,
// group lanes and tasks sharing a lease key never split.
func (l *launcher) applyShard(ctx context.Context) error {
	i, n, err := shard.Parse(l.opts.Shard)
	if err != nil {
		return badInput("--shard: %v", err)
	}
	keepSeq := selectShard(l.p, i, n, l.durationHistory(ctx))
	// Seq stays the attempt's index in the whole eval set's discovery order,
	// so merged shard records sort back into one run's order (C8).
	var kept []*plan.Attempt
	for _, a := range l.p.Attempts {
		if keepSeq[a.Seq] {
			kept = append(kept, a)
		}
	}
	l.p.Attempts = kept
	for _, t := range l.p.Tasks {
		var order []int
		for _, seq := range t.Order {
			if keepSeq[seq] {
				order = append(order, seq)
			}
		}
		t.Order = order
	}
	return nil
}

// bySeq finds an attempt by its discovery seq (positions differ from seqs in a shard).
func (l *launcher) bySeq(seq int) *plan.Attempt { return l.seqIndex[seq] }

// durationHistory maps "task/sample#n" to the seconds its newest run took
// (carried rows and rows without a duration do not count), over a few newest runs.
func (l *launcher) durationHistory(ctx context.Context) map[string]float64 {
	if l.db == nil {
		return nil
	}
	runs, err := l.db.Runs(ctx)
	if err != nil {
		return nil
	}
	hist := map[string]float64{}
	for i, r := range runs {
		if i >= 5 {
			break
		}
		as, err := l.db.Attempts(ctx, r.ID)
		if err != nil {
			continue
		}
		for _, a := range as {
			k := fmt.Sprintf("%s/%s#%d", a.Task, a.Sample, a.Attempt)
			if _, seen := hist[k]; seen || a.CarriedFrom != "" || a.Duration <= 0 {
				continue
			}
			hist[k] = a.Duration.Seconds()
		}
	}
	return hist
}

// chooseProviders picks each task's provider and computes the budget (C2, C3).
func (l *launcher) chooseProviders(ctx context.Context) error {
	l.providers = map[string]sandbox.Provider{}
	l.taskProv = make([]string, len(l.p.Tasks))
	l.exclusive = make([]bool, len(l.p.Tasks))
	available := availability(ctx, l.opts.Providers)
	for i, t := range l.p.Tasks {
		name, err := sandbox.Choose(t.Task.Sandbox.Provider, needsImage(t.Task), available)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Task.Name, err)
		}
		l.taskProv[i] = name
		l.exclusive[i] = sandbox.IsExclusive(name) && (t.Task.Exclusive == nil || *t.Task.Exclusive)
		l.specs = append(l.specs, specFor(t.Task, l.runID))
	}
	l.sampleSpecs = sampleSpecs(l.p, l.runID)
	caps := map[string]sandbox.Capacity{}
	for i, name := range l.taskProv {
		if _, ok := l.providers[name]; !ok {
			if l.opts.Providers == nil {
				return fmt.Errorf("no sandbox provider factory")
			}
			prov, err := l.opts.Providers.Provider(ctx, name, RunInfo{RunID: l.runID, LockPath: l.lockPath(), Stderr: l.opts.Stderr, Settings: l.es.Fleet.ProviderSettings(), Liveness: runlock.Liveness{}})
			if err != nil {
				return fmt.Errorf("sandbox provider %s (task %s): %w", name, l.p.Tasks[i].Task.Name, err)
			}
			l.providers[name] = prov
		}
	}
	for name, prov := range l.providers {
		var specs []sandbox.Spec
		for i, n := range l.taskProv {
			if n == name {
				specs = append(specs, *l.specs[i])
			}
		}
		for _, k := range sortedSpecKeys(l.sampleSpecs) {
			if i, _ := taskOfKey(k); l.taskProv[i] == name {
				specs = append(specs, *l.sampleSpecs[k])
			}
		}
		c, err := prov.Capacity(ctx, specs)
		if err != nil {
			return fmt.Errorf("size the %s provider: %w", name, err)
		}
		caps[name] = c
	}
	l.budgetFromConfig(caps)
	return nil
}

func (l *launcher) lockPath() string {
	if l.runID == "" {
		return ""
	}
	p, err := filepath.Abs(filepath.Join(l.es.Fleet.Record, "runs", l.runID+".lock"))
	if err != nil {
		return filepath.Join(l.es.Fleet.Record, "runs", l.runID+".lock")
	}
	return p
}

// budgetFromConfig sets the budget and its source (budgetFor).
func (l *launcher) budgetFromConfig(caps map[string]sandbox.Capacity) {
	allExclusive := true
	for i := range l.p.Tasks {
		if !l.exclusive[i] {
			allExclusive = false
		}
	}
	l.budget, l.budgetSrc = budgetFor(l.opts.Concurrency, l.es.Fleet.MaxSandboxes, caps, allExclusive)
}

func (l *launcher) makePlanLine() string {
	samples := map[string]bool{}
	run, carry := 0, 0
	for _, a := range l.p.Attempts {
		samples[l.p.Tasks[a.Task].Task.Name+"\x00"+a.Sample.ID] = true
		if a.Action == plan.ActionRun {
			run++
		} else {
			carry++ // carried, or skipped because the sample's pass is carried
		}
	}
	parts := []string{
		fmt.Sprintf("%d attempts", len(l.p.Attempts)),
		fmt.Sprintf("%d samples × %d tasks", len(samples), len(l.p.Tasks)),
	}
	if carry > 0 {
		parts = append(parts, fmt.Sprintf("%d carried", carry))
	}
	if len(l.extras) > 0 {
		parts = append(parts, fmt.Sprintf("%d confirming", len(l.extras)))
	}
	if l.budgetSrc == "" {
		// Dry runs and launches before providers report: say what is known.
		l.budgetFromConfig(nil)
	}
	if l.budget > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d (%s)", l.budget, l.budgetSrc))
	} else {
		parts = append(parts, fmt.Sprintf("concurrency unbounded (%s)", l.budgetSrc))
	}
	for i, t := range l.p.Tasks {
		switch {
		case t.Task.MaxSamples > 0:
			parts = append(parts, fmt.Sprintf("%s ≤%d", t.Task.Name, t.Task.MaxSamples))
		case l.exclusive[i]:
			parts = append(parts, fmt.Sprintf("%s ≤1 (%s exclusive)", t.Task.Name, l.taskProv[i]))
		}
	}
	if sp := l.startSetpoints(); sp != nil {
		if s := setpointsPart(l.p, sp); s != "" {
			parts = append(parts, s)
		}
	}
	if l.opts.Shard != "" {
		parts = append(parts, "shard "+l.opts.Shard)
	}
	return strings.Join(parts, " · ")
}

// setpointsPart names the starting setpoints of the tasks with work, e.g.
// "setpoints slow 1, fast 2", or by value for many tasks: "setpoints 2 ×9, 1 ×1".
func setpointsPart(p *plan.Plan, sp []int) string {
	work := make([]bool, len(p.Tasks))
	for _, a := range p.Attempts {
		if a.Action == plan.ActionRun {
			work[a.Task] = true
		}
	}
	var named []string
	var vals []int
	count := map[int]int{}
	for i, t := range p.Tasks {
		if !work[i] {
			continue
		}
		named = append(named, fmt.Sprintf("%s %d", t.Task.Name, sp[i]))
		if count[sp[i]] == 0 {
			vals = append(vals, sp[i])
		}
		count[sp[i]]++
	}
	switch {
	case len(named) == 0:
		return ""
	case len(named) <= 4:
		return "setpoints " + strings.Join(named, ", ")
	}
	var byVal []string
	for _, v := range vals {
		byVal = append(byVal, fmt.Sprintf("%d ×%d", v, count[v]))
	}
	return "setpoints " + strings.Join(byVal, ", ")
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("listen for the model gateway on %s: %w", addr, err))
	}
	return ln, nil
}

// specFor is a task's sandbox spec.
func specFor(t *evalset.Task, runID string) *sandbox.Spec {
	sb := t.Sandbox
	spec := &sandbox.Spec{
		RunID: runID, Task: t.Name, Image: sb.Image, Build: sb.Build, BuildNetwork: sb.BuildNetwork, Disk: int64(sb.Disk), CPUs: sb.CPUs, Memory: int64(sb.Memory),
		PIDs: sb.PIDs, Network: sb.Network, CapAdd: sb.CapAdd, Workdir: sb.Workdir, Env: map[string]string{},
	}
	for k, v := range t.Env {
		spec.Env[k] = v
	}
	return spec
}

// imageResolver is implemented by providers that can say which image a
// reference (a tag) names now.
type imageResolver interface {
	ImageID(ctx context.Context, ref string) (string, error)
}

// resolveImages puts the IDs of the images that tasks name by reference into
// their fingerprints (a retagged image must not carry stale results). An
// image the provider does not have keeps its reference: preparing the run
// says it is missing.
func (l *launcher) resolveImages(ctx context.Context) error {
	ids := map[string]string{}
	type named struct {
		task int
		ref  string
	}
	var refs []named
	for i, t := range l.p.Tasks {
		if t.Task.Sandbox.Image != "" && t.Task.Sandbox.Build == "" {
			refs = append(refs, named{i, t.Task.Sandbox.Image})
		}
	}
	// A sample's own image (a Harbor task's docker_image) is resolved too.
	for _, k := range sortedSpecKeys(l.sampleSpecs) {
		if sp := l.sampleSpecs[k]; sp.Image != "" && sp.Build == "" {
			i, _ := taskOfKey(k)
			refs = append(refs, named{i, sp.Image})
		}
	}
	for _, n := range refs {
		i, t, ref := n.task, l.p.Tasks[n.task], n.ref
		if _, done := ids[ref]; done {
			continue
		}
		res, ok := l.providers[l.taskProv[i]].(imageResolver)
		if !ok {
			continue
		}
		id, err := res.ImageID(ctx, ref)
		if err != nil {
			return fmt.Errorf("resolve image %s of task %s: %w", ref, t.Task.Name, err)
		}
		ids[ref] = id
	}
	l.p.SetImageIDs(ids)
	return nil
}
