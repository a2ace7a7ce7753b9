package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
	"golang.org/x/sync/errgroup"
)

// A task's lifecycle in the dispatch stage: its max_tasks slot, its lease,
// its host setup, ready (its attempts may be admitted), then its pooled
// sandboxes torn down, its host teardown and its lease released (S1, C6,
// C9); and the attempts a stop, a failed task or a spent budget leave not
// started, published as skipped.

// startTasks starts one lifecycle per task (max_tasks slot, lease, host
// setup, ready, teardown) in g.
func (d *dispatch) startTasks(ctx, actx context.Context, g *errgroup.Group) {
	var slots chan struct{}
	if d.es.Fleet.MaxTasks > 0 {
		slots = make(chan struct{}, d.es.Fleet.MaxTasks)
	}
	for i := range d.p.Tasks {
		g.Go(func() error { d.taskLifecycle(ctx, actx, i, slots, d.tasks.done[i]); return nil })
	}
	d.tasks.check()
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

// cancelQueued cancels every queued attempt and publishes it as skipped.
func (d *dispatch) cancelQueued(reason string) {
	var ids []int
	d.disp.With(func(s *sched.State) { ids = s.CancelAll() })
	d.publishSkipped(ids, reason)
	if len(ids) > 0 {
		t := d.tally
		t.mu.Lock()
		if reason == stoppedReason {
			t.stopSkips += len(ids)
		}
		t.left = append(t.left, fmt.Sprintf("%d attempts not started (%s)", len(ids), reason))
		t.mu.Unlock()
	}
}

func (d *dispatch) publishSkipped(ids []int, reason string) {
	for _, id := range ids {
		a := d.p.BySeq(d.sp.seqOf[id])
		_ = d.publish(context.Background(), d.row(a, status.Skipped, reason))
		d.tally.mark(a.Seq, status.Skipped)
	}
	if len(ids) > 0 {
		d.tasks.check()
	}
}

// taskLifecycle: max_tasks slot → lease → host setup → ready → (attempts) →
// sandbox teardown → host teardown → lease release (S1, C6, C9).
func (d *dispatch) taskLifecycle(ctx, actx context.Context, ti int, slots chan struct{}, done chan struct{}) {
	t := d.p.Tasks[ti].Task
	// waits gives the task's share back: it waits for something (C6).
	waits := func() { d.disp.With(func(s *sched.State) { s.SetPending(ti, false) }) }
	defer waits()
	select {
	case <-done:
		return // nothing to run (all carried, filtered or cancelled)
	default:
	}
	release, ok := takeSlot(slots, done, waits)
	if !ok {
		return
	}
	defer release()
	token, ok := d.lease(ctx, ti, done)
	if !ok {
		return
	}
	teardownOK := true
	defer func() { d.releaseLease(ti, token, teardownOK) }()
	if t.Host.Setup != "" {
		waits() // a task in its host setup holds no share (C6)
		if out, err := d.hostCommand(actx, t.Host.Setup); err != nil {
			d.failTask(ti, status.Errored, fmt.Sprintf("task setup failed: %v: %s", err, tail(out, 400)))
			teardownOK = d.taskTeardown(ti)
			return
		}
	}
	d.disp.With(func(s *sched.State) { s.SetReady(ti, true) })
	<-done
	teardownOK = d.taskTeardown(ti)
}

// takeSlot takes one of the max_tasks slots (nil: no bound), giving the
// task's share back while it waits for one (C6); ok is false when the task
// ended first.
func takeSlot(slots chan struct{}, done chan struct{}, waits func()) (release func(), ok bool) {
	if slots == nil {
		return func() {}, true
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	default:
	}
	waits()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	case <-done:
		return nil, false
	}
}

// lease takes task ti's shared-state lease, when it names one (S1); ok is
// false when the task ended while it waited, or the wait failed (its
// attempts are then skipped with why). The token is "" without a lease.
func (d *dispatch) lease(ctx context.Context, ti int, done chan struct{}) (token string, ok bool) {
	key := d.p.Tasks[ti].Task.SharedState.Key
	if key == "" {
		return "", true
	}
	tok, err := d.acquireLease(ctx, ti, key, done)
	if err != nil {
		d.failTask(ti, status.Skipped, fmt.Sprintf("not started: waiting for lease %q: %v", key, err))
		return "", false
	}
	return tok, tok != ""
}

// releaseLease frees task ti's lease once its sandboxes and host teardown
// are done; a failed teardown keeps it held, for a person to check (S1).
func (d *dispatch) releaseLease(ti int, token string, teardownOK bool) {
	t := d.p.Tasks[ti].Task
	if token == "" {
		return
	}
	if !teardownOK {
		fmt.Fprintf(d.opts.Stderr, "steward: task %s: teardown failed, so lease %q stays held; after checking the shared state, free it with `steward lease inspect %s` and `steward lease recover`\n", t.Name, t.SharedState.Key, t.SharedState.Key)
		return
	}
	if err := d.db.Release(context.Background(), t.SharedState.Key, token); err != nil {
		fmt.Fprintf(d.opts.Stderr, "steward: task %s: %v\n", t.Name, err)
	}
}

func (d *dispatch) taskTeardown(ti int) bool {
	t := d.p.Tasks[ti].Task
	ok := d.runner.CloseTask(context.Background(), ti)
	if t.Host.Teardown != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := d.hostCommand(ctx, t.Host.Teardown); err != nil {
			fmt.Fprintf(d.opts.Stderr, "steward: task %s: host teardown failed: %v: %s\n", t.Name, err, d.scrub(tail(out, 400)))
			ok = false
		}
	}
	return ok
}

// failTask cancels a task's queued attempts and publishes them with status and reason.
func (d *dispatch) failTask(ti int, st status.Attempt, reason string) {
	var ids []int
	d.disp.With(func(s *sched.State) { ids = s.CancelTask(ti) })
	for _, id := range ids {
		a := d.p.BySeq(d.sp.seqOf[id])
		_ = d.publish(context.Background(), d.row(a, st, reason))
		d.tally.mark(a.Seq, st)
	}
	d.tasks.check()
}

// acquireLease waits, holding nothing, until key is free (S1). It returns ""
// when the task ended while waiting (cancelled).
func (d *dispatch) acquireLease(ctx context.Context, ti int, key string, done chan struct{}) (string, error) {
	t := d.p.Tasks[ti].Task
	said := false
	for {
		tok, err := d.db.TryAcquire(ctx, key, d.runID, t.Name, os.Getpid(), hostname(), time.Now())
		if err == nil {
			if said {
				fmt.Fprintf(d.opts.Stderr, "steward: task %s: acquired lease %q\n", t.Name, key)
			}
			return tok, nil
		}
		if !errors.Is(err, record.ErrLeaseHeld) {
			return "", err
		}
		if !said {
			d.disp.With(func(s *sched.State) { s.SetPending(ti, false) }) // it waits: no share (C6)
			h, _, _ := d.db.Holder(ctx, key)
			fmt.Fprintf(d.opts.Stderr, "steward: task %s waits for lease %q, held by run %s (task %s, pid %d on %s) since %s; it holds no slot while it waits. Inspect with `steward lease inspect %s`.\n",
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
