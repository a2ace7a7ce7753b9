package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

func TestPublishAndCarry(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1000, 0)
	if err := db.StartRun(ctx, Run{ID: "r1", EvalSet: "e", Started: now}); err != nil {
		t.Fatal(err)
	}
	one := 1.0
	for i, st := range []status.Attempt{status.Passed, status.Failed, status.Errored, status.Interrupted} {
		err := db.Publish(ctx, Attempt{RunID: "r1", Seq: i, Task: "t", Sample: fmt.Sprint(i), Attempt: 1, Status: st, Score: &one, Fingerprint: "fp-" + string(st), Finished: now})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		fp         string
		passedOnly bool
		want       bool
	}{
		{"fp-passed", false, true}, {"fp-failed", false, true}, {"fp-errored", false, false},
		{"fp-interrupted", false, false}, {"fp-failed", true, false}, {"fp-passed", true, true}, {"nope", false, false},
	} {
		cs, err := db.Carryable(ctx, []string{c.fp}, c.passedOnly, false)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := cs.Judged[c.fp]; ok != c.want || (ok && (a.RunID != "r1" || a.Producer != "r1")) {
			t.Errorf("Carryable(%s, %v) = %+v, want found=%v", c.fp, c.passedOnly, a, c.want)
		}
	}
	as, _ := db.Attempts(ctx, "r1")
	if len(as) != 4 || as[0].Score == nil || *as[0].Score != 1 || as[3].Status != "interrupted" {
		t.Fatalf("attempts %+v", as)
	}
}

func TestLeases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := Open(ctx, dir)
	defer a.Close()
	b, _ := Open(ctx, dir) // a second invocation on the same record
	defer b.Close()
	now := time.Now()
	tok, err := a.TryAcquire(ctx, "k", "r1", "t", 1, "h", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "k", "r2", "t", 2, "h", now); err != ErrLeaseHeld {
		t.Fatalf("second acquire: %v", err)
	}
	if err := b.Recover(ctx, "k", "wrong"); err == nil {
		t.Fatal("wrong token recovered the lease")
	}
	ls, _ := b.Leases(ctx, "k")
	if len(ls) != 1 || ls[0].Token != tok {
		t.Fatalf("inspect %+v", ls)
	}
	if err := b.Recover(ctx, "k", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "k", "r2", "t", 2, "h", now); err != nil {
		t.Fatal(err)
	}
}

// Several writers on one record at once (S6) lose nothing.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			db, err := Open(ctx, dir)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			for i := 0; i < 50; i++ {
				if err := db.Publish(ctx, Attempt{RunID: fmt.Sprint("r", w), Seq: i, Task: "t", Sample: "s", Status: "passed", Fingerprint: "f"}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	db, _ := Open(ctx, dir)
	defer db.Close()
	for w := 0; w < 8; w++ {
		as, _ := db.Attempts(ctx, fmt.Sprint("r", w))
		if len(as) != 50 {
			t.Fatalf("writer %d: %d attempts", w, len(as))
		}
	}
}

// A reader opens a record of an older schema without migrating it and reads
// its attempts; a writer then migrates it, and rows that an older Steward
// copied when it carried them are carried from the run that produced them.
func TestOlderRecordReadWithoutMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], `PRAGMA user_version = 1`,
		`INSERT INTO runs(id, evalset, status, started_at) VALUES('r1','e','finished',1), ('r2','e','finished',2)`,
		`INSERT INTO attempts(run_id, seq, task, sample, attempt, status, fingerprint, finished_at, log, cost_usd) VALUES('r1', 0, 't', 's', 1, 'passed', 'fp', 10, 'the log', 0.5)`,
		// An older Steward carried it by copying the row (tokens zeroed).
		`INSERT INTO attempts(run_id, seq, task, sample, attempt, status, fingerprint, finished_at, log, carried_from) VALUES('r2', 0, 't', 's', 1, 'passed', 'fp', 20, 'the log', 'r1')`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	ro, err := OpenReadOnly(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ro.Attempts(ctx, "r2")
	if err != nil || len(as) != 1 || as[0].CarriedFrom != "r1" || as[0].Log != "the log" {
		t.Fatalf("read an older record: %+v %v", as, err)
	}
	// It predates transcripts and artifacts: a reader sees none, not an error.
	if _, blob, err := ro.TranscriptOf(ctx, as[0]); err != nil || blob != nil {
		t.Fatalf("transcript of an older record: %v %v", blob, err)
	}
	if arts, err := ro.Artifacts(ctx, as[0]); err != nil || len(arts) != 0 {
		t.Fatalf("artifacts of an older record: %v %v", arts, err)
	}
	if _, err := ro.Version(ctx); err != nil {
		t.Fatalf("version of an older record: %v", err)
	}
	var v int
	ro.SQL().QueryRow(`PRAGMA user_version`).Scan(&v)
	ro.Close()
	if v != 1 {
		t.Fatalf("a reader migrated the record to version %d", v)
	}
	w, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := w.Carryable(ctx, []string{"fp"}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Judged["fp"]; s.Producer != "r1" || s.RunID != "r2" {
		t.Fatalf("carry source %+v: want the newest row (r2) and its producer r1", s)
	}
	if err := w.StartRun(ctx, Run{ID: "r3", EvalSet: "e", Started: time.Unix(3, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := w.PublishCarried(ctx, []Ref{{RunID: "r3", Seq: 0, SrcRun: "r2", SrcSeq: 0}}); err != nil {
		t.Fatal(err)
	}
	as, err = w.Attempts(ctx, "r3")
	if err != nil || len(as) != 1 || as[0].RunID != "r3" || as[0].CarriedFrom != "r1" || as[0].Log != "the log" {
		t.Fatalf("carried through a reference: %+v %v", as, err)
	}
}

// A new record appears whole: a reader never sees a half-made one, even
// while several invocations create it at once.
func TestRecordCreatedWhole(t *testing.T) {
	ctx := context.Background()
	for trial := 0; trial < 5; trial++ {
		dir := t.TempDir()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := 0; w < 4; w++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				db, err := Open(ctx, dir)
				if err != nil {
					errs <- err
					return
				}
				db.Close()
			}()
			go func() {
				defer wg.Done()
				db, err := OpenReadOnly(ctx, dir)
				if errors.Is(err, ErrNoRecord) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("a reader saw a half-made record: %w", err)
					return
				}
				db.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		left, _ := filepath.Glob(filepath.Join(dir, ".*new*"))
		if len(left) > 0 {
			t.Fatalf("creation left %v", left)
		}
	}
}
