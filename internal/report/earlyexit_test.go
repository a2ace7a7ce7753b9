package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

// Issue 23 item 8: after an early-exit re-run the table said 15 reused
// where the live panel said 9: the skips that refer to the ones recorded
// before are skipped, not reused results. And early exit's saving is shown,
// as carry's is.
func TestEarlyExitSkipsAreNotReusedAndTheirSavingIsShown(t *testing.T) {
	r := &Report{Title: "t"}
	for _, s := range []string{"a", "b", "c"} {
		r.Attempts = append(r.Attempts,
			AttemptRow{Task: "t", Sample: s, Attempt: 1, Status: status.Passed, Carried: true, CarriedFrom: "r1", CostUSD: 0.25},
			AttemptRow{Task: "t", Sample: s, Attempt: 2, Status: status.Skipped, Carried: true, CarriedFrom: "r1", Reason: "early exit: attempt 1 passed"},
			AttemptRow{Task: "t", Sample: s, Attempt: 3, Status: status.Skipped, Carried: true, CarriedFrom: "r1", Reason: "early exit: attempt 1 passed"},
		)
	}
	r.Recount()
	if r.Counts.Reused != 3 || r.Counts.Skipped != 6 {
		t.Fatalf("counts %+v: want 3 reused (the carried passes) and 6 skipped", r.Counts)
	}
	if n, usd := r.EarlyExitSaving(); n != 6 || usd < 1.49 || usd > 1.51 {
		t.Fatalf("early exit saving %d attempts, $%.4f; want 6 and $1.50", n, usd)
	}
	var b bytes.Buffer
	if err := Terminal(&b, r, TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "saved by early exit: 6 attempts not run (about $1.5000 at their samples' mean cost)"; !strings.Contains(b.String(), want) {
		t.Fatalf("terminal report lacks %q:\n%s", want, b.String())
	}
	if got, want := Comment(r, CommentOptions{}), "6 attempts saved by early exit, about &#36;1.5000"; !strings.Contains(got, want) {
		t.Fatalf("the PR comment lacks %q:\n%s", want, got)
	}
}
