package record

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// A run stopped on a full disk gives its reserve back, is recorded as
// stopped with what it left undone, and its attempts never started are
// published as skipped; the record's error is what is said.
func TestStopFull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1000, 0)
	if err := db.StartRun(ctx, Run{ID: "r1", EvalSet: "e", Started: now}); err != nil {
		t.Fatal(err)
	}
	if err := Reserve(dir, "r1"); err != nil {
		t.Fatal(err)
	}
	full := errors.New("the record's disk is full")
	skipped := []Attempt{{RunID: "r1", Seq: 3, Task: "t", Sample: "s", Attempt: 1, Status: status.Skipped, Reason: "not started", Finished: now}}
	published, err := db.StopFull(ctx, "r1", now, []string{"1 attempts not started"}, skipped, full)
	if err != full || !published {
		t.Fatalf("StopFull = %v, %v; want the record's error, published", published, err)
	}
	if _, err := os.Stat(ReservePath(dir, "r1")); !os.IsNotExist(err) {
		t.Errorf("the reserve is still there: %v", err)
	}
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Status != status.Stopped || !strings.Contains(runs[0].Left, "1 attempts not started") {
		t.Errorf("runs %+v, %v", runs, err)
	}
	as, err := db.Attempts(ctx, "r1")
	if err != nil || len(as) != 1 || as[0].Seq != 3 || as[0].Status != status.Skipped {
		t.Errorf("attempts %+v, %v", as, err)
	}
	// A final status the record cannot take either is said with the
	// record's error, on one line, and nothing is published.
	db.Close()
	published, err = db.StopFull(ctx, "r1", now, nil, skipped, full)
	if published || !errors.Is(err, full) || !strings.Contains(err.Error(), "its final status could not be recorded either") || strings.Contains(err.Error(), "\n") {
		t.Errorf("StopFull on a closed record = %v, %v", published, err)
	}
}
