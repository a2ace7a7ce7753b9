package run

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/worker"
	"golang.org/x/sync/errgroup"
)

// A launch is an ordered list of stages, each taking what the one before
// produced: load → plan → carry (launch, run.go), then preflight → prepare →
// dispatch → drain → finish (execute, here). Every goroutine a stage starts
// belongs to an errgroup that a later stage waits for.
func (l *launcher) execute(ctx context.Context) (_ *Result, err error) {
	sess, err := l.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { sess.end(err) }()
	needed := l.neededSpecs()
	if err := l.preflightAll(ctx, needed); err != nil {
		return nil, err
	}
	prep, err := l.prepare(ctx, needed)
	defer prep.close()
	if err != nil {
		if errors.Is(err, record.ErrDiskFull) {
			return nil, sess.stopOnRecordError()
		}
		return nil, err
	}
	d, err := l.dispatch(ctx)
	if err != nil {
		return nil, err
	}
	l.drain(d)
	return l.finish(ctx, sess)
}

// session is a run that has started: it holds the run lock and the
// record's reserve, and its row says it runs. end gives them back and,
// unless finished, marks the run crashed.
type session struct {
	l        *launcher
	lock     interface{ Release() error }
	finished bool
}

// begin (the first part of the preflight stage) takes the run lock and the
// record's reserve, records the run and its plan, and prints the PLAN line.
func (l *launcher) begin(ctx context.Context) (*session, error) {
	lock, err := runlock.Acquire(l.lockPath())
	if err != nil {
		return nil, fmt.Errorf("take the run lock: %w", err)
	}
	s := &session{l: l, lock: lock, finished: true}
	fail := func(err error) (*session, error) {
		s.end(nil)
		return nil, err
	}
	if err := l.reserveRoom(); err != nil {
		return fail(err)
	}
	if err := l.db.StartRun(ctx, record.Run{ID: l.runID, EvalSet: l.es.File, Title: l.opts.Title, Plan: l.planLine, Shard: l.opts.Shard,
		Started: l.start, PID: os.Getpid(), Host: hostname(), LockPath: l.lockPath(), BudgetUSD: l.opts.BudgetUSD}); err != nil {
		return fail(record.Classify(l.db.Dir, err))
	}
	if err := l.recordStart(ctx); err != nil {
		return fail(err)
	}
	s.finished = false
	fmt.Fprintln(l.opts.Stderr, report.PlanLine(l.planLine))
	return s, nil
}

// end marks an unfinished run aborted when the launch stopped on an error it
// reported (err: a missing image, a refused preflight), else crashed; gives
// back the reserve, releases the lock and then sweeps: once this run's lock
// is released it counts as dead, so a last sweep removes whatever a crashed
// worker of this run left (D4).
func (s *session) end(err error) {
	l := s.l
	if !s.finished {
		st, left := status.Crashed, l.leftNow()
		if err != nil {
			st = status.Aborted
			left = append(left, "the launch stopped: "+l.scrub(err.Error()))
		}
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = l.db.FinishRun(fctx, l.runID, st, time.Now(), left)
		cancel()
	}
	l.releaseRoom()
	_ = s.lock.Release()
	for _, prov := range l.providers {
		if sw, ok := prov.(sandbox.AfterRunSweeper); ok {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			sw.SweepAfterRun(sctx)
			cancel()
		}
	}
}

// stopOnRecordError ends a run whose record could not take results.
func (s *session) stopOnRecordError() error {
	s.finished = true
	return s.l.finishOnRecordError()
}

// neededSpecs are the sandbox specs of the tasks with work, by provider.
func (l *launcher) neededSpecs() map[string][]*sandbox.Spec {
	needed := map[string][]*sandbox.Spec{}
	for i, name := range l.taskProv {
		if l.taskNeedsOwnSpec(i) {
			l.specs[i].RunID = l.runID
			needed[name] = append(needed[name], l.specs[i])
		}
	}
	// Each sample with an environment of its own and work to do: its image
	// built (once per content hash) or checked with the rest.
	run := map[string]bool{}
	for _, a := range l.p.Attempts {
		if a.Action == plan.ActionRun && a.Sample.OwnEnvironment() {
			run[attempt.SampleKey(a.Task, a.Sample.ID)] = true
		}
	}
	for _, k := range sortedSpecKeys(l.sampleSpecs) {
		if run[k] {
			i, _ := taskOfKey(k)
			l.sampleSpecs[k].RunID = l.runID
			needed[l.taskProv[i]] = append(needed[l.taskProv[i]], l.sampleSpecs[k])
		}
	}
	return needed
}

