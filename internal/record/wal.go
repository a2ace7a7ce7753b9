package record

import (
	"context"
	"fmt"
	"os"
	"time"
)

// WALLimit bounds the record's write-ahead log. SQLite folds the log into
// the database file only at 1 000 pages (4 MiB) by default, and never
// shrinks it: on a small disk the log alone ate the room a run keeps for
// its end (run's reserve, 1 MiB, four times this) and, once full, held
// every later launch off. So a writer checkpoints every walAutoPages pages,
// the log file is cut back to WALLimit each time it restarts
// (journal_size_limit), and a log that grew past twice the limit anyway
// (a reader kept the checkpoint from finishing) is checkpointed in full
// after the next publish.
const WALLimit = 256 << 10

// walAutoPages is the writers' wal_autocheckpoint: 64 pages of 4 KiB,
// WALLimit.
const walAutoPages = WALLimit / 4096

// walPragmas are the DSN parameters that bound a writer's log.
var walPragmas = fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)&_pragma=journal_size_limit(%d)", walAutoPages, WALLimit)

// boundWAL checkpoints the log in full when it grew past twice WALLimit.
// The checkpoint waits for readers of older snapshots; it is tried at most
// once every walRetry and given a second, so a long reader slows no
// publish by more than that.
func (r *DB) boundWAL(ctx context.Context) {
	if r.ReadOnly {
		return
	}
	st, err := os.Stat(r.Path + "-wal")
	if err != nil || st.Size() <= 2*WALLimit {
		return
	}
	r.pub.mu.Lock()
	now := time.Now()
	if now.Sub(r.pub.lastBound) < walRetry {
		r.pub.mu.Unlock()
		return
	}
	r.pub.lastBound = now
	r.pub.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = r.db.ExecContext(cctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
}

// walRetry spaces boundWAL's checkpoints.
const walRetry = 10 * time.Second

// PublishAll commits attempts in one transaction (a run's skipped rows at
// its end: one commit, a few pages of log, where one commit each would
// write a few pages each).
func (r *DB) PublishAll(ctx context.Context, rows []Attempt) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("publish attempts: %w", err)
	}
	defer tx.Rollback()
	for _, a := range rows {
		if err := insertAttempt(ctx, tx, a); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("publish attempts: %w", err)
	}
	r.published(rows...)
	r.boundWAL(ctx)
	return nil
}
