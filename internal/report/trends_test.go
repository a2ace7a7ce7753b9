package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/steward-evals/steward/internal/browsertest"
	"github.com/steward-evals/steward/internal/status"
)

// trendRun is one run of two tasks: task a passes pass of its 4 samples,
// task b passes all; every own attempt costs $0.01, 100 tokens and 2s.
func trendRun(id string, at time.Time, pass int, carriedB bool) *Report {
	r := &Report{RunIDs: []string{id}, Started: at}
	for i := range 4 {
		st := status.Failed
		if i < pass {
			st = status.Passed
		}
		r.Attempts = append(r.Attempts, AttemptRow{Task: "a", Sample: fmt.Sprintf("s%d", i), Attempt: 1, Status: st, Run: id,
			CostUSD: 0.01, InputTokens: 80, OutputTokens: 20, Duration: 2 * time.Second, Answer: fmt.Sprintf("answer %d", i)})
	}
	r.Attempts = append(r.Attempts, AttemptRow{Task: "b", Sample: "x", Attempt: 1, Status: status.Passed, Run: id, Carried: carriedB,
		CostUSD: 0.01, InputTokens: 80, OutputTokens: 20, Duration: 2 * time.Second})
	r.Recount()
	r.Rescore()
	return r
}

func TestTrends(t *testing.T) {
	tr := &Trends{EvalSet: "e.yaml"}
	for i, pass := range []int{4, 3, 2} {
		tr.AddRun(trendRun(fmt.Sprint("r", i), t0.Add(time.Duration(i)*time.Hour), pass, i > 0), TrendRun{ID: fmt.Sprint("r", i), Label: fmt.Sprint("run ", i)})
	}
	if len(tr.Tasks) != 2 || len(tr.Tasks[0].Points) != 3 {
		t.Fatalf("trend %+v", tr)
	}
	for i, want := range []float64{1, 0.75, 0.5} {
		p := tr.Tasks[0].Points[i]
		if p.Score == nil || p.Score.Mean != want || p.USD != 0.04 || p.Tokens != 400 || p.Seconds != 2 || p.Ran != 4 {
			t.Errorf("a at run %d: %+v, want pass rate %v, $0.04, 400 tokens, 2s", i, p, want)
		}
	}
	if b := tr.Tasks[1].Points[1]; b.Ran != 0 || b.USD != 0 || b.Attempts != 1 {
		t.Errorf("a carried b costs the run nothing: %+v", b)
	}
	head := tr.WithHead(trendRun("pr", t0.Add(5*time.Hour), 1, true))
	if len(head.Runs) != 4 || !head.Runs[3].Head || len(tr.Runs) != 3 {
		t.Errorf("WithHead: %d runs (head %v); the base's trend keeps %d", len(head.Runs), head.Runs[3].Head, len(tr.Runs))
	}
	md := trendsMarkdown(head)
	for _, want := range []string{"### Trend", "xychart-beta", `x-axis ["run 0", "run 1", "run 2", "this run"]`, "line [100, 75, 50, 25]", "line [100, 100, 100, 100]",
		"1. a · 2. b", "| a | 100% (", "carried |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the trend's markdown lacks %q:\n%s", want, md)
		}
	}
	// Several records: columns sorted by start.
	m := &Trends{}
	m.AddRun(trendRun("late", t0.Add(time.Hour), 1, false), TrendRun{ID: "late", Started: t0.Add(time.Hour)})
	m.AddRun(trendRun("early", t0, 4, false), TrendRun{ID: "early", Started: t0})
	m.Sort()
	if m.Runs[0].ID != "early" || m.Tasks[0].Points[0].Score.Mean != 1 {
		t.Errorf("sorted trend %+v", m.Runs)
	}
	var b bytes.Buffer
	if err := TrendsTerminal(&b, tr); err != nil || !strings.Contains(b.String(), "75.0% (") {
		t.Errorf("terminal trend (%v):\n%s", err, b.String())
	}
}

func TestWordDiff(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"", "", ""},
		{"same", "same", ""},
		{"the answer is 42", "the answer is 41", "the answer is [-42-]{+41+}"},
		{"a b c", "a c", "a [-b -]c"},
		{"", "new", "{+new+}"},
		{"answer 6", "answer 6, or 7", "answer 6{+, or 7+}"},
		{"line one\nline two\n", "line one\nline 2\n", "line one\nline [-two-]{+2+}\n"},
	} {
		if got := diffText(WordDiff(tc.a, tc.b)); got != tc.want {
			t.Errorf("WordDiff(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestTrendsAndSideBySideInChromium opens a report with a trend and a side
// by side of base and head whose answers are hostile: four charts, the
// changed sample open with its diff, nothing of the answers became markup,
// and the page logs no problem (CSP included).
func TestTrendsAndSideBySideInChromium(t *testing.T) {
	tr := &Trends{EvalSet: "e.yaml"}
	for i, pass := range []int{4, 4, 3, 3, 2} {
		tr.AddRun(trendRun(fmt.Sprint("r", i), t0.Add(time.Duration(i)*time.Hour), pass, false), TrendRun{ID: fmt.Sprint("r", i), Label: fmt.Sprintf("12-0%d 10:00", i+1)})
	}
	base := trendRun("base", t0, 4, false)
	head := trendRun("head", t0.Add(time.Hour), 2, false)
	head.Attempts[2].Answer = "answer 2 " + hostileHTML
	head.Attempts[2].Task = "a"
	base.Trends = tr
	head.Comparison = Compare(head, base, "run base")
	head.SideBySide = SideBySide(head, base)
	path := writeHTML(t, head)

	b := browsertest.Start(t)
	b.Run("open", chromedp.Navigate(browsertest.FileURL(t, path)), chromedp.WaitVisible(`#trends`, chromedp.ByQuery))
	var n map[string]int
	b.Eval(`({charts: document.querySelectorAll('#trends figure.trend').length, lines: document.querySelectorAll('#trend-rate polyline').length,
		bands: document.querySelectorAll('#trend-rate polygon.band').length, dots: document.querySelectorAll('#trend-rate circle.dot').length,
		pairs: document.querySelectorAll('#sidebyside details.pair').length, open: document.querySelectorAll('#sidebyside details.pair[open]').length,
		del: document.querySelectorAll('#sidebyside pre.diff del').length, ins: document.querySelectorAll('#sidebyside pre.diff ins').length,
		img: document.querySelectorAll('img').length, bold: document.querySelectorAll('main b').length})`, &n)
	// 5 base runs + this run; tasks a and b; a changed (s2, s3) samples open.
	if n["charts"] != 4 || n["lines"] != 2 || n["bands"] != 2 || n["dots"] != 12 || n["pairs"] != 5 || n["open"] != 2 || n["ins"] != 1 || n["img"] != 0 || n["bold"] != 0 {
		t.Errorf("page elements %v", n)
	}
	var text string
	b.Eval(`document.querySelector('#sidebyside details.pair[open]').innerText`, &text)
	if !strings.Contains(text, "a / s2") || !strings.Contains(text, hostileHTML) || !strings.Contains(text, "passed") || !strings.Contains(text, "failed") {
		t.Errorf("the first changed sample shows:\n%s", text)
	}
	b.Run("scroll to the trend", chromedp.Evaluate(`document.getElementById('trends').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "trends.png"))
	b.Run("scroll to the side by side", chromedp.Evaluate(`document.getElementById('sidebyside').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "sidebyside.png"))
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
