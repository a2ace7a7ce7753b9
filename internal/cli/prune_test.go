package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// steward prune: --dry changes nothing; prune drops the old run's
// transcripts and leaves `steward flaky` saying exactly what it said; only
// the named eval set's runs are touched; a missing record is bad input
// (issue 23 item 12).
func TestPruneCommand(t *testing.T) {
	dir, evalSet := seedFlaky(t)
	rec := filepath.Join(dir, ".steward")
	ctx := context.Background()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"r1", "o1"} {
		if err := db.PutTranscript(ctx, run, 0, record.TranscriptInfo{Calls: 1, RawBytes: 10}, []byte("transcript of "+run)); err != nil {
			t.Fatal(err)
		}
	}
	// The runs ended; the other eval set has a name of its own (a record
	// that moved with its checkout counts a missing eval set of the same
	// file name as this one: ofEvalSet).
	for _, run := range []string{"r1", "r2", "o1"} {
		if err := db.FinishRun(ctx, run, status.Finished, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.SQL().Exec(`UPDATE runs SET evalset='/elsewhere/other.yaml' WHERE id='o1'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	flakyBefore, code := steward("flaky", "--record", rec)
	if code != ExitOK {
		t.Fatalf("flaky: exit %d\n%s", code, flakyBefore)
	}

	out, code := steward("prune", evalSet, "--record", rec, "--keep-runs", "1", "--keep-transcripts", "0", "--dry")
	if code != ExitOK || !strings.Contains(out, "would drop") || !strings.Contains(out, "1 transcripts") {
		t.Fatalf("prune --dry: exit %d\n%s", code, out)
	}
	out, code = steward("prune", evalSet, "--record", rec, "--keep-runs", "1", "--keep-transcripts", "0")
	if code != ExitOK || !strings.Contains(out, "dropped") || !strings.Contains(out, "1 transcripts") || !strings.Contains(out, "the record went from") {
		t.Fatalf("prune: exit %d\n%s", code, out)
	}
	if after, _ := steward("flaky", "--record", rec); after != flakyBefore {
		t.Errorf("steward flaky after prune:\n%s\nwant\n%s", after, flakyBefore)
	}
	db, err = record.OpenReadOnly(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for run, want := range map[string]bool{"r1": false, "o1": true} {
		_, blob, err := db.TranscriptOf(ctx, record.Attempt{RunID: run, Seq: 0})
		if err != nil || (blob != nil) != want {
			t.Errorf("run %s's transcript kept %v, want %v (%v)", run, blob != nil, want, err)
		}
	}
	if out, code := steward("prune", evalSet, "--record", rec, "--keep-runs", "1", "--keep-transcripts", "0"); code != ExitOK || !strings.Contains(out, "nothing to drop") {
		t.Errorf("second prune: exit %d\n%s", code, out)
	}
	if out, code := steward("prune", "--record", filepath.Join(dir, "none")); code != ExitBadInput {
		t.Errorf("prune of no record: exit %d\n%s", code, out)
	}
	if out, code := steward("prune", "--record", rec, "--keep-runs", "0"); code != ExitBadInput {
		t.Errorf("--keep-runs 0: exit %d\n%s", code, out)
	}
}
