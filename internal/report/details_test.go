package report

import (
	"context"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/transcript"
)

// Transcripts go into the record compressed, come back through the report
// model, and a carried attempt shows the transcript of the run that judged
// it; a record's version moves with every publish.
func TestTranscriptsThroughTheRecord(t *testing.T) {
	ctx := context.Background()
	db, err := record.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1000, 0)
	for _, id := range []string{"r1", "r2"} {
		if err := db.StartRun(ctx, record.Run{ID: id, EvalSet: "e", Started: now}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	v0, _ := db.Version(ctx)
	tr := transcriptFixture("")
	blob, err := transcript.Encode(tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Publish(ctx, record.Attempt{RunID: "r1", Seq: 0, Task: "t", Sample: "s", Attempt: 1, Status: "passed", Fingerprint: "fp1", Parts: `{"task":"aa"}`, Finished: now}); err != nil {
		t.Fatal(err)
	}
	v1, _ := db.Version(ctx)
	if err := db.PutTranscript(ctx, "r1", 0, record.TranscriptInfo{Calls: 2}, blob); err != nil {
		t.Fatal(err)
	}
	if err := db.PutArtifacts(ctx, "r1", 0, []record.Artifact{{Path: "out/a.txt", Size: 2, Data: []byte("hi")}, {Path: "out/b.bin", Size: 3, Data: []byte{0, 1, 2}}, {Path: "out/l", Note: "a symlink: refused"}}); err != nil {
		t.Fatal(err)
	}
	v2, _ := db.Version(ctx)
	if v0 == v1 || v1 == v2 {
		t.Errorf("record version did not move: %s %s %s", v0, v1, v2)
	}
	// r2 carried it, and has an attempt with no transcript.
	if err := db.Publish(ctx, record.Attempt{RunID: "r2", Seq: 0, Task: "t", Sample: "s", Attempt: 1, Status: "passed", Fingerprint: "fp1", CarriedFrom: "r1", Finished: now}); err != nil {
		t.Fatal(err)
	}
	if err := db.Publish(ctx, record.Attempt{RunID: "r2", Seq: 1, Task: "t", Sample: "s2", Attempt: 1, Status: "failed", Fingerprint: "fp2", Finished: now}); err != nil {
		t.Fatal(err)
	}
	// A blob that is not a transcript is reported on its attempt, not fatal.
	if err := db.PutTranscript(ctx, "r2", 1, record.TranscriptInfo{}, []byte("not gzip")); err != nil {
		t.Fatal(err)
	}
	rep, err := FromRecord(ctx, db, []string{"r1", "r2"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := LoadTranscripts(ctx, db, rep); err != nil {
		t.Fatal(err)
	}
	a := rep.Attempts
	if len(a) != 3 || a[0].Details.Transcript == nil || len(a[0].Details.Transcript.Calls) != 2 || a[0].Details.Parts["task"] != "aa" {
		t.Fatalf("r1's attempt: %+v", a[0].Details)
	}
	if a[1].Details.CarriedFrom != "r1" || a[1].Details.Transcript == nil || string(a[1].Details.Transcript.Calls[0].Request) != string(tr.Calls[0].Request) {
		t.Errorf("the carried attempt does not show the transcript it was judged with: %+v", a[1].Details)
	}
	for i := 0; i < 2; i++ {
		arts := a[i].Details.Artifacts
		if len(arts) != 3 || arts[0].Text != "hi" || !arts[1].Binary || arts[1].Text != "" || arts[2].Note != "a symlink: refused" {
			t.Errorf("attempt %d artifacts: %+v", i, arts)
		}
	}
	if a[2].Details.Transcript != nil || a[2].Details.TranscriptError == "" {
		t.Errorf("an unreadable transcript: %+v", a[2].Details)
	}
}
