package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/stats"
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
	// One sample flipped: listed, but one flip is no evidence of a regression.
	if c.Regressed || c.Verdict != stats.Inconclusive || len(c.NewlyFail) != 1 || c.NewlyFail[0].Sample != "add-2" || c.NewlyFail[0].Reason != "expected 4, got 5" {
		t.Fatalf("verdict %s, newly failing %+v (regressed %v)", c.Verdict, c.NewlyFail, c.Regressed)
	}
	if len(c.NewlyFixed) != 1 || c.NewlyFixed[0].Sample != "repo-1" {
		// repo-1 failed on base and passed on head (its infra attempt is no observation of the agent).
		t.Fatalf("newly fixed %+v", c.NewlyFixed)
	}
	byName := map[string]TaskDelta{}
	for _, d := range c.Tasks {
		byName[d.Name] = d
	}
	if d := byName["fast"]; d.Regressed || d.Test == nil || d.Test.Samples != 4 || d.Test.Discordant != 1 || d.Test.Method != "exact McNemar" || math.Abs(d.Test.PRegress-0.5) > 1e-12 || d.PRegress != 1 {
		t.Errorf("fast %+v %+v", d, d.Test)
	}
	if d := byName["gone"]; !d.OnlyOnBase || d.Regressed || d.Test != nil {
		t.Errorf("gone %+v", d)
	}
	if len(c.OnlyBase) != 1 || c.OnlyBase[0].Sample != "g-1" {
		t.Errorf("only on base %+v", c.OnlyBase)
	}
	if c.SpendUSD != head.Spend.USD || c.BaseUSD != 0.5 {
		t.Errorf("spend %v vs %v", c.SpendUSD, c.BaseUSD)
	}
	// Same observations on both sides (head carried every one from base): unchanged.
	h, b := fixture(), fixture()
	b.RunIDs = []string{"base-run"}
	for i := range b.Attempts {
		b.Attempts[i].Run, b.Attempts[i].Carried, b.Attempts[i].CarriedFrom = "base-run", false, ""
		h.Attempts[i].Run, h.Attempts[i].Carried, h.Attempts[i].CarriedFrom = "head-run", true, "base-run"
	}
	if c := Compare(h, b, "x"); c.Regressed || c.Verdict != stats.Unchanged || len(c.NewlyFail)+len(c.NewlyFixed) != 0 {
		t.Errorf("carried runs: %s %+v", c.Verdict, c)
	}
}

// synthetic is a report of one task whose samples pass as given ("1" passes, "0" fails).
func synthetic(run string, outcomes ...string) *Report {
	r := &Report{RunIDs: []string{run}}
	for i, o := range outcomes {
		for j, ch := range o {
			st := status.Failed
			if ch == '1' {
				st = status.Passed
			}
			r.Attempts = append(r.Attempts, AttemptRow{Task: "t", Sample: fmt.Sprintf("s%02d", i), Attempt: j + 1, Status: st, Run: run})
		}
	}
	r.Recount()
	return r
}

