package record

import (
	"context"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// TestRunStatusesThroughSQL: run statuses are written and read as the typed
// vocabulary, and MarkCrashed changes only a run still running.
func TestRunStatusesThroughSQL(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1000, 0)
	for _, id := range []string{"live", "done", "gone"} {
		if err := db.StartRun(ctx, Run{ID: id, EvalSet: "e", Started: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(ctx, "done", status.Stopped, now.Add(time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.MarkCrashed(ctx, "gone", "owner gone", now.Add(2*time.Second)); err != nil || !ok {
		t.Fatalf("MarkCrashed(gone) = %v, %v; want true", ok, err)
	}
	if ok, err := db.MarkCrashed(ctx, "done", "owner gone", now.Add(2*time.Second)); err != nil || ok {
		t.Fatalf("MarkCrashed(done) = %v, %v; want false (a finished run is never changed)", ok, err)
	}
	runs, err := db.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]status.Run{"live": status.Running, "done": status.Stopped, "gone": status.Crashed}
	if len(runs) != len(want) {
		t.Fatalf("runs %+v", runs)
	}
	for _, r := range runs {
		if r.Status != want[r.ID] {
			t.Errorf("run %s: status %q, want %q", r.ID, r.Status, want[r.ID])
		}
	}
}
