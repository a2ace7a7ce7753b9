package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/steward-evals/steward/internal/browsertest"
)

// hostileHTML is eval output that tries to run in the page.
const hostileHTML = `<img src=x onerror=alert(1)></script><script>alert(2)</script><!-- <b>bold</b>`

func writeHTML(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHTMLInChromium opens the report from file:// in headless chromium:
// no console errors or refused resources, the table filters and sorts, a
// transcript opens and shows its messages, and hostile eval output stays
// text (no element, no dialog, no script). Screenshots go to testdata.
func TestHTMLInChromium(t *testing.T) {
	r := htmlFixture()
	// Hostile output everywhere a page could be broken from.
	r.Attempts[1].Sample = "add-2 " + hostileHTML
	r.Attempts[1].Explanation = hostileHTML
	r.Attempts[1].Log = strings.Repeat("agent log line\n", 5) + hostileHTML
	r.Attempts[0].Details.Transcript = transcriptFixture(hostileHTML)
	r.Attempts[0].Details.Artifacts[0].Text = "# Notes\n" + hostileHTML
	r.Hold = hostileHTML
	path := writeHTML(t, r)

	b := browsertest.Start(t)
	b.Run("open the report", chromedp.Navigate(browsertest.FileURL(t, path)), chromedp.WaitVisible(`#arows tr.row`, chromedp.ByQuery))
	var n int
	b.Eval(`document.querySelectorAll('#arows tr.row').length`, &n)
	if n != len(r.Attempts) {
		t.Errorf("table shows %d rows, want %d", n, len(r.Attempts))
	}
	b.Screenshot(browsertest.ShotPath(t, "report.png"))

	// Filters: by status, by text, by task.
	b.SetInput("fstatus", "failed")
	var samples []string
	b.Eval(`[...document.querySelectorAll('#arows tr.row td.sample')].map(e => e.textContent)`, &samples)
	if len(samples) != 1 || samples[0] != r.Attempts[1].Sample {
		t.Errorf("status filter failed shows %q, want only %q", samples, r.Attempts[1].Sample)
	}
	b.SetInput("fstatus", "")
	b.Run("type a filter", chromedp.SendKeys(`#q`, "repo-", chromedp.ByID))
	b.Eval(`[...document.querySelectorAll('#arows tr.row td.sample')].map(e => e.textContent)`, &samples)
	if len(samples) != 4 {
		t.Errorf("text filter repo- shows %q, want the 4 repo attempts", samples)
	}
	b.SetInput("q", "")
	b.SetInput("ftask", "slow")
	b.Eval(`document.querySelectorAll('#arows tr.row').length`, &n)
	if n != 4 {
		t.Errorf("task filter slow shows %d rows, want 4", n)
	}
	b.SetInput("ftask", "")
	// Sort by duration, descending on the second click.
	b.Run("sort", chromedp.Click(`#atable th[data-k="d"]`, chromedp.ByQuery), chromedp.Click(`#atable th[data-k="d"]`, chromedp.ByQuery))
	var first string
	b.Eval(`document.querySelector('#arows tr.row td.sample').textContent`, &first)
	if first != "repo-1" {
		t.Errorf("sorted by duration descending, the first row is %q, want repo-1 (75s)", first)
	}
	b.Run("unsort", chromedp.Click(`#atable th[data-k="i"]`, chromedp.ByQuery))

	b.Run("scroll to the table", chromedp.Evaluate(`document.getElementById('attempts').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "table.png"))

	// Open the first attempt and its first model call.
	b.Run("open attempt", chromedp.Click(`#arows tr.row`, chromedp.ByQuery), chromedp.WaitVisible(`.transcript .call summary`, chromedp.ByQuery))
	b.Run("open call", chromedp.Click(`.transcript .call summary`, chromedp.ByQuery), chromedp.WaitVisible(`.transcript .call .msg`, chromedp.ByQuery))
	var text string
	b.Eval(`document.querySelector('.transcript').innerText`, &text)
	for _, want := range []string{"2 model calls", "/v1/chat/completions", "gpt-4o-mini", "1 retry", "You answer with one word.",
		"What is the capital of France? " + hostileHTML, "tool call lookup", "truncated:"} {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
			t.Errorf("the open transcript does not show %q:\n%s", want, text)
		}
	}
	b.Run("open second call", chromedp.Click(`.transcript .call:nth-of-type(2) summary`, chromedp.ByQuery),
		chromedp.WaitVisible(`.transcript .call:nth-of-type(2) .msg`, chromedp.ByQuery))
	b.Eval(`document.querySelector('.transcript').innerText`, &text)
	for _, want := range []string{"Be brief.", "tool result (tu_1)", "Paris " + hostileHTML, "Paris. " + hostileHTML} {
		if !strings.Contains(strings.ToLower(text), strings.ToLower(want)) {
			t.Errorf("the Anthropic call does not show %q:\n%s", want, text)
		}
	}
	// Its artifacts: the text one opens, the binary and the refused one say so.
	b.Run("open artifact", chromedp.Click(`.artifacts .artifact summary`, chromedp.ByQuery), chromedp.WaitVisible(`.artifacts .artifact pre`, chromedp.ByQuery))
	b.Eval(`document.querySelector('.artifacts').textContent`, &text)
	for _, want := range []string{"artifacts · 3 files", "out/notes.md", "# Notes\n" + hostileHTML, "out/plot.png · 2k bytes · binary, not shown", "out/link.txt · 0 bytes · a symlink: refused"} {
		if !strings.Contains(text, want) {
			t.Errorf("the artifacts do not show %q:\n%s", want, text)
		}
	}
	b.Run("scroll to the attempt", chromedp.Evaluate(`document.querySelector('#arows tr.open').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "transcript.png"))
	// Open the hostile attempt too.
	b.Run("open hostile attempt", chromedp.Click(`#arows tr.row:nth-of-type(3)`, chromedp.ByQuery))

	// Hostile output stayed text: no element it names exists, no extra script ran.
	var counts map[string]int
	b.Eval(`({img: document.querySelectorAll('img').length, b: document.querySelectorAll('main b').length,
		script: document.querySelectorAll('script').length, pwned: typeof window.pwned === 'undefined' ? 0 : 1})`, &counts)
	if counts["img"] != 0 || counts["b"] != 0 || counts["pwned"] != 0 || counts["script"] != len(r.Attempts)+2 {
		t.Errorf("hostile output became markup: %v", counts)
	}
	b.Eval(`document.body.innerText`, &text)
	if !strings.Contains(text, "expected 4") && !strings.Contains(text, hostileHTML) {
		t.Errorf("the hostile explanation is not shown as text")
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestHTML10kInChromium opens a 10 000-attempt report (each with a log and
// a three-call transcript): the table shows a page of rows, pages on, and
// filters the whole set; details stay unparsed until opened.
func TestHTML10kInChromium(t *testing.T) {
	path := writeHTML(t, bigReport(10000))
	b := browsertest.Start(t)
	start := time.Now()
	b.Run("open", chromedp.Navigate(browsertest.FileURL(t, path)), chromedp.WaitVisible(`#arows tr.row`, chromedp.ByQuery))
	t.Logf("10 000 attempts: first rows visible after %s", time.Since(start).Round(time.Millisecond))
	var n int
	var shown string
	b.Eval(`document.querySelectorAll('#arows tr.row').length`, &n)
	b.Eval(`document.getElementById('shown').textContent`, &shown)
	if n != 500 || shown != "10000 attempts" {
		t.Errorf("first page: %d rows, %q", n, shown)
	}
	b.Run("more", chromedp.Click(`#more`, chromedp.ByID))
	b.Eval(`document.querySelectorAll('#arows tr.row').length`, &n)
	if n != 1000 {
		t.Errorf("after show more: %d rows, want 1000", n)
	}
	b.SetInput("ftask", "task-3")
	b.Eval(`document.getElementById('shown').textContent`, &shown)
	if shown != "2000 of 10000 attempts" {
		t.Errorf("task filter: %q", shown)
	}
	b.Run("open one", chromedp.Click(`#arows tr.row`, chromedp.ByQuery), chromedp.WaitVisible(`.transcript`, chromedp.ByQuery))
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the page logged problems:\n%s", strings.Join(p, "\n"))
	}
}
