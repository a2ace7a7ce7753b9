package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
)

// steward runs the command line in-process.
func steward(args ...string) (string, int) {
	var out bytes.Buffer
	code := Main(context.Background(), args, Env{Stdout: &out, Stderr: &out})
	return out.String(), code
}

// fileState is what a reader must not change: the bytes and the mtime of
// the record, and the content of its WAL (SQLite's read-only connections
// may create an empty WAL and its index beside the file; they hold nothing).
func fileState(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Sprintf("record: %s, mtime %s\n", st.Mode(), st.ModTime().Format(time.RFC3339Nano))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "record: %d bytes, sha256 %x, mtime %s\n", len(data), sha256.Sum256(data), st.ModTime().Format(time.RFC3339Nano))
	wal, err := os.ReadFile(path + "-wal")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "wal: %d bytes, sha256 %x\n", len(wal), sha256.Sum256(wal))
	return b.String()
}

// backdate sets the record's mtime an hour back, so any write shows.
func backdate(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// seed makes a record with one finished run of n attempts and a held lease.
func seed(t *testing.T, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := record.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	if err := db.StartRun(ctx, record.Run{ID: "r-seed", EvalSet: "steward.yaml", Plan: "seeded", Started: now}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := db.Publish(ctx, record.Attempt{RunID: "r-seed", Seq: i, Task: "t", Sample: fmt.Sprintf("s%03d", i), Attempt: 1, Status: "passed",
			Fingerprint: fmt.Sprint("fp", i), Finished: now, Log: strings.Repeat("log ", 200)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(ctx, "r-seed", "finished", now, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TryAcquire(ctx, "k", "r-seed", "t", 1, "h", now); err != nil {
		t.Fatal(err)
	}
}

// Readers never write: report, tend and lease inspect leave the record's
// bytes and mtime as they were (no migration, no WAL checkpoint).
func TestReadersNeverWrite(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, 40)
	path := filepath.Join(dir, record.FileName)
	backdate(t, path)
	before := fileState(t, path)
	for _, args := range [][]string{
		{"report", "--record", dir},
		{"report", "--record", dir, "--format", "json"},
		{"tend", "--record", dir},
		{"lease", "inspect", "--record", dir},
	} {
		out, code := steward(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
		if after := fileState(t, path); after != before {
			t.Fatalf("%v changed the record:\nbefore %safter  %s", args, before, after)
		}
	}
}

// A report next to writers that hold the record's write lock (one holds an
// open write transaction, two more wait for it) reads what is committed at
// once: it succeeds while the writer's transaction is still open.
func TestReportNextToWriters(t *testing.T) {
	dir := t.TempDir()
	seed(t, dir, 10)
	ctx := context.Background()
	w1, err := record.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	tx, err := w1.SQL().BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO runs(id, evalset, status, started_at) VALUES('r-uncommitted', 'x', 'running', 1)`); err != nil {
		t.Fatal(err)
	}
	var waiting sync.WaitGroup
	for i := 2; i <= 3; i++ {
		w, err := record.Open(ctx, dir) // opening does not need the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		waiting.Add(1)
		go func(i int) {
			defer waiting.Done()
			_ = w.StartRun(ctx, record.Run{ID: fmt.Sprint("r-writer-", i), EvalSet: "x", Started: time.Now()})
		}(i)
	}
	out, code := steward("report", "--record", dir, "--run", "r-seed", "--format", "json")
	if code != 0 || !strings.Contains(out, `"sample": "s009"`) {
		t.Fatalf("report while a writer holds the lock: exit %d\n%s", code, out)
	}
	if out, code := steward("tend", "--record", dir); code != 0 {
		t.Fatalf("tend while a writer holds the lock: exit %d\n%s", code, out)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	waiting.Wait()
}

// A report works on a full disk.
func TestReportOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: mounting a tmpfs for the record is required: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (not root?): %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	seed(t, dir, 40)
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 64 << 10; n >= 1; n /= 2 {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
	f.Close()
	path := filepath.Join(dir, record.FileName)
	before := fileState(t, path)
	es := filepath.Join(t.TempDir(), "steward.yaml")
	if err := os.WriteFile(es, []byte("tasks:\n  - name: x\n    sandbox: {provider: local}\n    agent: echo ok\n    scorer: {match: exact}\n    samples: [{id: a, input: \"\", target: ok}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"report", "--record", dir}, {"tend", "--record", dir}, {"lease", "inspect", "--record", dir}, {"launch", "--dry", "--record", dir, es}} {
		out, code := steward(args...)
		if code != 0 {
			t.Fatalf("%v on a full disk: exit %d\n%s", args, code, out)
		}
	}
	if !strings.Contains(func() string { o, _ := steward("report", "--record", dir); return o }(), "s039") {
		t.Fatal("the report on a full disk misses rows")
	}
	if after := fileState(t, path); after != before {
		t.Fatalf("a reader changed the record on a full disk:\nbefore %safter  %s", before, after)
	}
}

// Records Steward cannot trust are refused with a message naming the file
// (exit 3) and never written to, by readers or by launch.
func TestDamagedRecordsRefused(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"empty", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is empty (0 bytes)"},
		{"not sqlite", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 400), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a SQLite database"},
		{"corrupt", func(t *testing.T, path string) {
			seed(t, filepath.Dir(path), 200)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Scribble over the middle pages (the attempts table's b-tree).
			for i := len(data) / 3; i < 2*len(data)/3; i++ {
				data[i] = byte(i * 7)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "integrity check"},
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
		{"newer schema", func(t *testing.T, path string) {
			seed(t, filepath.Dir(path), 3)
			db, err := record.Open(context.Background(), filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().Exec(`PRAGMA user_version = 99`); err != nil {
				t.Fatal(err)
			}
			db.Close()
		}, "newer Steward (schema version 99"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := filepath.Join(dir, "rec")
			if err := os.Mkdir(rec, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(rec, record.FileName)
			c.make(t, path)
			es := filepath.Join(dir, "steward.yaml")
			if err := os.WriteFile(es, []byte("tasks:\n  - name: x\n    sandbox: {provider: local}\n    agent: echo ok\n    scorer: {match: exact}\n    samples: [{id: a, input: \"\", target: ok}]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			backdate(t, path)
			before := fileState(t, path)
			for _, args := range [][]string{
				{"report", "--record", rec},
				{"tend", "--record", rec},
				{"lease", "inspect", "--record", rec},
				{"launch", "--record", rec, es},
				{"launch", "--dry", "--record", rec, es},
			} {
				out, code := steward(args...)
				if code != ExitInfra || !strings.Contains(out, path) || !strings.Contains(out, c.want) {
					t.Errorf("%v: exit %d, want %d and a message naming %s that says %q:\n%s", args, code, ExitInfra, path, c.want, out)
				}
				if after := fileState(t, path); after != before {
					t.Fatalf("%v wrote to the refused record:\nbefore %safter  %s", args, before, after)
				}
			}
		})
	}
}

// --dry only reads: on a project without a record it plans everything as
// new and creates no record; on an existing one it leaves the file as it was.
func TestDryNeverWrites(t *testing.T) {
	dir := t.TempDir()
	es := filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(es, []byte("tasks:\n  - name: x\n    sandbox: {provider: local}\n    agent: echo ok\n    scorer: {match: exact}\n    samples: [{id: a, input: \"\", target: ok}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec")
	out, code := steward("launch", "--dry", "--record", rec, es)
	if code != 0 || !strings.Contains(out, "new") {
		t.Fatalf("--dry without a record: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatalf("--dry created the record directory (%v)", err)
	}
	seed(t, rec, 5)
	backdate(t, filepath.Join(rec, record.FileName))
	before := fileState(t, filepath.Join(rec, record.FileName))
	if out, code := steward("launch", "--dry", "--record", rec, es); code != 0 {
		t.Fatalf("--dry: exit %d\n%s", code, out)
	}
	if after := fileState(t, filepath.Join(rec, record.FileName)); after != before {
		t.Fatalf("--dry changed the record:\nbefore %safter  %s", before, after)
	}
}
