package report

import (
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

// A retried attempt is visible in every report: its tries and why beside
// its reason (terminal, JUnit, HTML rows, problem tables), a section of its
// own in the Markdown reports when it passed; and an agent's non-zero exit
// shows beside the scorer's verdict.
func TestRetriedAndAgentExitShown(t *testing.T) {
	r := &Report{Attempts: []AttemptRow{
		{Task: "t", Sample: "a", Attempt: 1, Status: status.Passed, Tries: 3, RetryReasons: []string{"create sandbox: daemon hung", "copy sample files: EOF"}},
		{Task: "t", Sample: "b", Attempt: 1, Status: status.Failed, Explanation: "2 of 5 tests failed", AgentExit: 1, AgentOutput: "stderr: make: *** [test] Error 1"},
		{Task: "t", Sample: "c", Attempt: 1, Status: status.Passed},
	}}
	if got := rowReason(r.Attempts[0]); got != "3 tries (retried: create sandbox: daemon hung; copy sample files: EOF)" {
		t.Errorf("retried row reason %q", got)
	}
	if got := rowReason(r.Attempts[1]); got != "2 of 5 tests failed · agent exited 1: stderr: make: *** [test] Error 1" {
		t.Errorf("judged failed agent's reason %q", got)
	}
	if got := rowReason(r.Attempts[2]); got != "" {
		t.Errorf("plain row reason %q", got)
	}
	md := retriedMarkdown(r, 10, 300)
	if !strings.Contains(md, "Retried after infrastructure errors (1)") || !strings.Contains(md, "| t | a | 1 | passed | 3 tries") || strings.Contains(md, "| b |") {
		t.Errorf("retried section:\n%s", md)
	}
	if retriedMarkdown(&Report{Attempts: r.Attempts[1:]}, 10, 300) != "" {
		t.Error("a section without retried attempts")
	}
}