// preflightAll checks the machine for every provider with work before any
// sandbox is prepared (docker: address pools, D1).
func (l *launcher) preflightAll(ctx context.Context, needed map[string][]*sandbox.Spec) error {
	for name, specs := range needed {
		if err := l.preflight(ctx, name, l.providers[name], specs); err != nil {
			return err
		}
	}
	return nil
}

// prepared is what the prepare stage made: providers to finalize and the
// gateway's listeners to stop.
type prepared struct {
	cleanup cleanups
	stopGW  context.CancelFunc
	serving *errgroup.Group // the gateway's listeners (gatewayFor)
}

// close stops the gateway, waits for its listeners, then finalizes the
// providers in reverse order.
func (p *prepared) close() {
	if p.stopGW != nil {
		p.stopGW()
		_ = p.serving.Wait()
	}
	p.cleanup.run()
}

// prepare builds images and networks once per run (worker processes adopt
// them, W1), starts the gateway where each provider's sandboxes reach it and
// publishes the carried results. A full record disk is record.ErrDiskFull.
func (l *launcher) prepare(ctx context.Context, needed map[string][]*sandbox.Spec) (*prepared, error) {
	p := &prepared{serving: &errgroup.Group{}}
	keyOf := map[*sandbox.Spec]string{}
	for k, sp := range l.sampleSpecs {
		keyOf[sp] = k
	}
	l.sampleErrs = map[string]attempt.SampleEnvError{}
	for name, specs := range needed {
		prov := l.providers[name]
		// The tasks' own specs (and the run's networks) first: a failure is
		// the run's; then each sample's own, whose failure is its own.
		var own []*sandbox.Spec
		var samples []string
		for _, sp := range specs {
			if k, ok := keyOf[sp]; ok {
				samples = append(samples, k)
			} else {
				own = append(own, sp)
			}
		}
		if err := prov.Prepare(ctx, own); err != nil {
			return p, fmt.Errorf("prepare %s sandboxes: %w", name, err)
		}
		p.cleanup.add(func() {
			fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := prov.Finalize(fctx); err != nil {
				fmt.Fprintf(l.opts.Stderr, "steward: finalize %s provider: %v\n", prov.Name(), err)
			}
		})
		if err := prepareSampleSpecs(ctx, prov, samples, l.sampleSpecs, l.sampleErrs, l.opts.Stderr); err != nil {
			return p, fmt.Errorf("prepare %s sandboxes: %w", name, err)
		}
	}
	gwCtx, stopGW := context.WithCancel(context.Background())
	p.stopGW = stopGW
	if err := l.startGateway(gwCtx, p.serving, needed); err != nil {
		return p, err
	}
	if err := l.publishCarried(ctx); err != nil {
		err = record.Classify(l.db.Dir, err)
		if errors.Is(err, record.ErrDiskFull) {
			l.recordFull(err)
		}
		return p, err
	}
	return p, nil
}

// dispatched is what the dispatch stage started and the drain stage waits for.
type dispatched struct {
	workers *worker.Pool
	// work tracks every task lifecycle and every admitted attempt.
	work errgroup.Group
	// loops tracks the tend and panel loops and the stop watchers; they
	// return once stop closes.
	loops errgroup.Group
	stop  chan struct{}
	abort context.CancelFunc
}

