package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

func TestPlanAndCountsLines(t *testing.T) {
	got := PlanLine("45 attempts · 9 evals × 5 configs · concurrency 19 (from flag) · slow ≤1")
	want := "│ 45 attempts · 9 evals × 5 configs · concurrency 19 (from flag) · slow ≤1 │"
	if got != want {
		t.Errorf("PlanLine:\n got %q\nwant %q", got, want)
	}
	got = CountsLine(Counts{Total: 45, Reused: 6, Running: 19, Queued: 12, Passed: 6, Failed: 2})
	want = "│ 45 total · 6 reused · 19 running · 12 queued · 6 passed · 2 failed · 0 errored · 0 skipped │"
	if got != want {
		t.Errorf("CountsLine:\n got %q\nwant %q", got, want)
	}
	got = CountsLine(Counts{Total: 3, Passed: 1, Infra: 1, Interrupted: 1})
	want = "│ 3 total · 0 reused · 0 running · 0 queued · 1 passed · 0 failed · 0 errored · 1 infra · 0 skipped · 1 interrupted │"
	if got != want {
		t.Errorf("CountsLine with infra:\n got %q\nwant %q", got, want)
	}
	// Admitted attempts whose sandbox is still being made show apart.
	got = CountsLine(Counts{Total: 10, Running: 4, Starting: 3, Queued: 3})
	want = "│ 10 total · 0 reused · 4 running · 3 starting · 3 queued · 0 passed · 0 failed · 0 errored · 0 skipped │"
	if got != want {
		t.Errorf("CountsLine with starting:\n got %q\nwant %q", got, want)
	}
	var b bytes.Buffer
	if err := Terminal(&b, fixture(), TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), PlanLine(fixture().Plan)+"\n"+CountsLine(fixture().Counts)+"\n") {
		t.Errorf("terminal report does not open with the PLAN and counts lines:\n%s", b.String())
	}
}

func TestGolden(t *testing.T) {
	url := "https://github.com/acme/evals/actions/runs/42"
	cases := []struct {
		name   string
		render func(*Report) ([]byte, error)
	}{
		{"terminal.golden", func(r *Report) ([]byte, error) {
			var b bytes.Buffer
			err := Terminal(&b, r, TerminalOptions{})
			return b.Bytes(), err
		}},
		{"terminal_color.golden", func(r *Report) ([]byte, error) {
			var b bytes.Buffer
			err := Terminal(&b, r, TerminalOptions{Color: true})
			return b.Bytes(), err
		}},
		{"summary.md.golden", func(r *Report) ([]byte, error) {
			var b bytes.Buffer
			err := Markdown(&b, r, MarkdownOptions{})
			return b.Bytes(), err
		}},
		{"comment.md.golden", func(r *Report) ([]byte, error) {
			return []byte(Comment(r, CommentOptions{SummaryURL: url})), nil
		}},
		{"junit.xml.golden", func(r *Report) ([]byte, error) {
			var b bytes.Buffer
			err := JUnit(&b, r)
			return b.Bytes(), err
		}},
		{"report.json.golden", func(r *Report) ([]byte, error) {
			var b bytes.Buffer
			err := JSON(&b, r)
			return b.Bytes(), err
		}},
		{"hostile_summary.md.golden", func(*Report) ([]byte, error) {
			var b bytes.Buffer
			err := Markdown(&b, hostileReport(), MarkdownOptions{})
			return b.Bytes(), err
		}},
		{"hostile_comment.md.golden", func(*Report) ([]byte, error) {
			return []byte(Comment(hostileReport(), CommentOptions{SummaryURL: url})), nil
		}},
		{"partial_comment.md.golden", func(r *Report) ([]byte, error) {
			r.Partial = true
			r.Left = []string{"slow: 2 attempts not dispatched", "fast/add-4: interrupted"}
			r.Hold = "provider incident, see status page"
			return []byte(Comment(r, CommentOptions{})), nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.render(fixture())
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name, got)
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, r := range []*Report{fixture(), hostileReport()} {
		var b bytes.Buffer
		if err := JSON(&b, r); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSON(&b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, back) {
			t.Errorf("JSON round trip changed the report:\n got %+v\nwant %+v", back, r)
		}
	}
}

// tableRowsWellFormed checks every Markdown table row has as many cell
// separators as its header: eval output added no column and broke no row.
func tableRowsWellFormed(t *testing.T, md string) {
	t.Helper()
	lines := strings.Split(md, "\n")
	want := -1
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") {
			want = -1
			continue
		}
		n := strings.Count(l, "|")
		if want < 0 {
			want = n
			continue
		}
		if n != want {
			t.Errorf("table row has %d pipes, header has %d: %q", n, want, l)
		}
	}
}