func repeat(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestCompareVerdicts(t *testing.T) {
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	// The trial: 40 samples, base 77.5 %, head 80.0 %, 5 newly
	// failing and 6 newly fixed. The old rule said "regressed".
	base := cat(repeat(26, "1"), repeat(5, "1"), repeat(6, "0"), repeat(3, "0"))
	head := cat(repeat(26, "1"), repeat(5, "0"), repeat(6, "1"), repeat(3, "0"))
	c := Compare(synthetic("h", head...), synthetic("b", base...), "base")
	if c.Verdict != stats.Inconclusive || c.Regressed || len(c.NewlyFail) != 5 || len(c.NewlyFixed) != 6 {
		t.Errorf("noisy neutral change: %s, %d failing, %d fixed: %s", c.Verdict, len(c.NewlyFail), len(c.NewlyFixed), c.Summary)
	}
	// McNemar b=5, c=6: P(X ≥ 5 | 11, ½) = 0.7256 (scipy.stats.binomtest(5, 11, alternative='greater')).
	if p := c.Tasks[0].PRegress; math.Abs(p-0.7255859375) > 1e-9 {
		t.Errorf("p_regress %v", p)
	}
	if !strings.Contains(c.Decide, "11 uncertain sample") {
		t.Errorf("decide hint %q", c.Decide)
	}
	// A real drop: 38/40 on base, 20/40 on head.
	base = cat(repeat(20, "1"), repeat(18, "1"), repeat(2, "0"))
	head = cat(repeat(20, "1"), repeat(18, "0"), repeat(2, "0"))
	c = Compare(synthetic("h", head...), synthetic("b", base...), "base")
	if c.Verdict != stats.Regressed || !c.Regressed || !strings.HasPrefix(c.Summary, "Regressed at 95% confidence: t fell 95.0% → 50.0% (−45.0 pts") {
		t.Errorf("real drop: %s: %s", c.Verdict, c.Summary)
	}
	// A significant drop smaller than min-effect is not a regression.
	c = Compare(synthetic("h", head...), synthetic("b", base...), "base", CompareOptions{MinEffect: 0.5})
	if c.Verdict == stats.Regressed {
		t.Errorf("drop below min-effect: %s: %s", c.Verdict, c.Summary)
	}
	// 500 samples agreeing, two flips each way: unchanged within ±5 pts.
	base = cat(repeat(400, "1"), repeat(96, "0"), repeat(2, "1"), repeat(2, "0"))
	head = cat(repeat(400, "1"), repeat(96, "0"), repeat(2, "0"), repeat(2, "1"))
	c = Compare(synthetic("h", head...), synthetic("b", base...), "base")
	if c.Verdict != stats.Unchanged {
		t.Errorf("large agreeing run: %s: %s", c.Verdict, c.Summary)
	}
	// Several attempts a sample: a permutation test, not McNemar.
	c = Compare(synthetic("h", repeat(30, "110")...), synthetic("b", repeat(30, "111")...), "base")
	if m := c.Tasks[0].Test.Method; m != "exact stratified permutation" || c.Verdict != stats.Regressed {
		t.Errorf("three attempts: %s via %s: %s", c.Verdict, m, c.Summary)
	}
	// Known-flaky samples are listed apart.
	c = Compare(synthetic("h", "0", "1"), synthetic("b", "1", "1"), "base", CompareOptions{Flaky: map[string]FlakyInfo{"t\x00s00": {Passed: 3, Judged: 5}}})
	if len(c.Flaky) != 1 || len(c.NewlyFail) != 0 || c.Flaky[0].FlakyJudged != 5 {
		t.Errorf("flaky %+v, newly failing %+v", c.Flaky, c.NewlyFail)
	}
}

func TestCompareHolmAcrossTasks(t *testing.T) {
	// Two tasks with the same modest drop: each alone regressed at p < 0.025,
	// but Holm doubles the smaller p-value.
	h := synthetic("h", append(repeat(10, "0"), repeat(30, "1")...)...)
	b := synthetic("b", append(repeat(10, "1"), repeat(30, "1")...)...)
	one := Compare(h, b, "base")
	if one.Verdict != stats.Regressed {
		t.Fatalf("one task: %s (%v)", one.Verdict, one.Tasks[0].PRegress)
	}
	two := func(r *Report) *Report {
		x := *r
		x.Attempts = nil
		for _, a := range r.Attempts {
			x.Attempts = append(x.Attempts, a)
			a.Task = "u"
			x.Attempts = append(x.Attempts, a)
		}
		x.Tasks = nil
		x.Recount()
		return &x
	}
	c := Compare(two(h), two(b), "base")
	// P(X ≥ 10 | 10, ½) = 1/1024 each; Holm: 2/1024 and 1/1024 → the max, 2/1024.
	if math.Abs(c.Tasks[0].PRegress-2.0/1024) > 1e-12 || math.Abs(c.Tasks[1].PRegress-2.0/1024) > 1e-12 {
		t.Errorf("holm %v %v", c.Tasks[0].PRegress, c.Tasks[1].PRegress)
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
	if !strings.Contains(com, "Newly failing (1)") || !strings.Contains(b.String(), "❔ inconclusive") || !strings.Contains(com, "❔ inconclusive · Inconclusive at 95% confidence") {
		t.Errorf("comparison not rendered:\n%s", com)
	}
	r.Version = "v1.2.3 (0123456789ab)"
	b.Reset()
	_ = Markdown(&b, r, MarkdownOptions{})
	// The commit is shown with zero-width spaces (escape.go noReferences).
	if !strings.HasSuffix(strings.ReplaceAll(b.String(), "\u200b", ""), "<sub>steward v1.2.3 (0123456789ab)</sub>\n") || !strings.Contains(Comment(r, CommentOptions{}), "<sub>steward v1.2.3") {
		t.Errorf("no version footer:\n%s", b.String())
	}
}

// A verdict a look reached stands at later looks: KeepDecided puts the
// task back as it was decided and judges the whole again.
func TestKeepDecided(t *testing.T) {
	// Task t: 500 agreeing samples, unchanged at the first look.
	base := synthetic("b", append(repeat(400, "1"), repeat(100, "0")...)...)
	head := synthetic("h", append(repeat(400, "1"), repeat(100, "0")...)...)
	first := Compare(head, base, "base", CompareOptions{Look: 1, Looks: 4})
	if first.Verdict != stats.Unchanged {
		t.Fatalf("first look: %s", first.Summary)
	}
	// A later look at a tiny level with a much wider min-effect need would
	// judge it again; as if it came out inconclusive, KeepDecided restores it.
	later := Compare(head, base, "base", CompareOptions{Look: 2, Looks: 4, MinEffect: 0.001})
	if later.Verdict == stats.Unchanged {
		t.Fatalf("the later look should not decide on its own here: %s", later.Summary)
	}
	later.KeepDecided(first)
	if later.Verdict != stats.Unchanged || later.Tasks[0].Look != 1 || !strings.HasPrefix(later.Summary, "Unchanged") {
		t.Errorf("after KeepDecided: %s (look %d): %s", later.Verdict, later.Tasks[0].Look, later.Summary)
	}
}
