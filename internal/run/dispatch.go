package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/panel"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/worker"
	"golang.org/x/sync/errgroup"
)

// dispatch is the dispatch stage, the only one with mutable state. What it
// sets before its goroutines start (the scheduler, its items, the task
// tracker, the runner) is read-only afterwards; the run's tallies are
// behind their own lock (tally), the scheduler's state behind the
// dispatcher's.
type dispatch struct {
	*prepared
	disp   *sched.Dispatcher
	sp     schedPlan // the scheduler's items: item id <-> attempt seq
	tasks  *taskTracker
	runner runner
	tally  *tally
	panel  *panel.Panel // its loop's alone; drawn a last time once it stopped
}

// runner executes attempts: in this process (*attempt.Executor) or in
// worker processes, one per task by default (W1: *worker.Pool).
type runner interface {
	// Run runs one try of a with its gateway tokens and returns its row.
	Run(ctx context.Context, a *plan.Attempt, tok attempt.Tokens) record.Attempt
	// CloseTask removes the task's pooled sandboxes; false when some failed.
	CloseTask(ctx context.Context, task int) bool
	// TakeArtifacts returns (and forgets) the artifacts of attempt seq.
	TakeArtifacts(seq int) []record.Artifact
}

// loops are the goroutines the dispatch stage starts and waits for: work
// (every task lifecycle and admitted attempt) and the loops (tend, panel,
// the stop watchers), which return once stop closes.
type loops struct {
	work    errgroup.Group
	loops   errgroup.Group
	stop    chan struct{}
	abort   context.CancelFunc
	workers *worker.Pool
}

// dispatchStage publishes the carried results, builds the scheduler and
// the ramp, starts the runner (workers or in-process), one lifecycle per
// task, the loops and the stop watcher, admits attempts until none is left
// or the run is aborted, and drains. A record that cannot take results
// ends it with record.ErrDiskFull.
func dispatchStage(ctx context.Context, pr *prepared) (*dispatch, error) {
	d := &dispatch{prepared: pr, tally: newTally(len(pr.p.Tasks))}
	if err := d.publishCarried(ctx); err != nil {
		err = record.Classify(d.db.Dir, err)
		if errors.Is(err, record.ErrDiskFull) {
			d.recordFull(err)
		}
		return d, err
	}
	st, sp, err := pr.newState()
	if err != nil {
		return d, err
	}
	ctl, err := pr.newRamp()
	if err != nil {
		return d, err
	}
	for i, c := range ctl.Setpoints() {
		st.SetCap(i, c)
	}
	// Set before any goroutine starts; read-only afterwards.
	d.sp, d.disp = sp, sched.NewDispatcher(st)
	d.tasks = newTaskTracker(d.disp, len(pr.p.Tasks))
	d.panel = panel.New(d.opts.Stderr, d.opts.TTY, d.opts.PanelInterval, d.panelLine)
	lp, actx, err := d.start(ctx, ctl)
	if err != nil {
		return d, err
	}
	err = d.disp.Run(actx, func(it sched.Item) {
		lp.work.Go(func() error { d.runItem(actx, it); return nil })
	})
	if err != nil && actx.Err() != nil {
		// Aborted: whatever is still queued was never started.
		d.cancelQueued(stoppedReason)
	}
	d.drain(lp)
	return d, nil
}

// start starts the runner, the task lifecycles and the loops. Attempts run
// under the returned context: a soft cancel (ctx) lets them finish within
// the grace period; the second signal (Hard) or the end of grace aborts them.
func (d *dispatch) start(ctx context.Context, ctl *ramp.Controller) (*loops, context.Context, error) {
	actx, abort := context.WithCancel(context.Background())
	lp := &loops{stop: make(chan struct{}), abort: abort}
	var err error
	if lp.workers, err = d.startRunner(ctx); err != nil {
		abort()
		return nil, nil, err
	}
	if ctx.Err() != nil {
		// Stopped while preparing: nothing starts (the watcher, below, may
		// run only after the first task is ready).
		d.cancelQueued(stoppedReason)
	}
	lp.loops.Go(func() error { d.watchStop(ctx, actx, abort, lp.stop); return nil })
	if w := lp.workers; w != nil {
		lp.loops.Go(func() error {
			select {
			case <-actx.Done():
				w.Abort()
			case <-lp.stop:
			}
			return nil
		})
	}
	d.startTasks(ctx, actx, &lp.work)
	lp.loops.Go(func() error { d.tendLoop(actx, ctl, lp.stop); return nil })
	lp.loops.Go(func() error { d.panel.Loop(lp.stop); return nil })
	return lp, actx, nil
}

