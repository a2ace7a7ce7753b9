package record

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrUnusable marks a record Steward refuses to read or write: empty, not a
// SQLite database, failing SQLite's integrity check, or written by a newer
// Steward. The file is left exactly as it was.
var ErrUnusable = errors.New("unusable record")

// ErrNoRecord is returned by OpenReadOnly when the record does not exist.
var ErrNoRecord = errors.New("no record")

// sqliteMagic opens every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

func unusable(path, why string) error {
	return fmt.Errorf("%w %s: %s; Steward has not changed it: move it aside (keep it to inspect) to start a new record, or restore a good copy", ErrUnusable, path, why)
}

// Open opens the record in dir for writing, creating and migrating it as
// needed. An existing record is checked first, without writing to it: an
// empty file, a file that is not a SQLite database, one that fails SQLite's
// quick_check or one with a newer schema is refused (ErrUnusable).
func Open(ctx context.Context, dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open record: %w", Classify(dir, err))
	}
	path := filepath.Join(dir, FileName)
	if err := create(ctx, dir, path); err != nil {
		return nil, err
	}
	// Check it read-only before the first write.
	ro, err := OpenReadOnly(ctx, dir)
	if err != nil {
		return nil, err
	}
	ro.Close()
	dsn := "file:" + escapePath(path) + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)" + walPragmas + "&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open record %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	r := &DB{db: db, Dir: dir, Path: path}
	// Another invocation may be migrating the same record (S6): retry while
	// it holds the lock rather than fail.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.migrate(ctx)
		if err == nil {
			return r, nil
		}
		if errors.Is(err, ErrUnusable) {
			db.Close()
			return nil, err
		}
		if !isBusy(err) || time.Now().After(deadline) || ctx.Err() != nil {
			db.Close()
			return nil, fmt.Errorf("open record %s: %w", path, Classify(dir, err))
		}
		time.Sleep(time.Duration(20+mrand.IntN(80)) * time.Millisecond)
	}
}

