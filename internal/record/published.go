package record

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Published-attempt counts: a count, per run, of the attempts a writer
// has published, kept outside the write-ahead log's reach so that damage to
// the log is never silent. SQLite reads the log up to the first frame whose
// checksum fails and drops every frame after it without a word: one byte
// flipped in a killed run's log made every later commit vanish, and a report
// of 0 attempts looked like any other. Each run's count sits in a small file
// of its own (record.sqlite-published/RUN), written after the commit it
// counts once the log holding that commit is on disk (fsync), so the file
// never claims more than the record can hold, even after a power loss. An
// opener that finds a run holding fewer attempts than its count refuses the
// record (ErrUnusable) before anything reads or writes it. A writer that
// folds the whole log into the database file on close removes the counts
// it has just verified: they guard only what the log holds.

// countsDir is the directory of the record's published-attempt counts.
func countsDir(dir string) string { return filepath.Join(dir, FileName+"-published") }

// pubCounts is one writer's counts: the distinct seqs it published, per run.
type pubCounts struct {
	mu   sync.Mutex
	seqs map[string]map[int]bool
	// lastBound is when boundWAL last tried a full checkpoint (wal.go).
	lastBound time.Time
}

// published counts rows this writer has committed and writes their runs'
// counts. Failures are ignored: a count that is missing or behind only
// weakens the check, never fails it.
func (r *DB) published(rows ...Attempt) {
	if r.ReadOnly || len(rows) == 0 {
		return
	}
	r.pub.mu.Lock()
	defer r.pub.mu.Unlock()
	if r.pub.seqs == nil {
		r.pub.seqs = map[string]map[int]bool{}
	}
	runs := map[string]bool{}
	for _, a := range rows {
		m := r.pub.seqs[a.RunID]
		if m == nil {
			m = map[int]bool{}
			r.pub.seqs[a.RunID] = m
		}
		m[a.Seq] = true
		runs[a.RunID] = true
	}
	// The commits counted must be on disk before the count is.
	wal, err := os.OpenFile(r.Path+"-wal", os.O_RDONLY, 0)
	if err != nil {
		return
	}
	err = wal.Sync()
	wal.Close()
	if err != nil {
		return
	}
	if os.MkdirAll(countsDir(r.Dir), 0o755) != nil {
		return
	}
	for run := range runs {
		writeCount(filepath.Join(countsDir(r.Dir), run), len(r.pub.seqs[run]))
	}
}

// writeCount overwrites a count in place: always 21 bytes, one write.
func writeCount(path string, n int) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteAt([]byte(fmt.Sprintf("%020d\n", n)), 0)
	_ = f.Close()
}

// safeRunID says whether a run id can name a count file.
func safeRunID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/\\\x00") && id != "." && id != ".."
}

// startCount writes a run's count of zero when it starts, while there is
// room, so its later counts overwrite a block it already has.
func (r *DB) startCount(runID string) {
	if r.ReadOnly || !safeRunID(runID) || os.MkdirAll(countsDir(r.Dir), 0o755) != nil {
		return
	}
	p := filepath.Join(countsDir(r.Dir), runID)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		writeCount(p, 0)
	}
}

// readCounts reads the record's published-attempt counts (unreadable
// ones are skipped: they prove nothing).
func readCounts(dir string) map[string]int {
	ents, err := os.ReadDir(countsDir(dir))
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, e := range ents {
		if !e.Type().IsRegular() || !safeRunID(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(countsDir(dir), e.Name()))
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 0 {
			continue
		}
		out[e.Name()] = n
	}
	return out
}

// heldCount is how many attempts the record holds for a run (its own rows
// and its carried references).
func (r *DB) heldCount(ctx context.Context, runID string) (int, error) {
	q := `SELECT count(*) FROM attempts WHERE run_id=?`
	args := []any{runID}
	if hasCarries(r.version) {
		q = `SELECT (SELECT count(*) FROM attempts WHERE run_id=?) + (SELECT count(*) FROM carries WHERE run_id=?)`
		args = append(args, runID)
	}
	var n int
	err := r.db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// checkCounts refuses a record that holds fewer attempts of a run than its
// writer published: its log was damaged and SQLite dropped what followed.
func (r *DB) checkCounts(ctx context.Context) error {
	counts := readCounts(r.Dir)
	var missing []string
	for run, want := range counts {
		if want == 0 {
			continue
		}
		got, err := r.heldCount(ctx, run)
		if err != nil {
			return r.readErr(err)
		}
		if got < want {
			missing = append(missing, fmt.Sprintf("run %s published %d attempts, the record holds %d", run, want, got))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := "its write-ahead log (" + filepath.Base(r.Path) + "-wal) is damaged: SQLite stopped reading it at the damage and dropped every later commit (" +
		strings.Join(missing, "; ") + "; the counts are in " + countsDir(r.Dir) + ": remove it only if you put an older copy of the record here on purpose)"
	return unusable(r.Path, why)
}

// pruneCounts, after a checkpoint that folded the whole log into the
// database file, removes the counts the record now holds in full.
func (r *DB) pruneCounts(ctx context.Context) {
	for run, want := range readCounts(r.Dir) {
		if got, err := r.heldCount(ctx, run); err == nil && got >= want {
			_ = os.Remove(filepath.Join(countsDir(r.Dir), run))
		}
	}
}
