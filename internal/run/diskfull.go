package run

import (
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
)

// diskFull is what a run whose record's disk filled up still owes the
// record; guarded by tally.mu.
type diskFull struct {
	queued []int // seqs of the attempts queued when the record could take no more
	lost   int   // attempts that ended but whose results the record could not take
}

// recordFull handles a result the record could not take (a full disk): the
// first one stops dispatching (the queued attempts are taken off the
// scheduler; their skipped rows are written at the end, after the run's
// final status). The reserve is kept until then: attempts still running
// must not spend it. It reports whether err was the first; the error is
// said once, by the caller of Launch.
func (d *dispatch) recordFull(err error) bool {
	err = record.Classify(d.db.Dir, err)
	t := d.tally
	t.mu.Lock()
	first := t.recordErr == nil
	if first {
		t.recordErr = err
	}
	t.mu.Unlock()
	if first && d.disp != nil {
		var ids []int
		d.disp.With(func(s *sched.State) { ids = s.CancelAll() })
		t.mu.Lock()
		for _, id := range ids {
			t.full.queued = append(t.full.queued, d.sp.seqOf[id])
		}
		t.mu.Unlock()
		if len(ids) > 0 {
			d.tasks.check()
		}
	}
	return first
}

// resultLost is recordFull for an attempt that ended but could not be published.
func (d *dispatch) resultLost(err error) {
	d.tally.mu.Lock()
	d.tally.full.lost++
	d.tally.mu.Unlock()
	d.recordFull(err)
}

// finishOnRecordError ends a run whose record could not take results
// (record.DB.StopFull: the reserve given back, the run stopped, then the
// attempts never started published as skipped). It returns the error to
// say: the record's, joined with the final status's own failure if that
// failed too.
func (d *dispatch) finishOnRecordError() error {
	seqs, left, recordErr := d.owed()
	rows := make([]record.Attempt, 0, len(seqs))
	for _, seq := range seqs {
		rows = append(rows, d.row(d.p.BySeq(seq), status.Skipped, "not started: the record's disk is full"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	published, err := d.db.StopFull(ctx, d.runID, time.Now(), left, rows, recordErr)
	if !published {
		return err
	}
	for i := range rows {
		d.tally.mark(rows[i].Seq, status.Skipped)
		d.observe(Event{Attempt: &rows[i]})
	}
	return err
}

// owed is what a run whose record filled up still owes it: the attempts
// never started (those queued when it filled, or, when it filled before
// dispatching, every one not published), what it leaves undone, and the
// record's error.
func (d *dispatch) owed() (seqs []int, left []string, recordErr error) {
	t := d.tally
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.disp != nil {
		seqs = t.full.queued
	} else {
		for _, a := range d.p.Attempts {
			if _, done := t.published[a.Seq]; !done {
				seqs = append(seqs, a.Seq)
			}
		}
	}
	if n := len(seqs); n > 0 {
		t.left = append(t.left, fmt.Sprintf("%d attempts not started (the record's disk is full)", n))
	}
	if t.full.lost > 0 {
		t.left = append(t.left, fmt.Sprintf("%d attempts ended but the record's disk had no room for their results", t.full.lost))
	}
	return seqs, append([]string(nil), t.left...), t.recordErr
}
