package ghaction_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/report"
)

type missingShards struct{}

func (missingShards) Error() string {
	return "merge: 4 shards expected (from the records' i/n), 2 missing: 2/4, 3/4 (did their jobs fail before uploading a record?)\nthey held: qa: q2, q3 (2 attempts)"
}
func (missingShards) MissingShards() ([]string, int, string) {
	return []string{"2/4", "3/4"}, 4, "qa: q2, q3 (2 attempts)"
}

// A merge without some shard records says which shards are missing, plainly,
// not that the eval set has errors (issue 23 item 10).
func TestMergeNamesTheMissingShards(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_MODE"] = "merge"
	e.vars["INPUT_RECORDS"] = "shards/a"
	stub := &stubLaunch{code: ghaction.ExitBadInput, err: fmt.Errorf("merge: %w", missingShards{})}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitBadInput {
		t.Fatalf("exit %d, want 2\n%s", code, e.stdout.String())
	}
	sum := e.read("GITHUB_STEP_SUMMARY")
	if strings.Contains(sum, "error(s)") || strings.Contains(sum, "bad input") {
		t.Errorf("a missing shard reads as a bad eval set:\n%s", sum)
	}
	if !strings.Contains(sum, "Steward: shard records missing") || !strings.Contains(sum, "no record of **2/4, 3/4**") || !strings.Contains(sum, "qa: q2, q3") {
		t.Errorf("the summary does not name the missing shards:\n%s", sum)
	}
	if !strings.Contains(e.stdout.String(), "::error title=Steward%3A shard records missing::The merge has no record of shards 2/4, 3/4 (2 of 4 shards missing)") {
		t.Errorf("no plain error annotation:\n%s", e.stdout.String())
	}
}

// A warning the launch raises (a stale shard record left out of the merge) is
// a ::warning:: once workflow commands are back on, not a plain log line
// inside the stopped section, and shows workspace-relative paths; so does the
// missing baseline's warning (issue 23 item 10).
func TestLaunchWarningsAreAnnotatedWithWorkspacePaths(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_COMMENT"] = "false"
	e.vars["INPUT_BASELINE"] = ".steward-base"
	stale := filepath.Join(e.workspace, "shards", "steward-record-2")
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	launch := func(ctx context.Context, o ghaction.LaunchOptions) (*report.Report, int, error) {
		o.Warn(stale + " is left out: its newest run r1 is not a shard run")
		return stub.launch(ctx, o)
	}
	env := e.env()
	env.Baseline = func(_ context.Context, p string) (*report.Report, error) {
		return nil, fmt.Errorf("read baseline: no record at %s (was the base's record restored?)", p)
	}
	if code := ghaction.Run(context.Background(), env, launch); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.stdout.String())
	}
	log := e.stdout.String()
	if !strings.Contains(log, "::warning::Steward: shards/steward-record-2 is left out") {
		t.Errorf("the stale shard record is not a warning with a workspace path:\n%s", log)
	}
	if !strings.Contains(log, "::warning::Steward: no comparison with the base: read baseline: no record at .steward-base (") {
		t.Errorf("the baseline warning does not show the workspace path:\n%s", log)
	}
	if strings.Contains(log, e.workspace) || strings.Contains(e.read("GITHUB_STEP_SUMMARY"), e.workspace) {
		t.Errorf("the workspace's container path is shown:\n%s", log)
	}
}
