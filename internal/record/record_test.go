package record

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
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
	for i, st := range []string{"passed", "failed", "errored", "interrupted"} {
		err := db.Publish(ctx, Attempt{RunID: "r1", Seq: i, Task: "t", Sample: fmt.Sprint(i), Attempt: 1, Status: st, Score: &one, Fingerprint: "fp-" + st, Finished: now})
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
		a, err := db.Judged(ctx, c.fp, c.passedOnly)
		if err != nil {
			t.Fatal(err)
		}
		if (a != nil) != c.want {
			t.Errorf("Judged(%s, %v) = %v, want found=%v", c.fp, c.passedOnly, a, c.want)
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
