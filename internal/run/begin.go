package run

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// begun is a run that has started (the begin stage): it holds the run lock
// and the record's reserve, the record says it runs and holds its planned
// attempts, and the PLAN line is printed. end gives it all back.
type begun struct {
	*carried
	lock interface{ Release() error }
}

// begin takes the run lock and the record's reserve, records the run and
// its plan, marks the runs whose owners are gone as crashed, and prints
// the PLAN line.
func begin(ctx context.Context, cr *carried) (*begun, error) {
	lock, err := runlock.Acquire(cr.lockPath())
	if err != nil {
		return nil, fmt.Errorf("take the run lock: %w", err)
	}
	b := &begun{carried: cr, lock: lock}
	fail := func(err error) (*begun, error) {
		b.release()
		return nil, err
	}
	if err := record.Reserve(cr.db.Dir, cr.runID); err != nil {
		return fail(err)
	}
	if err := cr.db.StartRun(ctx, record.Run{ID: cr.runID, EvalSet: cr.es.File, Title: cr.opts.Title, Plan: cr.planLine, Shard: cr.opts.Shard,
		Started: cr.start, PID: os.Getpid(), Host: hostname(), LockPath: cr.lockPath(), BudgetUSD: cr.opts.BudgetUSD}); err != nil {
		return fail(record.Classify(cr.db.Dir, err))
	}
	if err := cr.recordStart(ctx); err != nil {
		return fail(err)
	}
	fmt.Fprintln(cr.opts.Stderr, report.PlanLine(cr.planLine))
	return b, nil
}

// end ends the run in the record unless a later stage finished it:
// aborted when the launch stopped on an error it reported (err: a missing
// image, a refused preflight), else crashed, with what d left undone. Then
// it gives back the reserve and the lock, and sweeps: once this run's lock
// is released it counts as dead, so a last sweep removes whatever a crashed
// worker of this run left (D4).
func (b *begun) end(err error, finished bool, d *dispatch) {
	if !finished {
		st, left := status.Crashed, []string(nil)
		if d != nil {
			left = d.leftNow()
		}
		if err != nil {
			st = status.Aborted
			left = append(left, "the launch stopped: "+b.scrub(err.Error()))
		}
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = b.db.FinishRun(fctx, b.runID, st, time.Now(), left)
		cancel()
	}
	b.release()
}

// release gives back the reserve and the lock, then sweeps.
func (b *begun) release() {
	record.Unreserve(b.db.Dir, b.runID)
	_ = b.lock.Release()
	for _, prov := range b.providers {
		if sw, ok := prov.(sandbox.AfterRunSweeper); ok {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			sw.SweepAfterRun(sctx)
			cancel()
		}
	}
}