// startRunner sets the runner: worker processes (returned) or this process,
// each running attempts from the same environment. A first signal while
// workers start is a stop like any other: they are waited for (only the
// second signal aborts) and then run nothing; none starts once the run is
// stopped.
func (d *dispatch) startRunner(ctx context.Context) (*worker.Pool, error) {
	env := &attempt.Env{Bind: d.bindToken, Deadline: d.setDeadline, Started: d.started,
		Plan: d.p, Specs: d.ready.Tasks, SampleSpecs: d.ready.Samples, SampleErrs: d.sampleErrs, Providers: d.providers, TaskProv: d.taskProv,
		GatewayURL: d.gwURL, JudgeURL: d.judgeURL, RunID: d.runID, Exe: d.opts.Exe, Model: d.es.Model.Name, ModelSettings: modelSettings(d.es), Stderr: d.opts.Stderr}
	if !d.opts.Workers {
		d.runner = attempt.NewExecutor(env)
		return nil, nil
	}
	pool := &worker.Pool{}
	if ctx.Err() == nil {
		var err error
		pool, err = worker.Start(d.opts.Hard, worker.Config{Env: env, LockPath: d.lockPath(), Environ: d.workerEnv(), Timeout: d.opts.WorkerTimeout,
			MaxWorkers: d.es.Fleet.MaxWorkers, Stderr: d.opts.Stderr, Scrubber: d.scrubber, Gateway: d.openGateway, Lost: d.failTask})
		if err != nil {
			return nil, err
		}
	}
	d.runner = pool
	return pool, nil
}

// watchStop turns the first signal (ctx) into "no new attempts" and, after
// the grace period or at the second signal (Hard), aborts running ones.
func (d *dispatch) watchStop(ctx, actx context.Context, abort context.CancelFunc, stop <-chan struct{}) {
	select {
	case <-d.opts.Hard.Done():
		abort()
	case <-ctx.Done():
		d.cancelQueued(stoppedReason)
		fmt.Fprintf(d.opts.Stderr, "steward: stopping: no new attempts; running ones may finish within %s (signal again to stop at once)\n", d.opts.Grace)
		grace := time.NewTimer(d.opts.Grace)
		defer grace.Stop()
		select {
		case <-grace.C:
		case <-d.opts.Hard.Done():
		case <-actx.Done():
		case <-stop:
			return
		}
		abort()
	case <-actx.Done():
	case <-stop:
	}
}

// drain waits for every attempt and task lifecycle, shuts the workers down,
// stops the loops and prints the last panel.
func (d *dispatch) drain(lp *loops) {
	_ = lp.work.Wait()
	if lp.workers != nil {
		lp.workers.Shutdown()
	}
	close(lp.stop)
	_ = lp.loops.Wait()
	lp.abort()
	d.panel.Final()
}

// publishCarried records every carried attempt as a reference to the row
// that judged it, in one transaction: nothing is copied, and the report
// reads the result, log, tokens and cost through the reference. Early-exit
// skips of a sample whose pass is carried (S4) refer to the skip recorded
// before, or are published as new skipped rows.
func (d *dispatch) publishCarried(ctx context.Context) error {
	var refs []record.Ref
	var fresh []*plan.Attempt
	for _, a := range d.p.Attempts {
		switch {
		case a.Action != plan.ActionCarry && a.Action != plan.ActionSkip:
		case a.From.RunID != "":
			refs = append(refs, record.Ref{RunID: d.runID, Seq: a.Seq, SrcRun: a.From.RunID, SrcSeq: a.From.Seq, Source: a.Sample.Source})
		case a.Action == plan.ActionSkip:
			fresh = append(fresh, a)
		default:
			return fmt.Errorf("carry %s: no source row", a.ID(d.p))
		}
	}
	if err := d.db.PublishCarried(ctx, refs); err != nil {
		return err
	}
	if err := d.observeCarried(ctx, refs); err != nil {
		return err
	}
	for _, a := range fresh {
		if err := d.publish(ctx, d.row(a, status.Skipped, a.Reason)); err != nil {
			return err
		}
	}
	d.tally.carried(d.p)
	return nil
}

// observeCarried tells Observe of the carried rows as the record reads
// them (through the reference: the source row's score, times, tokens and
// reason, and the run that produced it).
func (d *dispatch) observeCarried(ctx context.Context, refs []record.Ref) error {
	if d.opts.Observe == nil || len(refs) == 0 {
		return nil
	}
	carried := map[int]bool{}
	for _, r := range refs {
		carried[r.Seq] = true
	}
	rows, err := d.db.Attempts(ctx, d.runID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if carried[r.Seq] {
			d.observe(Event{Attempt: &r})
		}
	}
	return nil
}

// row is an attempt's row that ends without running: skipped, or errored
// with its task.
func (d *dispatch) row(a *plan.Attempt, st status.Attempt, reason string) record.Attempt {
	return record.Attempt{
		RunID: d.runID, Seq: a.Seq, Task: d.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
		Status: st, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Finished: time.Now(), Source: a.Sample.Source,
	}
}

// started marks an attempt running: its sandbox exists and it executes.
func (d *dispatch) started(seq int) {
	if id, ok := d.sp.itemOf[seq]; ok {
		d.disp.MarkStarted(id)
	}
}