// create makes a new record atomically: the schema is written to a private
// file that is then linked into place, so no invocation ever sees a
// half-made record (an empty record.sqlite is therefore damage, not a race).
func create(ctx context.Context, dir, path string) error {
	if _, err := os.Lstat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil // exists (or cannot be examined: the checks will say why)
	}
	tmp := filepath.Join(dir, "."+FileName+".new-"+NewID(""))
	defer func() {
		for _, suf := range []string{"", "-wal", "-shm", "-journal"} {
			_ = os.Remove(tmp + suf)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+escapePath(tmp)+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("create record %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	r := &DB{db: db, Dir: dir, Path: tmp}
	if err := r.migrate(ctx); err != nil {
		db.Close()
		return fmt.Errorf("create record %s: %w", path, Classify(dir, err))
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		db.Close()
		return fmt.Errorf("create record %s: %w", path, Classify(dir, err))
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("create record %s: %w", path, Classify(dir, err))
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create record %s: %w", path, Classify(dir, err))
	}
	return nil
}

// OpenReadOnly opens the record in dir for reading only (reports, tend,
// lease inspect, --dry): no migration, no write transaction, no checkpoint,
// so it works on a full disk and never waits behind writers (WAL readers do
// not block). The record's file is never changed. A record that does not
// exist is ErrNoRecord; one Steward cannot trust is ErrUnusable.
func OpenReadOnly(ctx context.Context, dir string) (*DB, error) {
	path := filepath.Join(dir, FileName)
	if err := checkFile(path); err != nil {
		return nil, err
	}
	r, err := openRO(ctx, dir, path, false)
	if err != nil && !errors.Is(err, ErrUnusable) && !isBusy(err) && walEmpty(path) {
		// No writer has left anything in the WAL, but SQLite could not set
		// up its shared index beside the file (a full disk, a read-only
		// directory): read the database file alone. (Not when another
		// connection holds a lock: that one may be about to write.)
		if r2, err2 := openRO(ctx, dir, path, true); err2 == nil {
			return r2, nil
		}
	}
	return r, err
}

func openRO(ctx context.Context, dir, path string, immutable bool) (*DB, error) {
	q := "?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(1)"
	if immutable {
		q = "?mode=ro&immutable=1&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+q)
	if err != nil {
		return nil, fmt.Errorf("open record %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	r := &DB{db: db, Dir: dir, Path: path, ReadOnly: true}
	if err := r.check(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

// checkFile refuses a missing, empty or non-SQLite file before SQLite opens it.
func checkFile(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w at %s: launch an eval set first, or pass --record", ErrNoRecord, path)
	}
	if err != nil {
		return fmt.Errorf("open record %s: %w", path, err)
	}
	if !st.Mode().IsRegular() { // a directory, a FIFO (opening it would block), a device
		return unusable(path, "is not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open record %s: %w", path, err)
	}
	defer f.Close()
	if st.Size() == 0 {
		return unusable(path, "is empty (0 bytes)")
	}
	head := make([]byte, len(sqliteMagic))
	if n, _ := f.ReadAt(head, 0); n < len(head) || !bytes.Equal(head, sqliteMagic) {
		return unusable(path, "is not a SQLite database")
	}
	return nil
}

// walEmpty says the record's WAL holds nothing (absent or 0 bytes).
func walEmpty(path string) bool {
	st, err := os.Stat(path + "-wal")
	return errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0)
}

// check reads the schema version and runs SQLite's quick_check.
func (r *DB) check(ctx context.Context) error {
	var v int
	if err := r.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return r.readErr(err)
	}
	if v > len(migrations) {
		return fmt.Errorf("%w %s: it was written by a newer Steward (schema version %d; this one knows up to %d): upgrade steward to read it; Steward has not changed it", ErrUnusable, r.Path, v, len(migrations))
	}
	if v == 0 {
		return unusable(r.Path, "is a SQLite database but not a Steward record (no schema)")
	}
	rows, err := r.db.QueryContext(ctx, `PRAGMA quick_check(20)`)
	if err != nil {
		return r.readErr(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return r.readErr(err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return r.readErr(err)
	}
	if len(problems) > 0 {
		return unusable(r.Path, "fails SQLite's integrity check ("+strings.Join(problems, "; ")+")")
	}
	r.version = v
	// What SQLite dropped from a damaged log passes its checks: the
	// published-attempt counts kept apart from the log see it.
	return r.checkCounts(ctx)
}

// readErr names damage SQLite reports while reading (SQLITE_CORRUPT,
// SQLITE_NOTADB) as an unusable record; other errors are wrapped.
func (r *DB) readErr(err error) error {
	if isCorrupt(err) {
		return unusable(r.Path, "is damaged ("+err.Error()+")")
	}
	return fmt.Errorf("read record %s: %w", r.Path, Classify(r.Dir, err))
}

func isCorrupt(err error) bool {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		switch c.Code() & 0xff {
		case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "malformed") || strings.Contains(msg, "not a database")
}

func escapePath(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

func isBusy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// migrate brings the schema up to date. It writes only when the record is
// behind: an up-to-date record is not written to at all.
func (r *DB) migrate(ctx context.Context) error {
	var v int
	if err := r.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v == len(migrations) {
		r.version = v
		return nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("%w %s: it was written by a newer Steward (schema version %d; this one knows up to %d): upgrade steward", ErrUnusable, r.Path, v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.version = len(migrations)
	return nil
}

// Close closes the record. A writer first checkpoints the WAL into the main
// file (so the file can be copied, S6); a reader changes nothing.
// Once the whole log is in the file, the published-attempt counts that the
// file now holds in full are removed (published.go).
func (r *DB) Close() error {
	if !r.ReadOnly {
		if r.checkpoint(context.Background()) == nil {
			r.pruneCounts(context.Background())
		}
	}
	return r.db.Close()
}

// Checkpoint folds the WAL into the database file and truncates it.
func (r *DB) Checkpoint(ctx context.Context) error {
	if r.ReadOnly {
		return nil
	}
	return r.checkpoint(ctx)
}

// checkpoint is a TRUNCATE checkpoint; it fails when it could not fold the
// whole log (a reader or writer kept it busy).
func (r *DB) checkpoint(ctx context.Context) error {
	var busy, logPages, done int
	if err := r.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil {
		return Classify(r.Dir, fmt.Errorf("checkpoint the record: %w", err))
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint the record: busy (%d of %d log pages folded)", done, logPages)
	}
	return nil
}
