package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

// The HTML report shows what the other reports show of limits (issue 30
// item 5): the limit beside each limited attempt's verdict, and the pass
// within budget beside the pass rate; a report with no limited attempt has
// no such card.
func TestHTMLShowsLimitsAndPassWithinBudget(t *testing.T) {
	var plain bytes.Buffer
	if err := HTML(&plain, htmlFixture(), HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), `id="within-budget"`) {
		t.Error("a report without limits shows a pass within budget")
	}
	r := htmlFixture()
	r.Attempts = append(r.Attempts,
		AttemptRow{Task: r.Attempts[0].Task, Sample: "capped", Attempt: 1, Status: status.Passed, Score: ptr(1.0), Limit: "tokens"},
		AttemptRow{Task: r.Attempts[0].Task, Sample: "late", Attempt: 1, Status: status.Passed, Score: ptr(1.0), Limit: "agent_time", TimedOut: true},
	)
	r.Recount()
	w := r.PassWithinBudget
	if w == nil || w.Limited != 2 {
		t.Fatalf("pass within budget %+v", w)
	}
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	card := regexp.MustCompile(`id="within-budget"><div class="n">([^<]+)</div>`).FindStringSubmatch(page)
	if card == nil || !strings.Contains(card[1], fmt.Sprintf("(%d of %d)", w.Passed, w.Judged)) {
		t.Errorf("no pass-within-budget card saying %d of %d:\n%v", w.Passed, w.Judged, card)
	}
	rows := jsonBlocks(t, page)["rows"]
	for _, s := range []string{"limit: tokens", "timed out (limit: agent_time)"} {
		if !strings.Contains(rows, s) {
			t.Errorf("the rows do not show %q", s)
		}
	}
}
