package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

// baseFixture is the base branch's run of fixture(): add-2 passed there
// (newly failing on head), repo-1 failed there (newly fixed), a task head
// no longer has, and less spend.
func baseFixture() *Report {
	b := fixture()
	b.RunIDs = []string{"base-run"}
	b.Spend.USD = 0.5
	for i := range b.Attempts {
		a := &b.Attempts[i]
		switch {
		case a.Sample == "add-2":
			a.Status, a.Explanation = status.Passed, ""
		case a.Sample == "repo-1":
			a.Status = status.Failed
		}
	}
	b.Attempts = append(b.Attempts, AttemptRow{Task: "gone", Sample: "g-1", Attempt: 1, Status: status.Passed})
	b.Recount()
	return b
}

func TestCompare(t *testing.T) {
	head := fixture()
	c := Compare(head, baseFixture(), "base record .steward-base")
	if !c.Regressed || len(c.NewlyFail) != 1 || c.NewlyFail[0].Sample != "add-2" || c.NewlyFail[0].Reason != "expected 4, got 5" {
		t.Fatalf("newly failing %+v (regressed %v)", c.NewlyFail, c.Regressed)
	}
	if len(c.NewlyFixed) != 0 {
		// repo-1 has an infra attempt on head: not fixed.
		t.Fatalf("newly fixed %+v", c.NewlyFixed)
	}
	byName := map[string]TaskDelta{}
	for _, d := range c.Tasks {
		byName[d.Name] = d
	}
	if d := byName["fast"]; !d.Regressed || d.BaseJudged != 4 || d.HeadJudged != 4 || d.Delta > -0.2 {
		t.Errorf("fast %+v", d)
	}
	if d := byName["gone"]; !d.OnlyOnBase || d.Regressed {
		t.Errorf("gone %+v", d)
	}
	if c.SpendUSD != head.Spend.USD || c.BaseUSD != 0.5 {
		t.Errorf("spend %v vs %v", c.SpendUSD, c.BaseUSD)
	}
	// Same results on both sides: nothing regressed.
	if c := Compare(fixture(), fixture(), "x"); c.Regressed || len(c.NewlyFail)+len(c.NewlyFixed) != 0 {
		t.Errorf("identical runs: %+v", c)
	}
	// Fixed: failed on base, passed on head.
	h := fixture()
	for i := range h.Attempts {
		if h.Attempts[i].Sample == "add-2" {
			h.Attempts[i].Status = status.Passed
		}
	}
	h.Recount()
	if c := Compare(h, fixture(), "x"); c.Regressed || len(c.NewlyFixed) != 1 || c.NewlyFixed[0].Sample != "add-2" {
		t.Errorf("fixed: %+v", c)
	}
}

func TestCompareGolden(t *testing.T) {
	r := fixture()
	r.Comparison = Compare(r, baseFixture(), "base record .steward-base/record.sqlite")
	var b bytes.Buffer
	if err := Markdown(&b, r, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare_summary.md.golden", b.Bytes())
	com := Comment(r, CommentOptions{SummaryURL: "https://github.com/acme/evals/actions/runs/42"})
	golden(t, "compare_comment.md.golden", []byte(com))
	if !strings.Contains(com, "Newly failing (1)") || !strings.Contains(b.String(), "🔻") {
		t.Errorf("comparison not rendered:\n%s", com)
	}
	r.Version = "v1.2.3 (0123456789ab)"
	b.Reset()
	_ = Markdown(&b, r, MarkdownOptions{})
	if !strings.HasSuffix(b.String(), "<sub>steward v1.2.3 (0123456789ab)</sub>\n") || !strings.Contains(Comment(r, CommentOptions{}), "<sub>steward v1.2.3") {
		t.Errorf("no version footer:\n%s", b.String())
	}
}