// dispatch builds the scheduler and the ramp, starts the runner (workers or
// in-process), one lifecycle per task, the loops and the stop watcher, and
// admits attempts until none is left or the run is aborted.
func (l *launcher) dispatch(ctx context.Context) (*dispatched, error) {
	st, err := l.newState()
	if err != nil {
		return nil, err
	}
	ctl, err := l.newRamp()
	if err != nil {
		return nil, err
	}
	for i, sp := range ctl.Setpoints() {
		st.SetCap(i, sp)
	}
	// Set before any goroutine starts; read-only afterwards.
	l.disp = sched.NewDispatcher(st)
	l.errWin = make([]int, len(l.p.Tasks))
	l.tasks = newTaskTracker(l.disp, len(l.p.Tasks))
	// Attempts run under actx: a soft cancel lets them finish within the
	// grace period; the second signal (Hard) or the end of grace aborts them.
	actx, abort := context.WithCancel(context.Background())
	d := &dispatched{stop: make(chan struct{}), abort: abort}
	if d.workers, err = l.startRunner(ctx); err != nil {
		abort()
		return nil, err
	}
	if ctx.Err() != nil {
		// Stopped while preparing: nothing starts (the watcher, below, may
		// run only after the first task is ready).
		l.cancelQueued("cancelled before it started")
	}
	d.loops.Go(func() error { l.watchStop(ctx, actx, abort, d.stop); return nil })
	if w := d.workers; w != nil {
		d.loops.Go(func() error {
			select {
			case <-actx.Done():
				w.Abort()
			case <-d.stop:
			}
			return nil
		})
	}
	l.startTasks(ctx, actx, &d.work)
	d.loops.Go(func() error { l.tendLoop(actx, ctl, d.stop); return nil })
	d.loops.Go(func() error { l.panelLoop(d.stop); return nil })
	err = l.disp.Run(actx, func(it sched.Item) {
		d.work.Go(func() error { l.runItem(actx, it); return nil })
	})
	if err != nil && actx.Err() != nil {
		// Aborted: whatever is still queued was never started.
		l.cancelQueued("cancelled before it started")
	}
	return d, nil
}

// startRunner sets the runner: worker processes (returned) or this process.
// A first signal while workers start is a stop like any other: they are
// waited for (only the second signal aborts) and then run nothing; none
// starts once the run is stopped.
func (l *launcher) startRunner(ctx context.Context) (*worker.Pool, error) {
	env := &attempt.Env{Bind: l.bindToken, Deadline: l.setDeadline, Plan: l.p, Specs: l.specs, SampleSpecs: l.sampleSpecs, SampleErrs: l.sampleErrs, Providers: l.providers, TaskProv: l.taskProv,
		GatewayURL: l.gwURL, JudgeURL: l.judgeURL, RunID: l.runID, Exe: l.opts.Exe, Model: l.es.Model.Name, ModelSettings: modelSettings(l.es), Stderr: l.opts.Stderr,
		Started: l.started}
	if !l.opts.Workers {
		l.runner = attempt.NewExecutor(env)
		return nil, nil
	}
	pool := &worker.Pool{}
	if ctx.Err() == nil {
		var err error
		pool, err = worker.Start(l.opts.Hard, worker.Config{Env: env, LockPath: l.lockPath(), Environ: l.workerEnv(), Timeout: l.opts.WorkerTimeout,
			MaxWorkers: l.es.Fleet.MaxWorkers, Stderr: l.opts.Stderr, Scrubber: l.scrubber, Gateway: l.gatewayFor, Lost: l.failTask})
		if err != nil {
			return nil, err
		}
	}
	l.runner = pool
	return pool, nil
}

// watchStop turns the first signal (ctx) into "no new attempts" and, after
// the grace period or at the second signal (Hard), aborts running ones.
func (l *launcher) watchStop(ctx, actx context.Context, abort context.CancelFunc, stop <-chan struct{}) {
	select {
	case <-l.opts.Hard.Done():
		abort()
	case <-ctx.Done():
		l.cancelQueued("cancelled before it started")
		fmt.Fprintf(l.opts.Stderr, "steward: stopping: no new attempts; running ones may finish within %s (signal again to stop at once)\n", l.opts.Grace)
		grace := time.NewTimer(l.opts.Grace)
		defer grace.Stop()
		select {
		case <-grace.C:
		case <-l.opts.Hard.Done():
		case <-actx.Done():
		case <-stop:
			return
		}
		abort()
	case <-actx.Done():
	case <-stop:
	}
}

// startTasks starts one lifecycle per task (max_tasks slot, lease, host
// setup, ready, teardown) in g.
func (l *launcher) startTasks(ctx, actx context.Context, g *errgroup.Group) {
	var slots chan struct{}
	if l.es.Fleet.MaxTasks > 0 {
		slots = make(chan struct{}, l.es.Fleet.MaxTasks)
	}
	for i := range l.p.Tasks {
		g.Go(func() error { l.taskLifecycle(ctx, actx, i, slots, l.tasks.done[i]); return nil })
	}
	l.tasks.check()
}

