package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// examples/groups-and-state passes on a fresh record: the task's files are
// in every attempt's sandbox, fresh or reused (group lanes and the
// sandbox_reuse pool reset the workdir between attempts), with workers.
func TestExampleGroupsAndStateFreshRecord(t *testing.T) {
	t.Parallel()
	out, code := steward(t, "../..", "launch", "--record", t.TempDir(), "examples/groups-and-state/steward.yaml")
	// flaky-search fails its first attempt by design (early exit then
	// passes it), so the run exits 1; everything else passes.
	if code != 1 || !strings.Contains(out, "10 total · 0 reused · 0 running · 0 queued · 8 passed · 1 failed · 0 errored · 1 skipped") ||
		strings.Contains(out, "can't open") {
		t.Fatalf("groups-and-state exit %d:\n%s", code, out)
	}
}

// The README's first command: examples/quickstart passes all 13 attempts on a
// fresh record (the files task's scorer runs in the local grader), and a
// second launch carries every one of them.
func TestExampleQuickstartAsTheReadmeSays(t *testing.T) {
	t.Parallel()
	rec := t.TempDir()
	out, code := steward(t, "../..", "launch", "--record", rec, "examples/quickstart/steward.yaml")
	if code != 0 || !strings.Contains(out, "13 total · 0 reused · 0 running · 0 queued · 13 passed · 0 failed · 0 errored") ||
		strings.Contains(out, "panic") {
		t.Fatalf("quickstart exit %d:\n%s", code, out)
	}
	out, code = steward(t, "../..", "launch", "--record", rec, "examples/quickstart/steward.yaml")
	if code != 0 || !strings.Contains(out, "13 reused") {
		t.Fatalf("quickstart re-run exit %d (want 13 reused):\n%s", code, out)
	}
}

// examples/judging-and-limits runs offline and its report says truthfully
// who failed, who errored and what hit a limit (issue 30): the ported
// Harbor-style task's agent exits 1 in both samples and the verifier
// decides (one passes, one fails), the strict copy is errored unscored,
// the budgeted task has one attempt within its limits, one stopped at
// its token limit and one at its deadline (judged on what they left), and
// on_limit: fail fails the last. A second launch carries every judged
// attempt and runs the errored one again.
func TestExampleJudgingAndLimits(t *testing.T) {
	t.Parallel()
	rec, dir := t.TempDir(), t.TempDir()
	out, code := steward(t, "../..", "launch", "--record", rec, "--report-dir", dir, "examples/judging-and-limits")
	if code != 1 {
		t.Fatalf("judging-and-limits exit %d, want 1 (some failed):\n%s", code, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Attempts []struct {
			Task, Sample, Status, Limit, Reason string
			TimedOut                            bool `json:"timed_out"`
			AgentExit                           int  `json:"agent_exit"`
		} `json:"attempts"`
		PassWithinBudget *struct{ Passed, Judged, Limited int } `json:"pass_within_budget"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	type row struct {
		status, limit string
		timedOut      bool
		agentExit     int
	}
	want := map[string]row{
		"ported/fixes-it":        {"passed", "", false, 1},
		"ported/gives-up":        {"failed", "", false, 1},
		"ported-strict/fixes-it": {"errored", "", false, 0},
		"budgeted/quick":         {"passed", "", false, 0},
		"budgeted/chatty":        {"passed", "tokens", false, 0},
		"budgeted/slow":          {"passed", "agent_time", true, 0},
		"budgeted-strict/chatty": {"failed", "tokens", false, 0},
	}
	if len(rep.Attempts) != len(want) {
		t.Fatalf("%d attempts, want %d:\n%s", len(rep.Attempts), len(want), out)
	}
	for _, a := range rep.Attempts {
		k := a.Task + "/" + a.Sample
		got := row{a.Status, a.Limit, a.TimedOut, a.AgentExit}
		if got != want[k] {
			t.Errorf("%s: %+v, want %+v (reason %q)", k, got, want[k], a.Reason)
		}
		if k == "ported-strict/fixes-it" && !strings.Contains(a.Reason, "agent exited 1: stdout: FAIL") {
			t.Errorf("%s: reason %q lacks the agent's exit and output", k, a.Reason)
		}
	}
	if w := rep.PassWithinBudget; w == nil || w.Passed != 2 || w.Judged != 7 || w.Limited != 3 {
		t.Errorf("pass within budget %+v, want 2 of 7, 3 limited", w)
	}
	out, _ = steward(t, "../..", "launch", "--record", rec, "examples/judging-and-limits")
	if !strings.Contains(out, "7 total · 6 reused") || !strings.Contains(out, "1 errored") {
		t.Errorf("second launch: want 6 judged attempts carried and the errored one run again:\n%s", out)
	}
}
