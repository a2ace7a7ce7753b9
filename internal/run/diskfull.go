package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// reserveSize is the room a run keeps next to the record for the end of a
// run on a full disk: the skipped rows of its queued attempts and its final
// status need room that a full disk no longer has.
const reserveSize = 1 << 20

func (l *launcher) reservePath() string {
	return filepath.Join(l.db.Dir, "runs", l.runID+".reserve")
}

// reserveRoom allocates the reserve; a disk too full for it is a full disk,
// said before anything runs.
func (l *launcher) reserveRoom() error {
	p := l.reservePath()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return record.Classify(l.db.Dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return record.Classify(l.db.Dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveSize)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		_, err = f.Write(make([]byte, reserveSize))
		if err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return record.Classify(l.db.Dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	return nil
}

func (l *launcher) releaseRoom() { _ = os.Remove(l.reservePath()) }

// recordFull handles the first result the record could not take (a full
// disk): nothing more is dispatched, the reserve is given back so the queued
// attempts can be recorded as skipped and the run's status made final. It
// reports whether err was the first; the error is said once, by the caller
// of Launch.
func (l *launcher) recordFull(err error) bool {
	err = record.Classify(l.db.Dir, err)
	l.mu.Lock()
	first := l.recordErr == nil
	if first {
		l.recordErr = err
	}
	l.mu.Unlock()
	if first {
		l.releaseRoom()
	}
	return first
}

// finishOnRecordError ends a run whose record could not take results: every
// attempt not yet published is recorded as skipped (when there is room) and
// the run is marked stopped, so nothing reads it as running or crashed.
func (l *launcher) finishOnRecordError() {
	reason := "not started: the record's disk is full"
	if l.disp != nil {
		l.cancelQueued(reason)
	} else {
		var n int
		for _, a := range l.p.Attempts {
			l.mu.Lock()
			_, done := l.published[a.Seq]
			l.mu.Unlock()
			if done {
				continue
			}
			n++
			_ = l.publish(context.Background(), record.Attempt{
				RunID: l.runID, Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
				Status: status.Skipped, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(),
				Finished: time.Now(), Source: a.Sample.Source,
			})
		}
		if n > 0 {
			l.left = append(l.left, fmt.Sprintf("%d attempts not started (the record's disk is full)", n))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = l.db.FinishRun(ctx, l.runID, status.Stopped, time.Now(), l.left)
}
