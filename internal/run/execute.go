package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
)

// afterRunSweeper is implemented by providers that remove what dead runs left (D4).
type afterRunSweeper interface {
	SweepAfterRun(ctx context.Context)
}

func (l *launcher) execute(ctx context.Context) (*Result, error) {
	db := l.db
	lock, err := runlock.Acquire(l.lockPath())
	if err != nil {
		return nil, fmt.Errorf("take the run lock: %w", err)
	}
	defer func() {
		// Once this run's lock is released it counts as dead, so a last sweep
		// removes whatever a crashed worker of this run left (D4).
		_ = lock.Release()
		for _, prov := range l.providers {
			if s, ok := prov.(afterRunSweeper); ok {
				sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				s.SweepAfterRun(sctx)
				cancel()
			}
		}
	}()
	if err := l.reserveRoom(); err != nil {
		return nil, err
	}
	defer l.releaseRoom()
	if err := db.StartRun(ctx, record.Run{ID: l.runID, EvalSet: l.es.File, Title: l.opts.Title, Plan: l.planLine, Shard: l.opts.Shard,
		Started: l.start, PID: os.Getpid(), Host: hostname(), LockPath: l.lockPath(), BudgetUSD: l.opts.BudgetUSD}); err != nil {
		return nil, record.Classify(db.Dir, err)
	}
	if err := l.recordStart(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintln(l.opts.Stderr, report.PlanLine(l.planLine))
	runStatus, finished := status.Finished, false
	defer func() {
		if finished {
			return
		}
		runStatus = status.Crashed
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.FinishRun(fctx, l.runID, runStatus, time.Now(), l.left)
	}()

	// Providers: sweep what dead runs left, then build images and networks,
	// once per run: worker processes adopt them (W1), so a run has one
	// gateway network and builds each build: directory once.
	cleanup := &cleanups{}
	defer cleanup.run()
	needed := map[string][]*sandbox.Spec{}
	for i, name := range l.taskProv {
		if l.taskHasWork(i) {
			needed[name] = append(needed[name], l.specs[i])
		}
	}
	for name, specs := range needed {
		prov := l.providers[name]
		for _, s := range specs {
			s.RunID = l.runID
		}
		if err := l.preflight(ctx, name, prov, specs); err != nil {
			return nil, err
		}
		if err := prov.Prepare(ctx, specs); err != nil {
			return nil, fmt.Errorf("prepare %s sandboxes: %w", name, err)
		}
		cleanup.add(func() {
			fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := prov.Finalize(fctx); err != nil {
				fmt.Fprintf(l.opts.Stderr, "steward: finalize %s provider: %v\n", prov.Name(), err)
			}
		})
	}

	// The model gateway.
	gwCtx, stopGW := context.WithCancel(context.Background())
	defer stopGW()
	if err := l.startGateway(gwCtx, needed); err != nil {
		return nil, err
	}

	// Carried results are published at once; the rest are scheduled.
	if err := l.publishCarried(ctx); err != nil {
		if err := record.Classify(db.Dir, err); !errors.Is(err, record.ErrDiskFull) {
			return nil, err
		}
		l.recordFull(err)
		finished = true
		l.finishOnRecordError()
		return nil, l.recordErr
	}
	st, err := l.newState()
	if err != nil {
		return nil, err
	}
	l.disp = sched.NewDispatcher(st)
	ctl, err := l.newRamp()
	if err != nil {
		return nil, err
	}
	for i, sp := range ctl.Setpoints() {
		st.SetCap(i, sp)
	}
	l.errWin = make([]int, len(l.p.Tasks))

	// Attempts run under actx: a soft cancel lets them finish within the
	// grace period; the second signal (Hard) or the end of grace aborts them.
	actx, abort := context.WithCancel(context.Background())
	defer abort()
	go func() {
		select {
		case <-l.opts.Hard.Done():
			abort()
		case <-ctx.Done():
			l.cancelQueued("cancelled before it started")
			fmt.Fprintf(l.opts.Stderr, "steward: stopping: no new attempts; running ones may finish within %s (signal again to stop at once)\n", l.opts.Grace)
			select {
			case <-time.After(l.opts.Grace):
			case <-l.opts.Hard.Done():
			case <-actx.Done():
			}
			abort()
		case <-actx.Done():
		}
	}()

	var workers *workerPool
	if l.opts.Workers {
		workers, err = l.startWorkers(ctx)
		if err != nil {
			return nil, err
		}
		l.runner = workers
	} else {
		l.runner = inProcess{newExecutor(&execEnv{bind: l.bindToken, p: l.p, specs: l.specs, providers: l.providers, taskProv: l.taskProv,
			gwURL: l.gwURL, runID: l.runID, exe: l.opts.Exe, model: l.es.Model.Name, modelSettings: modelSettings(l.es), stderr: l.opts.Stderr,
			started: l.started})}
	}
	tasksDone := make([]chan struct{}, len(l.p.Tasks))
	for i := range tasksDone {
		tasksDone[i] = make(chan struct{})
	}
	var closeOnce = make([]sync.Once, len(l.p.Tasks))
	checkTasks := func() {
		l.disp.With(func(s *sched.State) {
			for i := range l.p.Tasks {
				if s.TaskFinished(i) {
					closeOnce[i].Do(func() { close(tasksDone[i]) })
				}
			}
		})
	}
	l.onFinish = checkTasks

	var wg sync.WaitGroup
	slots := make(chan struct{}, max(1, l.es.Fleet.MaxTasks))
	if l.es.Fleet.MaxTasks <= 0 {
		slots = nil
	}
	for i := range l.p.Tasks {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l.taskLifecycle(ctx, actx, i, slots, tasksDone[i])
		}(i)
	}
	checkTasks()

	stopLoops := make(chan struct{})
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { defer loops.Done(); l.tendLoop(actx, ctl, stopLoops) }()
	go func() { defer loops.Done(); l.panelLoop(stopLoops) }()

	if workers != nil {
		go func() {
			<-actx.Done()
			workers.abort()
		}()
	}
	err = l.disp.Run(actx, func(it sched.Item) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.runItem(actx, it)
		}()
	})
	if err != nil && actx.Err() != nil {
		// Aborted: whatever is still queued was never started.
		l.cancelQueued("cancelled before it started")
	}
	wg.Wait()
	if workers != nil {
		workers.shutdown()
	}
	close(stopLoops)
	loops.Wait()
	l.panelFinal()
	if ctx.Err() != nil || l.opts.Hard.Err() != nil {
		runStatus = status.Cancelled
	}
	if l.recordErr != nil {
		finished = true
		l.finishOnRecordError()
		return nil, l.recordErr
	}
	if err := db.FinishRun(context.Background(), l.runID, runStatus, time.Now(), l.left); err != nil {
		return nil, record.Classify(db.Dir, err)
	}
	finished = true
	rep, err := l.buildReport(context.Background())
	if err != nil {
		return nil, err
	}
	if runStatus == status.Cancelled {
		rep.Partial = true
		rep.Left = l.left
	}
	if l.spentStop {
		rep.Spend.BudgetStopped = true
	}
	return &Result{Report: rep, Cancelled: runStatus == status.Cancelled}, nil
}

