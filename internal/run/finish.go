package run

import (
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

// stoppedReason is the reason of the attempts a stop (a signal) left not started.
const stoppedReason = "cancelled before it started"

// finish records the run's final status and builds its report from the
// record, once dispatch has drained (its tallies are no longer written).
// finished says the record holds the run's final status.
func finish(ctx context.Context, d *dispatch) (_ *Result, finished bool, _ error) {
	if d.tally.recordError() != nil {
		return nil, true, d.finishOnRecordError()
	}
	runStatus := status.Finished
	if d.cutShort(ctx) {
		runStatus = status.Cancelled
	}
	if err := d.db.FinishRun(context.Background(), d.runID, runStatus, time.Now(), d.leftNow()); err != nil {
		return nil, false, record.Classify(d.db.Dir, err)
	}
	rep, err := d.buildReport(context.Background())
	if err != nil {
		return nil, true, err
	}
	if runStatus == status.Cancelled {
		rep.Partial = true
		rep.Left = d.leftNow()
	}
	d.tally.mu.Lock()
	if d.tally.spentStop {
		rep.Spend.BudgetStopped = true
	}
	d.tally.mu.Unlock()
	return &Result{Report: rep, Cancelled: runStatus == status.Cancelled}, true, nil
}

// cutShort says whether a stop (the first or second signal) cut the run
// short: it left an attempt not started or interrupted one. Only then is the
// run cancelled (exit 130, the report's PARTIAL line). A signal that lands
// once every attempt has ended, as the run ends, cuts nothing short: the run
// is finished and its results give the exit code (docs/guide.md, exit codes).
func (d *dispatch) cutShort(ctx context.Context) bool {
	if ctx.Err() == nil && d.opts.Hard.Err() == nil {
		return false
	}
	d.tally.mu.Lock()
	defer d.tally.mu.Unlock()
	if d.tally.stopSkips > 0 {
		return true
	}
	for _, st := range d.tally.published {
		if st == status.Interrupted {
			return true
		}
	}
	return false
}

// buildReport is the run's report, from the record, with the transcripts
// the gateway captured and the tasks' fixed limits.
func (d *dispatch) buildReport(ctx context.Context) (*report.Report, error) {
	rep, err := report.FromRecord(ctx, d.db, []string{d.runID}, d.opts.Title)
	if err != nil {
		return nil, err
	}
	// Transcripts ride along for the HTML report (and report.json).
	if err := report.LoadTranscripts(ctx, d.db, rep); err != nil {
		return nil, err
	}
	for i := range rep.Tasks {
		for _, t := range d.p.Tasks {
			if t.Task.Name == rep.Tasks[i].Name && t.Task.MaxSamples > 0 {
				rep.Tasks[i].Limit = fmt.Sprintf("≤%d", t.Task.MaxSamples)
			}
		}
	}
	return rep, nil
}
