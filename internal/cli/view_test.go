package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/steward-evals/steward/internal/browsertest"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// seedHistory makes a record of four finished runs of one eval set, one
// task of ten samples at one definition: the pass count falls run by run
// (10, 9, 8, 6), so samples 6 to 9 are flaky; every attempt costs $0.002,
// 300 tokens and 3s, and answers "answer N" (the last run's failures
// answer otherwise, one of them with markup).
func seedHistory(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for i, pass := range []int{10, 9, 8, 6} {
		id := fmt.Sprintf("r%d", i+1)
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		if err := db.StartRun(ctx, record.Run{ID: id, EvalSet: "/evals/steward.yaml", Title: "nightly", Started: at, Host: "runner-1"}); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 10; s++ {
			st, answer := status.Passed, fmt.Sprintf("answer %d", s)
			if s >= pass {
				st = status.Failed
				if i == 3 {
					answer = fmt.Sprintf("answer %d, or rather <b>%d</b>", s, s+1)
				}
			}
			score := 0.0
			if st == status.Passed {
				score = 1
			}
			if err := db.Publish(ctx, record.Attempt{RunID: id, Seq: s, Task: "qa", Sample: fmt.Sprintf("q%02d", s), Attempt: 1, Status: st, Score: &score,
				Answer: answer, Fingerprint: fmt.Sprintf("%s-%d", id, s), Parts: `{"task":"t","sample":"s"}`, Started: at.Add(time.Second),
				Finished: at.Add(4 * time.Second), Duration: 3 * time.Second, InputTokens: 250, OutputTokens: 50, CostUSD: 0.002, Requests: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishRun(ctx, id, status.Finished, at.Add(10*time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, ".steward")
}

func TestTrendsCommand(t *testing.T) {
	rec := seedHistory(t)
	out, code := steward("trends", "--record", rec, "--json")
	var tr struct {
		Runs  []struct{ ID string } `json:"runs"`
		Tasks []struct {
			Task   string `json:"task"`
			Points []struct {
				Score struct {
					Rate float64 `json:"rate"`
				} `json:"score"`
				USD    float64 `json:"usd"`
				Tokens int64   `json:"tokens"`
			} `json:"points"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil || code != 0 || len(tr.Runs) != 4 || len(tr.Tasks) != 1 || tr.Runs[0].ID != "r1" {
		t.Fatalf("trends --json: exit %d, %v\n%s", code, err, out)
	}
	if p := tr.Tasks[0].Points[3]; p.Score.Rate != 0.6 || p.Tokens != 3000 || p.USD < 0.0199 || p.USD > 0.0201 {
		t.Errorf("the last point: %+v", p)
	}
	out, code = steward("trends", "--record", rec, "--limit", "2")
	if code != 0 || !strings.Contains(out, "2 runs of /evals/steward.yaml") || !strings.Contains(out, "60.0% (") || strings.Contains(out, "r1 ") {
		t.Errorf("trends --limit 2: exit %d\n%s", code, out)
	}
	if out, code := steward("trends", "--record", rec, "--limit", "1"); code != ExitBadInput {
		t.Errorf("trends --limit 1: exit %d\n%s", code, out)
	}
	// The HTML report of a run draws its eval set's trend up to it; the
	// HTML comparison has the side by side.
	if out, code := steward("report", "--record", rec, "--run", "r3", "--format", "html"); code != 0 || !strings.Contains(out, `id="trends"`) || !strings.Contains(out, "Trend over 3 runs") {
		t.Errorf("report --format html: exit %d, no trend of 3 runs", code)
	}
	if out, code := steward("compare", rec, "r1", "r4", "--format", "html"); code != 0 || !strings.Contains(out, `id="sidebyside"`) || !strings.Contains(out, "answer 6, or rather &lt;b&gt;7&lt;/b&gt;") {
		t.Errorf("compare --format html: exit %d, no side by side", code)
	}
	// Two records merge by start time.
	other := seedHistory(t)
	if out, code := steward("trends", "--record", rec, "--record", other, "--json", "--limit", "50"); code != 0 || strings.Count(out, `"id":`) != 8 {
		t.Errorf("two records: exit %d\n%s", code, out)
	}
}

// TestViewRecordInChromium serves a record of four runs and walks the
// viewer in headless chromium: the list of runs, a run's report with its
// trend, two runs compared side by side, the flaky ledger; every page
// self-contained (no console or CSP problem), requests for another host
// refused. Screenshots go to testdata/screenshots.
func TestViewRecordInChromium(t *testing.T) {
	rec := seedHistory(t)
	ctx, cancel := context.WithCancel(context.Background())
	db, err := record.OpenReadOnly(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveView(ctx, ln, db, "") }()
	t.Cleanup(func() { cancel(); <-done; db.Close() })
	base := "http://" + ln.Addr().String()
	get := func(path, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, host string
		code       int
		has        string
	}{
		{"/runs", "", 200, `href="/run/r3"`},
		{"/run/r2", "", 200, `id="trends"`},
		{"/run/nope", "", 404, "no run nope"},
		{"/compare?base=r1", "", 404, "name both runs"},
		{"/compare?base=r1&head=nope", "", 404, "no run nope"},
		{"/flaky", "", 200, "q09"},
		{"/runs", "evil.example:80", http.StatusMisdirectedRequest, ""},
		{"/elsewhere", "", 404, ""},
	} {
		code, page := get(tc.path, tc.host)
		if code != tc.code || !strings.Contains(page, tc.has) {
			t.Errorf("GET %s (host %q): %d, want %d with %q:\n%.300s", tc.path, tc.host, code, tc.code, tc.has, page)
		}
	}

	b := browsertest.Start(t)
	b.Run("open the runs", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(`#rtable tr.run`, chromedp.ByQuery))
	var n int
	b.Eval(`document.querySelectorAll('#rtable tr.run').length`, &n)
	if n != 4 {
		t.Errorf("the list shows %d runs, want 4", n)
	}
	var text string
	b.Eval(`document.querySelector('#rtable tr.run').innerText`, &text)
	for _, want := range []string{"r4", "nightly", "finished", "$0.0200", "runner-1"} {
		if !strings.Contains(text, want) {
			t.Errorf("the newest run's row lacks %q: %q", want, text)
		}
	}
	b.Screenshot(browsertest.ShotPath(t, "view-runs.png"))

	b.Run("open a run", chromedp.Click(`#rtable a[href="/run/r3"]`, chromedp.ByQuery), chromedp.WaitVisible(`#trends`, chromedp.ByQuery))
	b.Eval(`document.querySelectorAll('#trend-rate circle.dot').length`, &n)
	if n != 3 { // r1, r2 and r3 itself
		t.Errorf("r3's trend has %d points, want 3", n)
	}
	b.Run("scroll to the trend", chromedp.Evaluate(`document.getElementById('trends').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "view-run-trend.png"))

	b.Run("back to the runs", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(`#compare`, chromedp.ByQuery))
	b.SetInput("cbase", "r1")
	b.SetInput("chead", "r4")
	b.Run("compare", chromedp.Click(`#compare button`, chromedp.ByQuery), chromedp.WaitVisible(`#sidebyside`, chromedp.ByQuery))
	b.Eval(`document.getElementById('verdict').innerText + '\n' + document.querySelector('#sidebyside details.pair[open]').innerText`, &text)
	for _, want := range []string{"verdict", "qa / q06", "answer 6, or rather <b>7</b>"} {
		if !strings.Contains(text, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, text)
		}
	}
	b.Eval(`document.querySelectorAll('#sidebyside details.pair[open]').length + 100*document.querySelectorAll('main b').length`, &n)
	if n != 4 {
		t.Errorf("%d open pairs (+100 × bold elements), want the 4 changed samples and no markup", n)
	}
	b.Run("scroll to the side by side", chromedp.Evaluate(`document.getElementById('sidebyside').scrollIntoView()`, nil))
	b.Screenshot(browsertest.ShotPath(t, "view-compare.png"))

	b.Run("open the flaky ledger", chromedp.Click(`nav.top a[href="/flaky"]`, chromedp.ByQuery), chromedp.WaitVisible(`#ftable`, chromedp.ByQuery))
	var samples []string
	b.Eval(`[...document.querySelectorAll('#ftable tr.flaky td:nth-child(2)')].map(e => e.textContent)`, &samples)
	if strings.Join(samples, ",") != "q06,q07,q08,q09" {
		t.Errorf("flaky samples %q, want q06 to q09", samples)
	}
	b.Screenshot(browsertest.ShotPath(t, "view-flaky.png"))
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the pages logged problems:\n%s", strings.Join(p, "\n"))
	}
}