// drain waits for every attempt and task lifecycle, shuts the workers down,
// stops the loops and prints the last panel.
func (l *launcher) drain(d *dispatched) {
	_ = d.work.Wait()
	if d.workers != nil {
		d.workers.Shutdown()
	}
	close(d.stop)
	_ = d.loops.Wait()
	d.abort()
	l.panelFinal()
}

// finish records the run's final status and builds its report from the record.
func (l *launcher) finish(ctx context.Context, sess *session) (*Result, error) {
	runStatus := status.Finished
	if l.cutShort(ctx) {
		runStatus = status.Cancelled
	}
	if l.recordErr != nil {
		return nil, sess.stopOnRecordError()
	}
	if err := l.db.FinishRun(context.Background(), l.runID, runStatus, time.Now(), l.leftNow()); err != nil {
		return nil, record.Classify(l.db.Dir, err)
	}
	sess.finished = true
	rep, err := l.buildReport(context.Background())
	if err != nil {
		return nil, err
	}
	if runStatus == status.Cancelled {
		rep.Partial = true
		rep.Left = l.leftNow()
	}
	l.mu.Lock()
	if l.spentStop {
		rep.Spend.BudgetStopped = true
	}
	l.mu.Unlock()
	return &Result{Report: rep, Cancelled: runStatus == status.Cancelled}, nil
}

// leftNow is a copy of what the run leaves undone, so far.
func (l *launcher) leftNow() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scrubber.Strings(append([]string(nil), l.left...))
}

// taskTracker closes a task's done channel once the scheduler says the
// task is finished (check runs after every change that may finish one).
type taskTracker struct {
	disp *sched.Dispatcher
	done []chan struct{}
	once []sync.Once
}

func newTaskTracker(disp *sched.Dispatcher, n int) *taskTracker {
	t := &taskTracker{disp: disp, done: make([]chan struct{}, n), once: make([]sync.Once, n)}
	for i := range t.done {
		t.done[i] = make(chan struct{})
	}
	return t
}

func (t *taskTracker) check() {
	t.disp.With(func(s *sched.State) {
		for i := range t.done {
			if s.TaskFinished(i) {
				t.once[i].Do(func() { close(t.done[i]) })
			}
		}
	})
}

// newState builds the scheduler's state for the attempts to run, with the
// budget set and every task not ready yet (it becomes ready after its
// max_tasks slot, lease and host setup).
func (l *launcher) newState() (*sched.State, error) {
	excl := make([]string, len(l.exclusive))
	for i, e := range l.exclusive {
		if e {
			excl[i] = l.taskProv[i]
		}
	}
	sp := schedItems(l.p, excl)
	l.items, l.seqOf, l.itemOf = sp.items, sp.seqOf, sp.itemOf
	st, err := sched.New(sp.items, len(l.p.Tasks), sp.order)
	if err != nil {
		return nil, err
	}
	st.SetBudget(l.budget)
	// Every task starts pending: its share is kept for it until it is ready
	// or has to wait (taskLifecycle), so the first dispatch cannot hand the
	// budget to whichever task is ready first (C4, C7).
	for i := range l.p.Tasks {
		st.SetPending(i, true)
	}
	return st, nil
}

// startSetpoints are the setpoints the run starts with when every task can
// run: the ramp's starting setpoints (or max_samples) shared within the
// budget (C4, C7), as the scheduler computes them. Nil when unknown.
func (l *launcher) startSetpoints() []int {
	st, err := l.newState()
	l.items, l.seqOf, l.itemOf = nil, nil, nil
	if err != nil {
		return nil
	}
	ctl, err := l.newRamp()
	if err != nil {
		return nil
	}
	for i, sp := range ctl.Setpoints() {
		st.SetCap(i, sp)
		st.SetReady(i, true)
	}
	out := make([]int, len(l.p.Tasks))
	for i := range out {
		out[i] = st.Setpoint(i)
	}
	return out
}

// modelSettings is model.settings as JSON, or "" when there are none.
func modelSettings(es *evalset.EvalSet) string {
	if len(es.Model.Settings) == 0 {
		return ""
	}
	b, err := json.Marshal(es.Model.Settings)
	if err != nil {
		return ""
	}
	return string(b)
}

