package record

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

func logRow(run string, seq int) Attempt {
	return Attempt{RunID: run, Seq: seq, Task: "t", Sample: fmt.Sprintf("s%03d", seq), Attempt: 1, Status: status.Passed,
		Fingerprint: fmt.Sprintf("fp-%d", seq), Finished: time.Unix(int64(1000+seq), 0), Log: strings.Repeat("y", 4<<10)}
}

func walSize(t *testing.T, db *DB) int64 {
	t.Helper()
	st, err := os.Stat(db.Path + "-wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The write-ahead log stays bounded while a run publishes (SQLite's own
// default folds it only at 1 000 pages, 4 MiB, and never shrinks it: on a
// small disk it ate the room kept for the run's end), and a writer's close
// leaves none.
func TestWALStaysBounded(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.StartRun(ctx, Run{ID: "r1", EvalSet: "e", Started: time.Unix(1000, 0)}); err != nil {
		t.Fatal(err)
	}
	var most int64
	for i := 0; i < 400; i++ {
		if err := db.Publish(ctx, logRow("r1", i)); err != nil {
			t.Fatal(err)
		}
		most = max(most, walSize(t, db))
	}
	if most > 2*WALLimit {
		t.Errorf("the log grew to %d bytes while 400 attempts of 4 KiB were published, want at most %d", most, 2*WALLimit)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := walSize(t, db); n != 0 {
		t.Errorf("%d bytes of log left after close", n)
	}
	if _, err := os.Stat(countsDir(db.Dir)); err == nil {
		if ents, _ := os.ReadDir(countsDir(db.Dir)); len(ents) != 0 {
			t.Errorf("published counts left after a close that folded the log: %v", ents)
		}
	}
}

// copyRecord copies a record's files as a writer killed at this moment
// leaves them (the log not folded, the counts beside it).
func copyRecord(t *testing.T, from, to string) {
	t.Helper()
	for _, name := range []string{FileName, FileName + "-wal"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(countsDir(from))
	if err := os.MkdirAll(countsDir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(countsDir(from), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(countsDir(to), e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// One byte flipped in a killed run's write-ahead log makes SQLite drop the
// damaged frame and every commit after it, and the record passes every check
// SQLite has. Each frame of a real log is damaged in turn: the record is
// then either read whole (the frame held nothing SQLite needed) or refused
// as unusable, naming the damaged log, by readers and writers alike, and
// left as it was; never read with attempts missing.
func TestDamagedWALIsNeverSilent(t *testing.T) {
	ctx := context.Background()
	live := t.TempDir()
	db, err := Open(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.StartRun(ctx, Run{ID: "r1", EvalSet: "e", Started: time.Unix(1000, 0)}); err != nil {
		t.Fatal(err)
	}
	const n = 36
	for i := 0; i < n; i++ {
		a := logRow("r1", i)
		a.Log = fmt.Sprintf("attempt %d", i)
		if err := db.Publish(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	intact := t.TempDir()
	copyRecord(t, live, intact)
	wal, err := os.ReadFile(filepath.Join(intact, FileName+"-wal"))
	if err != nil {
		t.Fatal(err)
	}
	const header, frameHeader, page = 32, 24, 4096
	frames := (len(wal) - header) / (frameHeader + page)
	if frames < 3 {
		t.Fatalf("the log holds %d frames (%d bytes): nothing to damage", frames, len(wal))
	}
	// The intact copy reads whole.
	if ro, err := OpenReadOnly(ctx, intact); err != nil {
		t.Fatalf("the intact copy: %v", err)
	} else {
		as, err := ro.Attempts(ctx, "r1")
		ro.Close()
		if err != nil || len(as) != n {
			t.Fatalf("the intact copy holds %d attempts (%v), want %d", len(as), err, n)
		}
	}
	// A byte in the log's header, then one in each frame's page, and one
	// in each frame's header (its checksum).
	offsets := []int{header - 4}
	for f := 0; f < frames; f++ {
		at := header + f*(frameHeader+page)
		offsets = append(offsets, at+frameHeader+page/2, at+20)
	}
	refused := 0
	for _, off := range offsets {
		dir := t.TempDir()
		copyRecord(t, intact, dir)
		walPath := filepath.Join(dir, FileName+"-wal")
		b := append([]byte(nil), wal...)
		b[off] ^= 0x01
		if err := os.WriteFile(walPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ro, err := OpenReadOnly(ctx, dir)
		if err != nil {
			if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), "write-ahead log") || !strings.Contains(err.Error(), "the record holds") {
				t.Fatalf("byte %d flipped: the record is refused, but not as a damaged log: %v", off, err)
			}
			refused++
			// A writer refuses it too, and nothing is changed.
			if w, err := Open(ctx, dir); err == nil {
				w.Close()
				t.Fatalf("byte %d flipped: a writer opened the damaged record", off)
			}
			if got, _ := os.ReadFile(walPath); string(got) != string(b) {
				t.Fatalf("byte %d flipped: the damaged log was changed", off)
			}
			continue
		}
		as, err := ro.Attempts(ctx, "r1")
		ro.Close()
		if err != nil {
			t.Fatalf("byte %d flipped: %v", off, err)
		}
		if len(as) != n {
			t.Fatalf("byte %d flipped: the record reads as if whole with %d of %d attempts", off, len(as), n)
		}
	}
	if refused == 0 {
		t.Fatalf("no flipped byte made a difference (%d tried)", len(offsets))
	}
	t.Logf("%d frames, %d bytes flipped one at a time, %d refused, the rest read whole", frames, len(offsets), refused)
}
