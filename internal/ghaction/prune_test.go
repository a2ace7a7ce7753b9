package ghaction_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/report"
)

// The action prunes the record before the workflow caches it (prune: true by
// default, the record's defaults), only this eval set's runs, and the job
// summary (not the comment) shows the record's size; prune: false only
// measures it; a prune that fails is a warning and the run's result stands
// (issue 23 item 12).
func TestActionPrunesTheRecordAndShowsItsSize(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		err         error
		want        ghaction.PruneRequest
		summary     string
	}{
		{"default", "", nil, ghaction.PruneRequest{KeepRuns: 10, KeepTranscripts: 3},
			"**Record** `.steward/record.sqlite`: 1.5 MiB after pruning (was 3.0 MiB; keeps 10 runs whole and the transcripts of 3)."},
		{"settings", "runs=4,transcripts=0", nil, ghaction.PruneRequest{KeepRuns: 4},
			"**Record** `.steward/record.sqlite`: 1.5 MiB after pruning (was 3.0 MiB; keeps 4 runs whole and the transcripts of 0)."},
		{"off", "false", nil, ghaction.PruneRequest{Off: true},
			"**Record** `.steward/record.sqlite`: 1.5 MiB (not pruned: `prune: false`)."},
		{"failed", "", errors.New("prune: vacuum: database is locked"), ghaction.PruneRequest{KeepRuns: 10, KeepTranscripts: 3},
			"**Record** `.steward/record.sqlite`: not pruned (prune: vacuum: database is locked)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			e := newActionEnv(t, f.URL, writeTok)
			e.vars["INPUT_PRUNE"] = tc.input
			env := e.env()
			var got []ghaction.PruneRequest
			env.Prune = func(_ context.Context, req ghaction.PruneRequest) (ghaction.PruneSummary, error) {
				got = append(got, req)
				return ghaction.PruneSummary{Before: 3 << 20, After: 3 << 19, Line: "prune: dropped things"}, tc.err
			}
			stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
			if code := ghaction.Run(context.Background(), env, stub.launch); code != 0 {
				t.Fatalf("exit %d\n%s", code, e.stdout.String())
			}
			tc.want.Record = filepath.Join(e.workspace, ".steward")
			tc.want.EvalSet = filepath.Join(e.workspace, "evals/steward.yaml")
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("prune asked %+v, want %+v", got, tc.want)
			}
			if sum := e.read("GITHUB_STEP_SUMMARY"); !strings.Contains(sum, tc.summary) {
				t.Errorf("the summary does not say %q:\n%s", tc.summary, sum)
			}
			if cs := markerComments(f); len(cs) != 1 || strings.Contains(cs[0].Body, "**Record**") {
				t.Errorf("the comment shows the record's size (or is missing): %+v", cs)
			}
			if tc.err != nil && !strings.Contains(e.stdout.String(), "::warning::Steward: the record was not pruned") {
				t.Errorf("no warning for the failed prune:\n%s", e.stdout.String())
			}
		})
	}
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_PRUNE"] = "runs=0"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitBadInput || len(stub.calls) != 0 {
		t.Errorf("prune: runs=0: exit %d after %d launches, want 2 before any", code, len(stub.calls))
	}
}
