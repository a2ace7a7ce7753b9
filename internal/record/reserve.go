package record

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/steward-evals/steward/internal/status"

	sysunix "golang.org/x/sys/unix"
)

// ReserveSize is the room a run keeps next to the record for its end on a
// full disk: the checkpoint that folds the write-ahead log into the
// database file (the log is held under WALLimit, a quarter of this), the
// run's final status and the skipped rows of its queued attempts, in that
// order.
const ReserveSize = 1 << 20

// ReservePath is run id's reserve beside the record in dir (runs/ID.reserve,
// next to its lock).
func ReservePath(dir, runID string) string {
	return filepath.Join(dir, "runs", runID+".reserve")
}

// Reserve allocates run id's reserve beside the record in dir; a disk too
// full for it is a full disk (ErrDiskFull), said before anything runs.
func Reserve(dir, runID string) error {
	p := ReservePath(dir, runID)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return Classify(dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return Classify(dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	err = sysunix.Fallocate(int(f.Fd()), 0, 0, ReserveSize)
	if errors.Is(err, sysunix.EOPNOTSUPP) || errors.Is(err, sysunix.ENOSYS) {
		_, err = f.Write(make([]byte, ReserveSize))
		if err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return Classify(dir, fmt.Errorf("reserve room next to the record: %w", err))
	}
	return nil
}

// Unreserve gives run id's reserve back.
func Unreserve(dir, runID string) { _ = os.Remove(ReservePath(dir, runID)) }

// StopFull ends run runID on a record that could not take a result (a full
// disk, recordErr), in the order the reserve was kept for: the reserve given
// back, the write-ahead log folded into the database file, the run recorded
// as stopped (left says what it leaves undone), and only then, in one
// transaction, the rows of the attempts never started (skipped): the final
// status is what must not be lost, and needs the least room. It returns the
// error to say: recordErr, joined (on one line) with the final status's own
// failure if that failed too, and whether the skipped rows were published.
func (r *DB) StopFull(ctx context.Context, runID string, at time.Time, left []string, skipped []Attempt, recordErr error) (published bool, _ error) {
	Unreserve(r.Dir, runID)
	_ = r.Checkpoint(ctx) // room for what follows; the status is tried whatever it says
	if err := r.FinishRun(ctx, runID, status.Stopped, at, left); err != nil {
		return false, fmt.Errorf("%w; its final status could not be recorded either (%v): the run will show as crashed", recordErr, err)
	}
	if err := r.PublishAll(ctx, skipped); err != nil {
		// The run is stopped and says how many were not started; their rows
		// show as planned but never published.
		return false, fmt.Errorf("%w; its %d skipped attempts could not be recorded (%v)", recordErr, len(skipped), err)
	}
	_ = r.Checkpoint(ctx)
	return true, recordErr
}