func checkNoInjection(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{
		"<script", "<img", "<!-- ]]", "`", "**bold**", "[link]", "$x$", "@octocat", "#1 ",
		"\x1b", "\r", "\u202E", "\x00",
	} {
		if strings.Contains(out, bad) {
			t.Errorf("%s contains %q unescaped", what, bad)
		}
	}
	tableRowsWellFormed(t, out)
}

func TestHostileMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := Markdown(&b, hostileReport(), MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	// The mermaid block holds only what Steward wrote.
	start := strings.Index(md, "```mermaid")
	end := strings.Index(md[start+3:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("no mermaid block")
	}
	block := md[start : start+6+end]
	if strings.Contains(block, "script") || strings.Contains(block, "octocat") {
		t.Errorf("eval output reached the mermaid block: %s", block)
	}
	rest := strings.Replace(md, block, "", 1)
	checkNoInjection(t, "summary", rest)
	if strings.Contains(rest, "-->") {
		t.Errorf("summary contains a raw comment close")
	}
	// Exactly as many <details> opened as closed.
	if o, c := strings.Count(md, "<details"), strings.Count(md, "</details>"); o != c {
		t.Errorf("%d <details> opened, %d closed", o, c)
	}
}

func TestHostileComment(t *testing.T) {
	c := Comment(hostileReport(), CommentOptions{SummaryURL: "https://example.test/run?x=1) [evil](https://evil.test"})
	checkNoInjection(t, "comment", c)
	marker := CommentMarker(hostileReport())
	if !strings.HasPrefix(c, marker+"\n") {
		t.Fatalf("comment does not start with its marker %q", marker)
	}
	if strings.Count(c, "-->") != 1 || !strings.HasSuffix(marker, " -->") {
		t.Errorf("the marker must be the only comment close: %d found; marker %q", strings.Count(c, "-->"), marker)
	}
	if strings.Contains(c, "[evil]") || strings.Contains(c, "(https://evil.test") {
		t.Errorf("the summary URL broke out of its link:\n%s", c)
	}
	if o, cl := strings.Count(c, "<details"), strings.Count(c, "</details>"); o != cl {
		t.Errorf("%d <details> opened, %d closed", o, cl)
	}
}

func TestHostileTerminal(t *testing.T) {
	var b bytes.Buffer
	if err := Terminal(&b, hostileReport(), TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\r\x00\u202E") {
		t.Errorf("terminal output carries control characters: %q", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "::") {
			t.Errorf("a line could be read as a workflow command: %q", l)
		}
	}
	// Every table row is one line: no row was split by a newline in a cell.
	var widths = map[int]bool{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "│") && strings.Count(l, "│") > 3 {
			widths[strings.Count(l, "│")] = true
		}
	}
	if len(widths) == 0 || len(widths) > 2 { // the results table and the pass-rate table (they may have as many columns)
		t.Errorf("table rows have uneven cell counts: %v\n%s", widths, out)
	}
}

func TestHostileJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := JUnit(&b, hostileReport()); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit is not well-formed XML: %v\n%s", err, b.String())
	}
	if doc.Tests != 8 || doc.Failures != 1 || doc.Errors != 2 || doc.Skipped != 2 {
		t.Errorf("counts: tests %d failures %d errors %d skipped %d", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	want := Plain(hostile, 200) + " #1"
	if got := doc.Suites[0].Cases[0].Name; got != want {
		t.Errorf("testcase name did not survive escaping:\n got %q\nwant %q", got, want)
	}
	if strings.ContainsAny(b.String(), "\x1b\x00\u202E") {
		t.Errorf("JUnit carries control characters")
	}
}

func TestJUnitStructure(t *testing.T) {
	var b bytes.Buffer
	if err := JUnit(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 2 || doc.Suites[0].Name != "fast" || doc.Suites[1].Name != "slow" {
		t.Fatalf("want suites fast, slow; got %+v", doc.Suites)
	}
	fast := doc.Suites[0]
	if fast.Tests != 4 || fast.Failures != 1 || fast.Errors != 1 {
		t.Errorf("fast: %+v", fast)
	}
	if c := fast.Cases[1]; c.Failure == nil || c.Failure.Message != "expected 4, got 5" || c.File != "evals/fast.jsonl" || c.Line != "2" {
		t.Errorf("failed case: %+v", c)
	}
	if c := doc.Suites[1].Cases[2]; c.Skipped == nil || c.Skipped.Message != "budget spent" {
		t.Errorf("skipped case: %+v", c)
	}
	if c := doc.Suites[1].Cases[1]; c.Error == nil || c.Error.Type != string(status.Infra) {
		t.Errorf("infra case: %+v", c)
	}
}

// big is a run with many failures with long reasons and a long ramp history.
func big(failures, rampPoints int) *Report {
	r := fixture()
	r.Attempts = nil
	for i := 0; i < failures; i++ {
		r.Attempts = append(r.Attempts, AttemptRow{
			Task: "fast", Sample: fmt.Sprintf("sample-%06d", i), Attempt: 1, Status: status.Failed,
			Explanation: strings.Repeat("the answer was wrong in a long way <x> | ", 20),
		})
	}
	r.Counts = Counts{Total: failures, Failed: failures}
	r.Ramp = nil
	for i := 0; i < rampPoints; i++ {
		r.Ramp = append(r.Ramp, RampPoint{At: t0.Add(time.Duration(i) * 10 * time.Second), Task: "fast",
			Setpoint: 50 + i%200, Ceiling: 60 + i%200, Decision: "up", Reason: strings.Repeat("reason ", 30)})
	}
	return r
}

func TestMarkdownStaysUnderStepSummaryLimit(t *testing.T) {
	r := big(20000, 8000)
	var b bytes.Buffer
	if err := Markdown(&b, r, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > StepSummaryLimit-16<<10 {
		t.Errorf("summary is %d bytes, over the limit", b.Len())
	}
	md := b.String()
	if !strings.Contains(md, "more not shown to keep this summary under GitHub's size limit") {
		t.Errorf("a cut summary must say so")
	}
	if !strings.Contains(md, "earlier decisions not shown") {
		t.Errorf("a cut ramp table must say so")
	}
	// The x axis of the chart is bounded whatever the history's length.
	start := strings.Index(md, "x-axis")
	line := md[start : start+strings.Index(md[start:], "\n")]
	if n := strings.Count(line, ",") + 1; n != 60 {
		t.Errorf("chart has %d points, want 60", n)
	}
	// A small report is not cut.
	b.Reset()
	if err := Markdown(&b, fixture(), MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "not shown") {
		t.Errorf("a small summary was cut")
	}
	// A tiny limit is still honoured.
	b.Reset()
	if err := Markdown(&b, r, MarkdownOptions{MaxBytes: 2000}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 2000 {
		t.Errorf("summary is %d bytes with MaxBytes 2000", b.Len())
	}
}

func TestCommentStaysUnderLimit(t *testing.T) {
	url := "https://github.com/acme/evals/actions/runs/42"
	r := big(5000, 10)
	c := Comment(r, CommentOptions{SummaryURL: url})
	if n := textLen(c); n > CommentLimit {
		t.Fatalf("comment is %d characters", n)
	}
	if !strings.Contains(c, "more not shown: see the [job summary]("+url+")") {
		t.Errorf("a cut comment must point at the job summary")
	}
	if !strings.HasPrefix(c, CommentMarker(r)+"\n") {
		t.Errorf("a cut comment lost its marker")
	}
	// It keeps as many rows as fit: one more would not.
	shown := strings.Count(c, "| fast | sample-")
	if more := comment(r, CommentOptions{SummaryURL: url, MaxChars: CommentLimit, ReasonWidth: 200}, problemRows(r), shown+1); textLen(more) <= CommentLimit {
		t.Errorf("comment shows %d rows but %d would fit", shown, shown+1)
	}
	// Wide characters count double in UTF-16; still within the limit.
	for i := range r.Attempts {
		r.Attempts[i].Explanation = strings.Repeat("😀", 150)
	}
	if n := textLen(Comment(r, CommentOptions{SummaryURL: url})); n > CommentLimit {
		t.Errorf("emoji comment is %d UTF-16 units", n)
	}
	// A fitting comment has every failed row and no pointer.
	if c := Comment(fixture(), CommentOptions{SummaryURL: url}); strings.Contains(c, "not shown") || strings.Count(c, "| fast | add-") != 2 {
		t.Errorf("small comment was cut:\n%s", c)
	}
	if c := Comment(r, CommentOptions{MaxChars: 150}); textLen(c) > 150 || !strings.Contains(c, "see the job summary") {
		t.Errorf("small limit: %q", c)
	}
	if c := Comment(r, CommentOptions{MaxChars: 60}); textLen(c) > 60 || !strings.HasPrefix(c, CommentMarker(r)) {
		t.Errorf("tiny limit: %q", c)
	}
}

func TestCommentMarker(t *testing.T) {
	cases := []struct {
		evalSet, title, want string
	}{
		{"evals/steward.yaml", "nightly", "<!-- steward:report key=evals/steward.yaml/nightly -->"},
		{"steward.yaml", "", "<!-- steward:report key=steward.yaml/ -->"},
		{"a b.yaml", "x-->y", "<!-- steward:report key=a%20b.yaml/x--%3Ey -->"},
		{"e\nv", "t", "<!-- steward:report key=e%0Av/t -->"},
	}
	for _, c := range cases {
		if got := CommentMarker(&Report{EvalSet: c.evalSet, Title: c.title}); got != c.want {
			t.Errorf("CommentMarker(%q, %q) = %q, want %q", c.evalSet, c.title, got, c.want)
		}
	}
	// Different titles of one eval set get different comments.
	if CommentMarker(&Report{EvalSet: "e", Title: "a"}) == CommentMarker(&Report{EvalSet: "e", Title: "b"}) {
		t.Error("titles must key separate comments")
	}
}

func TestEscapers(t *testing.T) {
	cases := []struct{ in, md, plain string }{
		{"a|b", "a&#124;b", "a|b"},
		{"x\ny", "x<br>y", "x ⏎ y"},
		{"x\r\n\r\ny", "x<br>y", "x ⏎ y"},
		{"<b>", "&lt;b&gt;", "<b>"},
		{"@team", "@\u200bteam", "@team"},
		{"\x1b[31mred", "&#91;31mred", "[31mred"},
		{"a\u202Eb", "ab", "ab"},
		{"\xff", "\uFFFD", "\uFFFD"},
	}
	for _, c := range cases {
		if got := MD(c.in, 0); got != c.md {
			t.Errorf("MD(%q) = %q, want %q", c.in, got, c.md)
		}
		if got := Plain(c.in, 0); got != c.plain {
			t.Errorf("Plain(%q) = %q, want %q", c.in, got, c.plain)
		}
	}
	if got := MD("abcdef", 4); got != "abc…" {
		t.Errorf("MD truncation: %q", got)
	}
}

func TestSplitSource(t *testing.T) {
	for _, c := range []struct {
		in   string
		file string
		line int
	}{
		{"evals/a.jsonl:12", "evals/a.jsonl", 12},
		{"evals/a.yaml", "evals/a.yaml", 0},
		{"c:/x/y.yaml:3", "c:/x/y.yaml", 3},
		{"weird:", "weird:", 0},
		{"", "", 0},
	} {
		f, l := SplitSource(c.in)
		if f != c.file || l != c.line {
			t.Errorf("SplitSource(%q) = %q, %d", c.in, f, l)
		}
	}
}