// started marks an attempt running: its sandbox exists and it executes.
func (l *launcher) started(seq int) {
	if id, ok := l.itemOf[seq]; ok && l.disp != nil {
		l.disp.MarkStarted(id)
	}
}

type cleanups struct{ fns []func() }

func (c *cleanups) add(f func()) { c.fns = append(c.fns, f) }
func (c *cleanups) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
}

// taskNeedsOwnSpec says whether task i has work for a sandbox of its own
// spec: an attempt to run at a sample without an environment of its own.
func (l *launcher) taskNeedsOwnSpec(i int) bool {
	for _, a := range l.p.Attempts {
		if a.Task == i && a.Action == plan.ActionRun && !a.Sample.OwnEnvironment() {
			return true
		}
	}
	return false
}

func (l *launcher) startGateway(ctx context.Context, serving *errgroup.Group, needed map[string][]*sandbox.Spec) error {
	m := l.es.Model
	key := ""
	if m.Upstream != "" && m.Upstream != "mock" {
		env := m.APIKeyEnv
		key = l.opts.Getenv(env)
		if key == "" && len(needed) > 0 {
			return badInput("%s: model.api_key_env: the environment variable %s is not set (the real key for the %s upstream)", l.es.File, env, m.Upstream)
		}
	}
	upstream, baseURL := m.Upstream, m.BaseURL
	if key == "" && len(needed) == 0 {
		// Nothing runs (every attempt carried or skipped): no model call is
		// made, so no key is needed; the gateway stands on the mock.
		upstream, baseURL = "mock", ""
	}
	// Secrets are named in the eval set (secret_env), in _steward.yaml
	// (secrets) and in secret.EnvNames: read once (initSecrets).
	secrets := l.secrets
	policy := gateway.StewardPolicy()
	policy.HardMax = m.MaxConnectionsCeiling // 0: the gateway's own
	gw, err := gateway.New(gateway.Config{
		Secrets:  secrets,
		Upstream: upstream, BaseURL: baseURL, APIKey: key, MaxConnections: m.MaxConnections, Policy: &policy,
		Prices: gateway.Prices{InputPerMTok: m.Prices.InputPerMTok, OutputPerMTok: m.Prices.OutputPerMTok},
		Logger: l.opts.Stderr, Capture: l.captureConfig(), BudgetUSD: l.opts.BudgetUSD,
		DefaultMaxTokens: int64(cmp.Or(m.BudgetMaxTokens, evalset.DefaultBudgetMaxTokens)),
	})
	if err != nil {
		return badInput("%s: model: %v", l.es.File, err)
	}
	l.gw = gw
	l.apiKey = key
	l.gwURL = map[string]string{}
	l.gwListen = map[string]string{}
	l.gwCtx = ctx
	l.gwServing = serving
	// One listener per provider for the whole run, workers included (they
	// receive the URL).
	for name := range needed {
		addr, err := l.providers[name].Gateway(ctx)
		if err != nil {
			return fmt.Errorf("find the gateway address for %s sandboxes: %w", name, err)
		}
		url, err := l.gatewayFor(addr)
		if err != nil {
			return err
		}
		l.gwURL[name] = url
	}
	for _, pt := range l.p.Tasks {
		if pt.Task.Scorer.ModelGraded != nil {
			// The model judge's graders are called from this machine's
			// processes, on loopback (modeljudge.go).
			url, err := l.gatewayFor(sandbox.GatewayAddr{Listen: "127.0.0.1:0", Host: "127.0.0.1"})
			if err != nil {
				return err
			}
			l.judgeURL = url
			break
		}
	}
	return nil
}

