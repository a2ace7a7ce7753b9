package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// seedCompare makes a record of two runs of one task of 40 samples: base
// passes 38, head (with other parts: the agent changed) passes 20.
func seedCompare(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for i, id := range []string{"base1", "head1"} {
		if err := db.StartRun(ctx, record.Run{ID: id, EvalSet: "steward.yaml", Started: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 40; s++ {
			st := status.Passed
			if (id == "base1" && s >= 38) || (id == "head1" && s >= 20) {
				st = status.Failed
			}
			parts := fmt.Sprintf(`{"task":"t-%s","sample":"s"}`, id)
			if err := db.Publish(ctx, record.Attempt{RunID: id, Seq: s, Task: "qa", Sample: fmt.Sprintf("q%02d", s), Attempt: 1, Status: st,
				Fingerprint: fmt.Sprintf("%s-%d", id, s), Parts: parts, Finished: t0.Add(time.Duration(i)*time.Hour + time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishRun(ctx, id, status.Finished, t0.Add(time.Duration(i)*time.Hour+2*time.Minute), nil); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCompareRuns(t *testing.T) {
	dir := seedCompare(t)
	rec := filepath.Join(dir, ".steward")
	out, code := steward("compare", rec, "base1", "head1")
	if code != 0 || !strings.HasPrefix(out, "REGRESSED: Regressed at 95% confidence: qa fell 95.0% → 50.0% (−45.0 pts") || !strings.Contains(out, "newly failing (18):") {
		t.Fatalf("compare: exit %d\n%s", code, out)
	}
	out, code = steward("compare", "--record", rec, "--format", "json", "previous", "newest")
	var c struct {
		Verdict string `json:"verdict"`
		Tasks   []struct {
			Test struct {
				Method     string `json:"method"`
				Discordant int    `json:"discordant"`
			} `json:"test"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || code != 0 || c.Verdict != "regressed" || c.Tasks[0].Test.Method != "exact McNemar" || c.Tasks[0].Test.Discordant != 18 {
		t.Fatalf("compare --format json: exit %d, %v\n%s", code, err, out)
	}
	// A run against itself: every observation shared, unchanged.
	if out, code := steward("compare", rec, "head1", "head1"); code != 0 || !strings.HasPrefix(out, "UNCHANGED:") {
		t.Errorf("a run against itself: exit %d\n%s", code, out)
	}
	if out, code := steward("compare", rec, "base1", "nope"); code != ExitBadInput || !strings.Contains(out, "run nope: no such run") {
		t.Errorf("unknown run: exit %d\n%s", code, out)
	}
	if out, code := steward("compare", rec, "base1", "head1", "--min-effect", "x"); code != ExitBadInput || !strings.Contains(out, "--min-effect") {
		t.Errorf("bad min-effect: exit %d\n%s", code, out)
	}
	if out, code := steward("compare", rec, "base1", "head1", "--format", "md"); code != 0 || !strings.Contains(out, "| qa | regressed | 95.0% | 50.0% |") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
}