// newState builds the scheduler's state for the attempts to run, with the
// budget set and every task not ready yet (it becomes ready after its
// max_tasks slot, lease and host setup).
func (l *launcher) newState() (*sched.State, error) {
	l.items, l.seqOf, l.itemOf = nil, nil, map[int]int{}
	for _, a := range l.p.Attempts {
		if a.Action != plan.ActionRun {
			continue
		}
		it := sched.Item{ID: len(l.items), Task: a.Task, Lane: a.Lane}
		if l.exclusive[a.Task] {
			it.Exclusive = "local"
		}
		l.itemOf[a.Seq] = it.ID
		l.items = append(l.items, it)
		l.seqOf = append(l.seqOf, a.Seq)
	}
	var order []int
	for _, t := range l.p.Tasks {
		for _, seq := range t.Order {
			if id, ok := l.itemOf[seq]; ok {
				order = append(order, id)
			}
		}
	}
	st, err := sched.New(l.items, len(l.p.Tasks), order)
	if err != nil {
		return nil, err
	}
	st.SetBudget(l.budget)
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

func (l *launcher) taskHasWork(i int) bool {
	for _, a := range l.p.Attempts {
		if a.Task == i && a.Action == plan.ActionRun {
			return true
		}
	}
	return false
}

func (l *launcher) startGateway(ctx context.Context, needed map[string][]*sandbox.Spec) error {
	m := l.es.Model
	key := ""
	if m.Upstream != "" && m.Upstream != "mock" {
		env := m.APIKeyEnv
		key = l.opts.Getenv(env)
		if key == "" {
			return badInput("%s: model.api_key_env: the environment variable %s is not set (the real key for the %s upstream)", l.es.File, env, m.Upstream)
		}
	}
	var secrets []string
	// Secrets are named in the eval set (secret_env) or in _steward.yaml (secrets).
	for _, name := range append(append([]string{}, l.es.SecretEnv...), l.es.Fleet.Secrets...) {
		if v := l.opts.Getenv(name); v != "" {
			secrets = append(secrets, v)
		}
	}
	l.secrets = secrets
	gw, err := gateway.New(gateway.Config{
		Secrets:  secrets,
		Upstream: m.Upstream, BaseURL: m.BaseURL, APIKey: key, MaxConnections: m.MaxConnections,
		Prices: gateway.Prices{InputPerMTok: m.Prices.InputPerMTok, OutputPerMTok: m.Prices.OutputPerMTok},
		Logger: l.opts.Stderr, Capture: l.captureConfig(), BudgetUSD: l.opts.BudgetUSD,
	})
	if err != nil {
		return badInput("%s: model: %v", l.es.File, err)
	}
	l.gw = gw
	l.apiKey = key
	l.gwURL = map[string]string{}
	l.gwListen = map[string]string{}
	l.gwCtx = ctx
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
	for _, a := range fresh {
		if err := l.db.Publish(ctx, record.Attempt{
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
		l.left = append(l.left, fmt.Sprintf("%d attempts not started (%s)", len(ids), reason))
		l.mu.Unlock()
	}
}

func (l *launcher) publishSkipped(ids []int, reason string) {
	for _, id := range ids {
		a := l.bySeq(l.seqOf[id])
		_ = l.db.Publish(context.Background(), record.Attempt{
			RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: status.Skipped, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(),
			Finished: time.Now(), Source: a.Sample.Source,
		})
		l.mu.Lock()
		l.published[a.Seq] = status.Skipped
		l.mu.Unlock()
	}
	if l.onFinish != nil && len(ids) > 0 {
		l.onFinish()
	}
}

// taskLifecycle: max_tasks slot → lease → host setup → ready → (attempts) →
// sandbox teardown → host teardown → lease release (S1, C6, C9).
func (l *launcher) taskLifecycle(ctx, actx context.Context, ti int, slots chan struct{}, done chan struct{}) {
	t := l.p.Tasks[ti].Task
	select {
	case <-done:
		return // nothing to run (all carried, filtered or cancelled)
	default:
	}
	if slots != nil {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-done:
			return
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
	ok := l.runner.closeTask(ti)
	if t.Host.Teardown != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := l.hostCommand(ctx, t.Host.Teardown); err != nil {
			fmt.Fprintf(l.opts.Stderr, "steward: task %s: host teardown failed: %v: %s\n", t.Name, err, tail(out, 400))
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
		_ = l.db.Publish(context.Background(), record.Attempt{
			RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: st, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Finished: time.Now(), Source: a.Sample.Source,
		})
		l.mu.Lock()
		l.published[a.Seq] = st
		l.mu.Unlock()
	}
	if l.onFinish != nil {
		l.onFinish()
	}
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