// publishCarried records every carried attempt as a reference to the row
// that judged it, in one transaction: nothing is copied, and the report
// reads the result, log, tokens and cost through the reference. Early-exit
// skips of a sample whose pass is carried (S4) refer to the skip recorded
// before, or are published as new skipped rows.
func (l *launcher) publishCarried(ctx context.Context) error {
	var refs []record.Ref
	var fresh []*plan.Attempt
	for _, a := range l.p.Attempts {
		switch {
		case a.Action != plan.ActionCarry && a.Action != plan.ActionSkip:
		case a.From.RunID != "":
			refs = append(refs, record.Ref{RunID: l.runID, Seq: a.Seq, SrcRun: a.From.RunID, SrcSeq: a.From.Seq, Source: a.Sample.Source})
		case a.Action == plan.ActionSkip:
			fresh = append(fresh, a)
		default:
			return fmt.Errorf("carry %s: no source row", a.ID(l.p))
		}
	}
	if err := l.db.PublishCarried(ctx, refs); err != nil {
		return err
	}
	if l.opts.Observe != nil && len(refs) > 0 {
		// Told as the record reads them (through the reference: the source
		// row's score, times, tokens and reason, and the run that produced it).
		carried := map[int]bool{}
		for _, r := range refs {
			carried[r.Seq] = true
		}
		rows, err := l.db.Attempts(ctx, l.runID)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if carried[r.Seq] {
				l.observe(Event{Attempt: &r})
			}
		}
	}
	for _, a := range fresh {
		if err := l.publish(ctx, record.Attempt{
			RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: status.Skipped, Reason: a.Reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(),
			Finished: time.Now(), Source: a.Sample.Source,
		}); err != nil {
			return err
		}
	}
	l.mu.Lock()
	for _, a := range l.p.Attempts {
		switch a.Action {
		case plan.ActionCarry:
			l.published[a.Seq] = a.From.Status
			l.reused++
		case plan.ActionSkip:
			l.published[a.Seq] = status.Skipped
		}
	}
	l.mu.Unlock()
	return nil
}

// cancelQueued cancels every queued attempt and publishes it as skipped.
func (l *launcher) cancelQueued(reason string) {
	var ids []int
	l.disp.With(func(s *sched.State) { ids = s.CancelAll() })
	l.publishSkipped(ids, reason)
	if len(ids) > 0 {
		l.mu.Lock()
		if reason == stoppedReason {
			l.stopSkips += len(ids)
		}
		l.left = append(l.left, fmt.Sprintf("%d attempts not started (%s)", len(ids), reason))
		l.mu.Unlock()
	}
}

func (l *launcher) publishSkipped(ids []int, reason string) {
	for _, id := range ids {
		a := l.bySeq(l.seqOf[id])
		_ = l.publish(context.Background(), record.Attempt{
			RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: status.Skipped, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(),
			Finished: time.Now(), Source: a.Sample.Source,
		})
		l.mu.Lock()
		l.published[a.Seq] = status.Skipped
		l.mu.Unlock()
	}
	if len(ids) > 0 {
		l.tasks.check()
	}
}

// taskLifecycle: max_tasks slot → lease → host setup → ready → (attempts) →
// sandbox teardown → host teardown → lease release (S1, C6, C9).
func (l *launcher) taskLifecycle(ctx, actx context.Context, ti int, slots chan struct{}, done chan struct{}) {
	t := l.p.Tasks[ti].Task
	// waits gives the task's share back: it waits for something (C6).
	waits := func() { l.disp.With(func(s *sched.State) { s.SetPending(ti, false) }) }
	defer waits()
	select {
	case <-done:
		return // nothing to run (all carried, filtered or cancelled)
	default:
	}
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			waits()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-done:
				return
			}
		}
	}
	var token string
	if key := t.SharedState.Key; key != "" {
		tok, err := l.acquireLease(ctx, ti, key, done)
		if err != nil {
			l.failTask(ti, status.Skipped, fmt.Sprintf("not started: waiting for lease %q: %v", key, err))
			return
		}
		if tok == "" {
			return
		}
		token = tok
	}
	teardownOK := true
	defer func() {
		if token == "" {
			return
		}
		if !teardownOK {
			fmt.Fprintf(l.opts.Stderr, "steward: task %s: teardown failed, so lease %q stays held; after checking the shared state, free it with `steward lease inspect %s` and `steward lease recover`\n", t.Name, t.SharedState.Key, t.SharedState.Key)
			return
		}
		if err := l.db.Release(context.Background(), t.SharedState.Key, token); err != nil {
			fmt.Fprintf(l.opts.Stderr, "steward: task %s: %v\n", t.Name, err)
		}
	}()
	if t.Host.Setup != "" {
		waits() // a task in its host setup holds no share (C6)
		if out, err := l.hostCommand(actx, t.Host.Setup); err != nil {
			l.failTask(ti, status.Errored, fmt.Sprintf("task setup failed: %v: %s", err, tail(out, 400)))
			teardownOK = l.taskTeardown(ti)
			return
		}
	}
	l.disp.With(func(s *sched.State) { s.SetReady(ti, true) })
	<-done
	teardownOK = l.taskTeardown(ti)
}

func (l *launcher) taskTeardown(ti int) bool {
	t := l.p.Tasks[ti].Task
	ok := l.runner.CloseTask(context.Background(), ti)
	if t.Host.Teardown != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := l.hostCommand(ctx, t.Host.Teardown); err != nil {
			fmt.Fprintf(l.opts.Stderr, "steward: task %s: host teardown failed: %v: %s\n", t.Name, err, l.scrub(tail(out, 400)))
			ok = false
		}
	}
	return ok
}

// failTask cancels a task's queued attempts and publishes them with status and reason.
func (l *launcher) failTask(ti int, st status.Attempt, reason string) {
	var ids []int
	l.disp.With(func(s *sched.State) { ids = s.CancelTask(ti) })
	for _, id := range ids {
		a := l.bySeq(l.seqOf[id])
		_ = l.publish(context.Background(), record.Attempt{
			RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: st, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Finished: time.Now(), Source: a.Sample.Source,
		})
		l.mu.Lock()
		l.published[a.Seq] = st
		l.mu.Unlock()
	}
	l.tasks.check()
}

// acquireLease waits, holding nothing, until key is free (S1). It returns ""
// when the task ended while waiting (cancelled).
func (l *launcher) acquireLease(ctx context.Context, ti int, key string, done chan struct{}) (string, error) {
	t := l.p.Tasks[ti].Task
	said := false
	for {
		tok, err := l.db.TryAcquire(ctx, key, l.runID, t.Name, os.Getpid(), hostname(), time.Now())
		if err == nil {
			if said {
				fmt.Fprintf(l.opts.Stderr, "steward: task %s: acquired lease %q\n", t.Name, key)
			}
			return tok, nil
		}
		if !errors.Is(err, record.ErrLeaseHeld) {
			return "", err
		}
		if !said {
			l.disp.With(func(s *sched.State) { s.SetPending(ti, false) }) // it waits: no share (C6)
			h, _, _ := l.db.Holder(ctx, key)
			fmt.Fprintf(l.opts.Stderr, "steward: task %s waits for lease %q, held by run %s (task %s, pid %d on %s) since %s; it holds no slot while it waits. Inspect with `steward lease inspect %s`.\n",
				t.Name, key, h.RunID, h.Task, h.PID, h.Host, h.Acquired.Format(time.RFC3339), key)
			said = true
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-done:
			return "", nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// bindToken binds an attempt's token to its sandbox's address (12.5).
func (l *launcher) bindToken(_ context.Context, token string, ip netip.Addr) error {
	return l.gw.Bind(token, ip)
}

// gatewayFor makes the gateway listen where sandboxes reach it (a worker's
// provider asks, W1) and returns the URL they use: one listener per address.
func (l *launcher) gatewayFor(addr sandbox.GatewayAddr) (string, error) {
	listenAddr, host := addr.Listen, addr.Host
	l.gwMu.Lock()
	defer l.gwMu.Unlock()
	key := listenAddr + "|" + host
	if url, ok := l.gwListen[key]; ok {
		return url, nil
	}
	ln, err := listen(listenAddr)
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	l.gwListen[key] = url
	if addr.Proxied {
		l.gwServing.Go(func() error { return l.gw.ServeProxied(l.gwCtx, ln) })
	} else {
		l.gwServing.Go(func() error { return l.gw.Serve(l.gwCtx, ln) })
	}
	return url, nil
}

// workerEnv is the supervisor's environment without a secret: the model's
// real key (and the variables that usually hold one), the variables the eval
// set (secret_env) and _steward.yaml (secrets) name, the GitHub token and
// the runner's own tokens. A worker never holds them (host hooks, which may
// use them, run in the supervisor).
func (l *launcher) workerEnv() []string {
	drop := map[string]bool{}
	for _, k := range secret.Names([]string{l.es.Model.APIKeyEnv}, l.es.SecretEnv, l.es.Fleet.Secrets) {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return env
}
