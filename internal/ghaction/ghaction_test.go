package ghaction_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

const (
	owner    = "acme"
	repo     = "evals"
	prNumber = 7
	writeTok = "ghs_write_token_0123456789"
	readTok  = "ghs_read_only_token_abcdef"
)

func f64(v float64) *float64 { return &v }

// fixedReport is what the stub launch returns: one failure, one error.
func fixedReport(passed int) *report.Report {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := &report.Report{
		Title: "nightly", EvalSet: "evals/steward.yaml", RunIDs: []string{"r1"},
		Started: t0, Finished: t0.Add(time.Minute),
		Plan:  "4 attempts · 4 samples × 1 task · concurrency 4 (from flag)",
		Spend: report.Spend{USD: 0.12, InputTokens: 4000, OutputTokens: 300, Requests: 9},
	}
	for i := 0; i < 4; i++ {
		row := report.AttemptRow{Task: "qa", Sample: fmt.Sprintf("q%d", i+1), Attempt: 1, Status: status.Passed,
			Score: f64(1), Duration: time.Second, Source: fmt.Sprintf("evals/qa.jsonl:%d", i+1)}
		if i >= passed {
			row.Status, row.Score, row.Explanation = status.Failed, f64(0), "wrong answer\nsecond line"
		}
		if i == 3 && passed < 4 {
			row.Status, row.Score, row.Reason = status.Errored, nil, "agent exited 137 (OOM)"
		}
		r.Attempts = append(r.Attempts, row)
	}
	for _, a := range r.Attempts {
		r.Counts.Total++
		switch a.Status {
		case status.Passed:
			r.Counts.Passed++
		case status.Failed:
			r.Counts.Failed++
		case status.Errored:
			r.Counts.Errored++
		}
	}
	r.Tasks = []report.TaskReport{{Name: "qa", Counts: r.Counts, PassRate: r.Counts.PassRate()}}
	r.Rescore()
	return r
}

// manyReport is a task of n samples, one attempt each, the first passed
// passing: large enough for the paired test to decide.
func manyReport(run string, n, passed int) *report.Report {
	r := &report.Report{Title: "nightly", EvalSet: "evals/steward.yaml", RunIDs: []string{run}}
	for i := 0; i < n; i++ {
		st := status.Passed
		if i >= passed {
			st = status.Failed
		}
		r.Attempts = append(r.Attempts, report.AttemptRow{Task: "qa", Sample: fmt.Sprintf("q%d", i+1), Attempt: 1, Status: st, Run: run})
	}
	r.Recount()
	return r
}

// stubLaunch returns a fixed report and records what it was asked.
type stubLaunch struct {
	mu    sync.Mutex
	calls []ghaction.LaunchOptions
	rep   func() *report.Report
	code  int
	err   error
	log   string // written to opts.Log, as the live panel would
	// during runs inside the launch (the time it takes, on a fake clock).
	during func()
}

func (s *stubLaunch) launch(ctx context.Context, opts ghaction.LaunchOptions) (*report.Report, int, error) {
	s.mu.Lock()
	s.calls = append(s.calls, opts)
	s.mu.Unlock()
	if s.log != "" {
		io.WriteString(opts.Log, s.log)
	}
	if s.during != nil {
		s.during()
	}
	var r *report.Report
	if s.rep != nil {
		r = s.rep()
	}
	return r, s.code, s.err
}

// actionEnv is a GitHub Actions environment in a temporary directory.
type actionEnv struct {
	t         *testing.T
	vars      map[string]string
	workspace string
	stdout    bytes.Buffer
	clock     *clock.Fake // waits pass at once; Waits lists them
}

func newActionEnv(t *testing.T, apiURL, token string) *actionEnv {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	event := filepath.Join(dir, "event.json")
	payload := fmt.Sprintf(`{"action":"synchronize","number":%d,"pull_request":{"number":%d,"head":{"repo":{"full_name":"fork/evals"}}},"repository":{"full_name":"%s/%s"}}`, prNumber, prNumber, owner, repo)
	if err := os.WriteFile(event, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &actionEnv{t: t, workspace: ws, clock: clock.NewInstant(time.Now()), vars: map[string]string{
		"CI":                  "true",
		"GITHUB_ACTIONS":      "true",
		"GITHUB_EVENT_NAME":   "pull_request",
		"GITHUB_EVENT_PATH":   event,
		"GITHUB_REPOSITORY":   owner + "/" + repo,
		"GITHUB_API_URL":      apiURL,
		"GITHUB_SERVER_URL":   "https://github.com",
		"GITHUB_RUN_ID":       "4242",
		"GITHUB_WORKSPACE":    ws,
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "step_summary.md"),
		"GITHUB_OUTPUT":       filepath.Join(dir, "output.txt"),
		"INPUT_EVAL-SET":      "evals/steward.yaml",
		"INPUT_CONCURRENCY":   "4",
		"INPUT_SAMPLES-RAMP":  "40,300",
		"INPUT_BUDGET":        "5",
		"INPUT_RERUN":         "false",
		"INPUT_EARLY-EXIT":    "true",
		"INPUT_SHARD":         "",
		"INPUT_RECORD":        ".steward",
		"INPUT_TITLE":         "nightly",
		"INPUT_GITHUB-TOKEN":  token,
		"INPUT_COMMENT":       "true",
		"INPUT_MODE":          "run",
		"INPUT_RECORDS":       "",
	}}
	for _, f := range []string{"GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"} {
		if err := os.WriteFile(e.vars[f], nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *actionEnv) env() ghaction.Env {
	return ghaction.Env{
		Getenv: func(k string) string { return e.vars[k] },
		Stdout: &e.stdout,
		Stderr: &e.stdout,
		Clock:  e.clock,
	}
}

func (e *actionEnv) read(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.vars[name])
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// outputs parses GITHUB_OUTPUT's name<<delimiter blocks.
func (e *actionEnv) outputs() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	lines := strings.Split(e.read("GITHUB_OUTPUT"), "\n")
	for i := 0; i < len(lines); i++ {
		name, delim, ok := strings.Cut(lines[i], "<<")
		if !ok {
			continue
		}
		var val []string
		for i++; i < len(lines) && lines[i] != delim; i++ {
			val = append(val, lines[i])
		}
		out[name] = strings.Join(val, "\n")
	}
	return out
}

func newFake(t *testing.T) *fakegithub.Server {
	f := fakegithub.New(t)
	f.AddToken(writeTok, "github-actions[bot]", true)
	f.AddToken(readTok, "github-actions[bot]", false)
	f.AddPullRequest(owner, repo, prNumber)
	return f
}

func markerComments(f *fakegithub.Server) []fakegithub.Comment {
	var out []fakegithub.Comment
	for _, c := range f.Comments(owner, repo, prNumber) {
		if strings.HasPrefix(c.Body, "<!-- steward:report ") {
			out = append(out, c)
		}
	}
	return out
}

func TestEndToEndCreatesThenEditsOneComment(t *testing.T) {
	f := newFake(t)
	// 150 comments by people first: the marker comment lands on page 2 and
	// must be found by paginating.
	for i := 0; i < 150; i++ {
		f.AddComment(owner, repo, prNumber, "reviewer", fmt.Sprintf("looks good %d", i))
	}

	// First run: creates the comment.
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(2) }, code: ghaction.ExitFailed}
	code := ghaction.Run(context.Background(), e.env(), stub.launch)
	if code != ghaction.ExitFailed {
		t.Fatalf("exit code %d, want the launch's %d\n%s", code, ghaction.ExitFailed, e.stdout.String())
	}
	cs := markerComments(f)
	if len(cs) != 1 {
		t.Fatalf("%d report comments after the first run, want 1", len(cs))
	}
	first := cs[0]
	if !strings.Contains(first.Body, "**2 passed** · **1 failed** · 1 errored") {
		t.Errorf("comment body:\n%s", first.Body)
	}
	if !strings.HasPrefix(first.Body, "<!-- steward:report key=evals/steward.yaml/nightly -->\n") {
		t.Errorf("comment does not start with its marker:\n%s", first.Body)
	}
	if !strings.Contains(first.Body, "(https://github.com/acme/evals/actions/runs/4242)") {
		t.Errorf("comment does not link to the job summary:\n%s", first.Body)
	}
	if !strings.Contains(first.Body, "`report.html` in the `steward-report` artifact of [this workflow run](https://github.com/acme/evals/actions/runs/4242)") {
		t.Errorf("comment does not point at the HTML report:\n%s", first.Body)
	}

	// What the launch was asked.
	if len(stub.calls) != 1 {
		t.Fatalf("launch called %d times", len(stub.calls))
	}
	got := stub.calls[0]
	if got.EvalSet != "evals/steward.yaml" || got.Concurrency != 4 || got.SamplesRamp != "40,300" ||
		got.BudgetUSD != 5 || got.Rerun || !got.EarlyExit || got.Record != ".steward" || got.Title != "nightly" || got.Merge {
		t.Errorf("launch options: %+v", got)
	}

	// Outputs, summary, report files.
	out := e.outputs()
	want := map[string]string{
		"total": "4", "passed": "2", "failed": "1", "errored": "1", "skipped": "0",
		"pass-rate": "0.5000", "spend-usd": "0.1200", "partial": "false",
		"summary-path": ".steward/report/summary.md", "junit-path": ".steward/report/junit.xml",
		"json-path": ".steward/report/report.json", "report-dir": ".steward/report",
		"html-path": ".steward/report/report.html",
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("output %s = %q, want %q", k, out[k], v)
		}
	}
	if !strings.Contains(out["comment-url"], fmt.Sprintf("#issuecomment-%d", first.ID)) {
		t.Errorf("comment-url output %q", out["comment-url"])
	}
	summary := e.read("GITHUB_STEP_SUMMARY")
	if !strings.Contains(summary, "## Steward: nightly") || !strings.Contains(summary, "### Failed and errored (2)") {
		t.Errorf("step summary:\n%s", summary)
	}
	if !strings.Contains(summary, "`report.html` in the `steward-report` artifact of [this workflow run](https://github.com/acme/evals/actions/runs/4242)") {
		t.Errorf("the summary does not point at the HTML report:\n%s", summary)
	}
	for _, name := range []string{"summary.md", "junit.xml", "report.json", "comment.md", "report.html"} {
		if _, err := os.Stat(filepath.Join(e.workspace, ".steward/report", name)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(e.workspace, ".steward/report/report.json"))
	if err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadJSON(bytes.NewReader(b))
	if err != nil || back.Counts != fixedReport(2).Counts {
		t.Errorf("report.json: %v %+v", err, back)
	}

	// The log: token masked, annotations at the samples' lines, results table.
	log := e.stdout.String()
	if !strings.Contains(log, "::add-mask::"+writeTok+"\n") {
		t.Errorf("the token was not masked")
	}
	if n := strings.Count(log, writeTok); n != 1 {
		t.Errorf("the token appears %d times in the log, want only in add-mask", n)
	}
	if !strings.Contains(log, "::error file=evals/qa.jsonl,line=3,title=Steward%3A qa/q3 #1 failed::wrong answer ⏎ second line\n") {
		t.Errorf("no error annotation for the failed sample:\n%s", log)
	}
	if !strings.Contains(log, "::warning file=evals/qa.jsonl,line=4,title=Steward%3A qa/q4 #1 errored::agent exited 137 (OOM)\n") {
		t.Errorf("no warning annotation for the errored sample:\n%s", log)
	}
	if !strings.Contains(log, report.CountsLine(fixedReport(2).Counts)) {
		t.Errorf("no counts line in the log")
	}

	// Second run, new results: edits the same comment.
	e2 := newActionEnv(t, f.URL, writeTok)
	stub2 := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }, code: ghaction.ExitOK}
	if code := ghaction.Run(context.Background(), e2.env(), stub2.launch); code != ghaction.ExitOK {
		t.Fatalf("second run exit code %d\n%s", code, e2.stdout.String())
	}
	cs = markerComments(f)
	if len(cs) != 1 {
		t.Fatalf("%d report comments after the second run, want 1", len(cs))
	}
	if cs[0].ID != first.ID {
		t.Errorf("second run made comment %d, want an edit of %d", cs[0].ID, first.ID)
	}
	if !strings.Contains(cs[0].Body, "**4 passed** · **0 failed**") {
		t.Errorf("comment not updated:\n%s", cs[0].Body)
	}
	if e2.outputs()["passed"] != "4" {
		t.Errorf("second run outputs: %v", e2.outputs())
	}

	// The API calls, in order: list (2 pages), create; list (2 pages), edit.
	var calls []string
	for _, r := range f.Requests() {
		call := r.Method + " " + r.Path
		if p := r.Query.Get("page"); p != "" {
			call += "?page=" + p
		}
		if r.Query.Get("per_page") != "100" && r.Method == http.MethodGet && r.Path != "/user" && r.Path != "/graphql" {
			t.Errorf("list without per_page=100: %v", r.Query)
		}
		if r.Token != writeTok {
			t.Errorf("request with token %q", r.Token)
		}
		calls = append(calls, call)
	}
	list := "GET /repos/acme/evals/issues/7/comments"
	// GET /user first: the token's identity (403 for the Actions token, an
	// installation token), then GraphQL's viewer, which names it.
	wantCalls := []string{
		"GET /user", "POST /graphql", list, list + "?page=2", "POST /repos/acme/evals/issues/7/comments",
		"GET /user", "POST /graphql", list, list + "?page=2", fmt.Sprintf("PATCH /repos/acme/evals/issues/comments/%d", first.ID),
	}
	if strings.Join(calls, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("API calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
	}
}

// The sticky comment is ours alone: a comment by someone else that carries
// the marker (an imitation, placed before ours) is never edited; ours, by the
// token's identity, is. Both for the Actions token (GET /user refused: the
// bot) and for a personal token (GET /user names the user).
func TestStickyCommentIsOursAlone(t *testing.T) {
	for _, tc := range []struct{ name, tok, me string }{
		{"actions token", "ghs_actionsTok1234", "github-actions[bot]"},
		{"personal token", "ghp_personalTok1234", "octocat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.AddToken(tc.tok, tc.me, true)
			marker := report.CommentMarker(fixedReport(2))
			forged := f.AddComment("acme", "evals", 7, "mallory", marker+"\nforged: all passed")
			// The other identity's genuine-looking comment is not ours either.
			other := "octocat"
			if tc.me == "octocat" {
				other = "github-actions[bot]"
			}
			otherID := f.AddComment("acme", "evals", 7, other, marker+"\nsomeone else's bot")
			e := newActionEnv(t, f.URL, tc.tok)
			stub := &stubLaunch{rep: func() *report.Report { return fixedReport(2) }, code: ghaction.ExitFailed}
			if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitFailed {
				t.Fatalf("exit %d\n%s", code, e.stdout.String())
			}
			e2 := newActionEnv(t, f.URL, tc.tok)
			if code := ghaction.Run(context.Background(), e2.env(), stub.launch); code != ghaction.ExitFailed {
				t.Fatalf("second exit %d\n%s", code, e2.stdout.String())
			}
			var mine []int64
			for _, c := range f.Comments("acme", "evals", 7) {
				switch {
				case c.ID == forged || c.ID == otherID:
					if !strings.HasSuffix(c.Body, "forged: all passed") && !strings.HasSuffix(c.Body, "someone else's bot") {
						t.Errorf("comment %d by %s was edited:\n%s", c.ID, c.User, c.Body)
					}
				case strings.HasPrefix(c.Body, marker):
					if c.User != tc.me {
						t.Errorf("report comment %d by %s, want %s", c.ID, c.User, tc.me)
					}
					mine = append(mine, c.ID)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("our report comments: %v, want exactly one (created, then edited)", mine)
			}
			for _, r := range f.Requests() {
				if r.Method == http.MethodPatch && (strings.HasSuffix(r.Path, fmt.Sprint(forged)) || strings.HasSuffix(r.Path, fmt.Sprint(otherID))) {
					t.Errorf("PATCH of a comment that is not ours: %s", r.Path)
				}
			}
			if !strings.Contains(e.stdout.String(), "did not write") {
				t.Errorf("the log does not say imitations were ignored:\n%s", e.stdout.String())
			}
		})
	}
}

func TestReadOnlyTokenStillSucceeds(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, readTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }, code: ghaction.ExitOK}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitOK {
		t.Fatalf("exit code %d with a read-only token, want 0\n%s", code, e.stdout.String())
	}
	rej := f.TakeRejections()
	if len(rej) != 1 || rej[0].Method != http.MethodPost || rej[0].Status != http.StatusForbidden {
		t.Fatalf("want exactly the refused create, got %+v", rej)
	}
	if len(markerComments(f)) != 0 {
		t.Errorf("a read-only token made a comment")
	}
	if !strings.Contains(e.stdout.String(), "::warning::Steward could not comment on pull request #7: the token is read-only") {
		t.Errorf("the log does not say why there is no comment:\n%s", e.stdout.String())
	}
	summary := e.read("GITHUB_STEP_SUMMARY")
	if !strings.Contains(summary, "_No pull request comment: the token cannot write to pull request #7") {
		t.Errorf("the summary does not say why there is no comment:\n%s", summary)
	}
	if e.outputs()["passed"] != "4" {
		t.Errorf("outputs not written: %v", e.outputs())
	}
}

func TestRateLimitsAreWaitedOut(t *testing.T) {
	f := newFake(t)
	f.InjectRateLimit(fakegithub.Secondary, 30*time.Second)
	f.InjectRateLimit(fakegithub.Primary, 90*time.Second)
	f.InjectRateLimit(fakegithub.TooMany, 20*time.Second)
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit code %d\n%s", code, e.stdout.String())
	}
	if len(markerComments(f)) != 1 {
		t.Fatalf("comment not created after the rate limits")
	}
	if len(e.clock.Waits()) != 3 {
		t.Fatalf("slept %v, want three waits", e.clock.Waits())
	}
	if e.clock.Waits()[0] != 30*time.Second {
		t.Errorf("secondary limit: waited %v, want the Retry-After 30s", e.clock.Waits()[0])
	}
	// The fake GitHub sets the reset 90 s after the limit on the wall clock;
	// the action's clock, started at the wall's time, is 30 s ahead by then.
	if e.clock.Waits()[1] < 55*time.Second || e.clock.Waits()[1] > 62*time.Second {
		t.Errorf("primary limit: waited %v, want until the reset (~61s)", e.clock.Waits()[1])
	}
	if e.clock.Waits()[2] != 20*time.Second {
		t.Errorf("429: waited %v, want the Retry-After 20s", e.clock.Waits()[2])
	}
	limited := 0
	for _, r := range f.Requests() {
		if r.RateLimited != "" {
			limited++
		}
	}
	if limited != 3 {
		t.Errorf("%d rate-limited requests, want 3", limited)
	}
}

func TestRateLimitRetriesAreBounded(t *testing.T) {
	f := newFake(t)
	for i := 0; i < 10; i++ {
		f.InjectRateLimit(fakegithub.Secondary, 10*time.Second)
	}
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("a rate-limited comment must not fail the run: exit %d", code)
	}
	if len(e.clock.Waits()) != 3 {
		t.Errorf("slept %d times, want the bound of 3", len(e.clock.Waits()))
	}
	if got := len(f.Requests()); got != 4 {
		t.Errorf("%d requests, want 4 (one try and three retries)", got)
	}
	if s := e.read("GITHUB_STEP_SUMMARY"); !strings.Contains(s, "still rate limited after 3 retries") {
		t.Errorf("summary does not say the comment was given up:\n%s", s)
	}

	// A limit longer than the longest wait gives up at once.
	f2 := newFake(t)
	f2.InjectRateLimit(fakegithub.Primary, time.Hour)
	e2 := newActionEnv(t, f2.URL, writeTok)
	if code := ghaction.Run(context.Background(), e2.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if len(e2.clock.Waits()) != 0 {
		t.Errorf("waited %v for an hour-long limit", e2.clock.Waits())
	}
	if !strings.Contains(e2.stdout.String(), "longer than the 2m0s this action waits") {
		t.Errorf("log does not explain:\n%s", e2.stdout.String())
	}
}

func TestBadInputsRunNothing(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_CONCURRENCY"] = "many"
	e.vars["INPUT_SHARD"] = "5/4"
	e.vars["INPUT_MODE"] = "deploy"
	e.vars["INPUT_COMMENT"] = "maybe"
	e.vars["INPUT_BUDGET"] = "-1"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitBadInput {
		t.Fatalf("exit %d, want %d", code, ghaction.ExitBadInput)
	}
	if len(stub.calls) != 0 {
		t.Errorf("launch ran despite bad inputs")
	}
	log := e.stdout.String()
	for _, want := range []string{
		`::error title=Steward%3A bad input::input mode: "deploy" is not run or merge`,
		`::error title=Steward%3A bad input::input concurrency: "many" is not a whole number`,
		`::error title=Steward%3A bad input::input budget: "-1" is not an amount`,
		`::error title=Steward%3A bad input::input comment: "maybe" is not a boolean`,
		`::error title=Steward%3A bad input::input shard: parse shard "5/4": the index must be between 1 and 4`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// The summary says what was wrong.
	if sum := e.read("GITHUB_STEP_SUMMARY"); !strings.Contains(sum, "## Steward: bad input") || !strings.Contains(sum, "5 error(s)") || !strings.Contains(sum, `deploy`) {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestMergeModeExpandsRecords(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, writeTok)
	for i := 1; i <= 3; i++ {
		d := filepath.Join(e.workspace, "shards", fmt.Sprintf("steward-record-%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.vars["INPUT_MODE"] = "merge"
	e.vars["INPUT_RECORDS"] = "shards/steward-record-*\n"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.stdout.String())
	}
	got := stub.calls[0]
	if !got.Merge || len(got.Records) != 3 || !strings.HasSuffix(got.Records[2], "shards/steward-record-3") {
		t.Errorf("merge options: %+v", got)
	}
	if len(markerComments(f)) != 1 {
		t.Errorf("merge mode must post the single comment")
	}

	e.vars["INPUT_RECORDS"] = "nothing-here/*"
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitBadInput {
		t.Errorf("a records glob that matches nothing: exit %d", code)
	}
}

func TestNoCommentOutsidePullRequests(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, writeTok)
	e.vars["GITHUB_EVENT_NAME"] = "push"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("%d API requests on a push event", n)
	}
	if e.outputs()["total"] != "4" {
		t.Errorf("outputs: %v", e.outputs())
	}

	// comment: false on a pull request: no requests either.
	e2 := newActionEnv(t, f.URL, writeTok)
	e2.vars["INPUT_COMMENT"] = "false"
	if code := ghaction.Run(context.Background(), e2.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("%d API requests with comment: false", n)
	}

	// workflow_run with a pr-number input (the fork-safe reporter) comments.
	e3 := newActionEnv(t, f.URL, writeTok)
	e3.vars["GITHUB_EVENT_NAME"] = "workflow_run"
	e3.vars["INPUT_PR-NUMBER"] = fmt.Sprint(prNumber)
	if code := ghaction.Run(context.Background(), e3.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if len(markerComments(f)) != 1 {
		t.Errorf("the workflow_run reporter did not comment")
	}
}

func TestCancelledRunStillReports(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, writeTok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the runner's SIGINT arrived during the run
	stub := &stubLaunch{
		rep: func() *report.Report {
			r := fixedReport(2)
			r.Partial = true
			r.Left = []string{"qa: 3 attempts not dispatched"}
			return r
		},
		code: 130,
		err:  fmt.Errorf("run cancelled: %w", context.Canceled),
	}
	if code := ghaction.Run(ctx, e.env(), stub.launch); code != 130 {
		t.Fatalf("exit %d, want the launch's 130", code)
	}
	cs := markerComments(f)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "**Partial report:**") {
		t.Fatalf("the partial report was not posted: %+v", cs)
	}
	if s := e.read("GITHUB_STEP_SUMMARY"); !strings.Contains(s, "qa: 3 attempts not dispatched") {
		t.Errorf("summary lacks what was left:\n%s", s)
	}
	if e.outputs()["partial"] != "true" {
		t.Errorf("partial output: %v", e.outputs())
	}
	// A clear notice, not "context canceled".
	log := e.stdout.String()
	if !strings.Contains(log, "::notice::Steward: the run was cancelled. 4 of 4 attempts finished (2 passed)") || strings.Contains(log, "context canceled") {
		t.Errorf("the cancellation is not said clearly in the log:\n%s", log)
	}
}

func TestEvalOutputCannotIssueWorkflowCommands(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{
		rep: func() *report.Report {
			r := fixedReport(2)
			r.Attempts[2].Explanation = "bad\n::set-output name=passed::999\n::add-mask::x"
			r.Attempts[2].Sample = "::warning::fake"
			return r
		},
		log: "agent said: hello\n::set-output name=total::999\n",
	}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	log := e.stdout.String()
	// The launch's output sits between stop-commands and its resume token.
	i := strings.Index(log, "::stop-commands::")
	j := strings.Index(log, "::set-output name=total::999")
	if i < 0 || j < i {
		t.Fatalf("launch output not fenced by stop-commands:\n%s", log)
	}
	tok := strings.SplitN(log[i+len("::stop-commands::"):], "\n", 2)[0]
	if k := strings.Index(log, "::"+tok+"::"); k < j {
		t.Errorf("commands resumed before the launch output ended")
	}
	// No line outside the fences starts a command we did not write.
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "::set-output") || strings.HasPrefix(l, "::add-mask::x") || strings.HasPrefix(l, "::warning::fake") {
			if !strings.Contains(log[i:], l) {
				t.Errorf("unfenced command line %q", l)
			}
		}
	}
	if got := e.outputs()["total"]; got != "4" {
		t.Errorf("total output %q", got)
	}
	if strings.Contains(log, "::error file=evals/qa.jsonl,line=3,title=Steward%3A qa/%3A%3Awarning%3A%3Afake #1 failed::bad ⏎ ::set-output name=passed::999 ⏎ ::add-mask::x\n") == false {
		t.Errorf("hostile annotation not escaped onto one line:\n%s", log)
	}
}

func TestLaunchFailureWithoutReport(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	stub := &stubLaunch{err: errors.New("load eval set: evals/steward.yaml:3: tasks: unknown key \"taks\"\nsecond line"), code: 2}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 2 {
		t.Fatalf("exit %d, want the launch's 2", code)
	}
	stub.code = 0
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitInfra {
		t.Fatalf("exit %d, want %d when the launch gives no code", code, ghaction.ExitInfra)
	}
	if !strings.Contains(e.stdout.String(), `::error::load eval set: evals/steward.yaml:3: tasks: unknown key "taks" ⏎ second line`) {
		t.Errorf("error not reported:\n%s", e.stdout.String())
	}
}

func TestReportFilesAreValid(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["GITHUB_EVENT_NAME"] = "push"
	e.vars["INPUT_REPORT-DIR"] = "out/reports"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(1) }}
	ghaction.Run(context.Background(), e.env(), stub.launch)
	b, err := os.ReadFile(filepath.Join(e.workspace, "out/reports/report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if e.outputs()["junit-path"] != "out/reports/junit.xml" {
		t.Errorf("junit-path %q", e.outputs()["junit-path"])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// After a cancellation the reporting is bounded so that it ends before the
// runner's kill: an API that never answers costs the comment, not the files.
func TestCancelledReportingIsBounded(t *testing.T) {
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := e.env()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	env.Clock = clk
	hung := make(chan struct{}, 10)
	env.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hung <- struct{}{}
		<-r.Context().Done() // a GitHub that never answers
		return nil, r.Context().Err()
	})}
	stub := &stubLaunch{rep: func() *report.Report {
		r := fixedReport(2)
		r.Partial = true
		return r
	}, code: 130, err: context.Canceled,
		during: func() { clk.Advance(30 * time.Second) }} // the launch takes 30 s after the signal, more than the 9 s budget
	if code := ghaction.Run(ctx, env, stub.launch); code != 130 {
		t.Fatalf("exit %d", code)
	}
	if len(hung) == 0 {
		t.Fatalf("the comment was not attempted")
	}
	s := e.read("GITHUB_STEP_SUMMARY")
	if !strings.Contains(s, "**Partial report:**") || !strings.Contains(s, "context deadline exceeded") {
		t.Errorf("summary:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(e.workspace, ".steward/report/junit.xml")); err != nil {
		t.Errorf("report files not written: %v", err)
	}
}

// fail-on decides the exit from the results; bad input, infrastructure
// errors and cancellation are never hidden. The comparison with the
// baseline is in the summary and the comment.
func TestFailOnAndBaseline(t *testing.T) {
	base := fixedReport(4) // all passed on base
	cases := []struct {
		failOn   string
		baseline bool
		passed   int // head: fixedReport(passed)
		code     int // the launch's
		want     int
		extra    map[string]string
	}{
		{"", false, 2, ghaction.ExitFailed, ghaction.ExitFailed, nil},
		{"failures", false, 4, ghaction.ExitOK, ghaction.ExitOK, nil},
		{"never", false, 2, ghaction.ExitFailed, ghaction.ExitOK, nil},
		{"never", false, 2, ghaction.ExitInfra, ghaction.ExitInfra, nil},
		{"never", false, 2, 130, 130, nil},
		{"errors", false, 2, ghaction.ExitFailed, ghaction.ExitOK, nil},
		{"errors", false, 2, ghaction.ExitInfra, ghaction.ExitInfra, nil},
		{"pass-rate<0.4", false, 2, ghaction.ExitFailed, ghaction.ExitOK, nil},
		{"pass-rate<60%", false, 2, ghaction.ExitFailed, ghaction.ExitFailed, nil},
		{"pass-rate<0.9", false, 4, ghaction.ExitOK, ghaction.ExitOK, nil},
		// Two of four samples flipped: no evidence either way (p = 0.25), so
		// the step passes with a warning, unless on-inconclusive says fail.
		{"regression", true, 2, ghaction.ExitFailed, ghaction.ExitOK, nil},
		{"regression", true, 2, ghaction.ExitFailed, ghaction.ExitFailed, map[string]string{"INPUT_ON-INCONCLUSIVE": "fail"}},
		{"regression", false, 2, ghaction.ExitFailed, ghaction.ExitFailed, nil},
		{"regression-same", true, 2, ghaction.ExitFailed, ghaction.ExitOK, nil}, // the same failures on base: not worse
		{"regression-real", true, 2, ghaction.ExitFailed, ghaction.ExitFailed, nil},
		{"regression-real", true, 2, ghaction.ExitFailed, ghaction.ExitOK, map[string]string{"INPUT_MIN-EFFECT": "60"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%v/%d/%d/%v", tc.failOn, tc.baseline, tc.passed, tc.code, tc.extra), func(t *testing.T) {
			e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
			e.vars["INPUT_COMMENT"] = "false"
			e.vars["INPUT_FAIL-ON"] = tc.failOn
			for k, v := range tc.extra {
				e.vars[k] = v
			}
			base := base
			head := func() *report.Report { return fixedReport(tc.passed) }
			switch tc.failOn {
			case "regression-same":
				e.vars["INPUT_FAIL-ON"] = "regression"
				base = fixedReport(2)
			case "regression-real":
				// 40 of 40 on base, 20 of 40 on head: a real drop.
				e.vars["INPUT_FAIL-ON"] = "regression"
				base = manyReport("b", 40, 40)
				head = func() *report.Report { return manyReport("h", 40, 20) }
			}
			env := e.env()
			if tc.baseline {
				e.vars["INPUT_BASELINE"] = ".steward-base"
				env.Baseline = func(ctx context.Context, p string) (*report.Report, error) {
					if p != filepath.Join(e.workspace, ".steward-base") {
						t.Errorf("baseline path %s", p)
					}
					return base, nil
				}
			}
			stub := &stubLaunch{rep: head, code: tc.code}
			if got := ghaction.Run(context.Background(), env, stub.launch); got != tc.want {
				t.Fatalf("exit %d, want %d\n%s", got, tc.want, e.stdout.String())
			}
			if tc.baseline {
				sum := e.read("GITHUB_STEP_SUMMARY")
				if !strings.Contains(sum, "### Compared with base") || (tc.failOn != "regression-same") != strings.Contains(sum, "Newly failing") {
					t.Errorf("summary has no comparison:\n%s", sum)
				}
				out := e.read("GITHUB_OUTPUT")
				if !strings.Contains(out, "verdict<<") && !strings.Contains(out, "verdict=") {
					t.Errorf("no verdict output:\n%s\n%s\n%s", out, sum, e.stdout.String())
				}
				if tc.failOn == "regression" && tc.passed == 2 && !strings.Contains(e.stdout.String(), "::warning::Steward: the verdict is inconclusive") {
					t.Errorf("no inconclusive warning:\n%s", e.stdout.String())
				}
			}
		})
	}
	// A baseline that is not there: a warning and a note, no comparison.
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_COMMENT"] = "false"
	e.vars["INPUT_BASELINE"] = "missing"
	env := e.env()
	env.Baseline = func(context.Context, string) (*report.Report, error) { return nil, fmt.Errorf("no record at missing") }
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }, code: ghaction.ExitOK}
	if got := ghaction.Run(context.Background(), env, stub.launch); got != ghaction.ExitOK {
		t.Fatalf("exit %d", got)
	}
	if !strings.Contains(e.stdout.String(), "::warning::Steward: no comparison with the base") || !strings.Contains(e.read("GITHUB_STEP_SUMMARY"), "No comparison with the base") {
		t.Errorf("no warning for a missing baseline:\n%s", e.stdout.String())
	}
	// A bad fail-on is bad input.
	e = newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_FAIL-ON"] = "pass-rate<2"
	if got := ghaction.Run(context.Background(), e.env(), stub.launch); got != ghaction.ExitBadInput {
		t.Fatalf("fail-on pass-rate<2: exit %d", got)
	}
}

// decideStub plays a head whose flipped samples are truly broken: round 1
// is the planned run; every later call carries round 1's attempts and adds
// opts.Confirm more of each confirmed sample, which fail again.
type decideStub struct {
	calls []ghaction.LaunchOptions
	extra map[string]int // task/sample -> attempts added so far
	// evalSet is the eval set's decide: the launch reports.
	evalSet *report.DecideSettings
}

func (d *decideStub) launch(_ context.Context, opts ghaction.LaunchOptions) (*report.Report, int, error) {
	d.calls = append(d.calls, opts)
	run := fmt.Sprintf("h%d", len(d.calls))
	r := &report.Report{Title: "nightly", EvalSet: "evals/steward.yaml", RunIDs: []string{run}}
	for i := 0; i < 40; i++ {
		st := status.Passed
		if i < 2 || i >= 36 { // q1, q2 broke on head; q37..q40 fail on both sides
			st = status.Failed
		}
		row := report.AttemptRow{Task: "qa", Sample: fmt.Sprintf("q%d", i+1), Attempt: 1, Status: st, Run: run}
		if run != "h1" {
			row.Carried, row.CarriedFrom = true, "h1"
		}
		r.Attempts = append(r.Attempts, row)
	}
	for _, s := range opts.ConfirmSamples {
		for k := 0; k < opts.Confirm; k++ {
			d.extra[s]++
			_, sample, _ := strings.Cut(s, "/")
			r.Attempts = append(r.Attempts, report.AttemptRow{Task: "qa", Sample: sample, Attempt: 1 + d.extra[s], Status: status.Failed, Run: run, CostUSD: 0.01})
		}
	}
	// Attempts of earlier decide rounds are carried too.
	for s, n := range d.extra {
		confirmedNow := false
		for _, c := range opts.ConfirmSamples {
			confirmedNow = confirmedNow || c == s
		}
		_, sample, _ := strings.Cut(s, "/")
		done := n
		if confirmedNow {
			done = n - opts.Confirm
		}
		for a := 2; a <= done+1; a++ {
			r.Attempts = append(r.Attempts, report.AttemptRow{Task: "qa", Sample: sample, Attempt: a, Status: status.Failed, Run: run, Carried: true, CarriedFrom: "earlier"})
		}
	}
	r.Recount()
	for _, a := range r.Attempts {
		if !a.Carried {
			r.Spend.USD += a.CostUSD
		}
	}
	r.Decide = d.evalSet
	r.Tasks[0].Planned = 1 // attempts above 1 are decide's extras
	return r, ghaction.ExitFailed, nil
}

func TestDecideSpendsOnlyOnUncertainSamples(t *testing.T) {
	// Base holds three attempts of every sample (a nightly --confirm's
	// evidence): q1..q36 passed all three, q37..q40 none.
	base := &report.Report{Title: "nightly", EvalSet: "evals/steward.yaml", RunIDs: []string{"b"}}
	for i := 0; i < 40; i++ {
		for a := 1; a <= 3; a++ {
			st := status.Passed
			if i >= 36 {
				st = status.Failed
			}
			base.Attempts = append(base.Attempts, report.AttemptRow{Task: "qa", Sample: fmt.Sprintf("q%d", i+1), Attempt: a, Status: st, Run: "b"})
		}
	}
	base.Recount()
	var evalSet *report.DecideSettings
	run := func(decide string) (*decideStub, int, *actionEnv) {
		e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
		e.vars["INPUT_COMMENT"] = "false"
		e.vars["INPUT_FAIL-ON"] = "regression"
		e.vars["INPUT_BASELINE"] = ".steward-base"
		e.vars["INPUT_DECIDE"] = decide
		env := e.env()
		env.Baseline = func(context.Context, string) (*report.Report, error) { return base, nil }
		d := &decideStub{extra: map[string]int{}, evalSet: evalSet}
		return d, ghaction.Run(context.Background(), env, d.launch), e
	}
	// Without decide: q1 and q2 failed their one attempt where base passed
	// three of three: p = (1/4)² = 0.0625, not below 0.025: inconclusive,
	// and the step passes.
	d, code, e := run("off")
	if code != ghaction.ExitOK || len(d.calls) != 1 {
		t.Fatalf("decide off: exit %d after %d launches\n%s", code, len(d.calls), e.stdout.String())
	}
	// With decide the first look (of four) tests at 0.04: still
	// inconclusive, so rounds run on exactly the two discordant samples
	// (q37..q40 fail on both sides: nothing to learn there). Their extra
	// attempts fail again; conditioned on the selection that added them,
	// after one round each sample gives 1/20 (not the plain 1/64): p =
	// 0.0025, not below look 2's 0.0017; after two, 1/52 each: p = 0.00037,
	// regressed at look 3.
	d, code, e = run("rounds=3,per-round=2,attempts=100")
	if code != ghaction.ExitFailed || len(d.calls) != 3 {
		t.Fatalf("decide: exit %d after %d launches\n%s", code, len(d.calls), e.stdout.String())
	}
	got := d.calls[1]
	if got.Confirm != 2 || strings.Join(got.ConfirmSamples, ",") != "qa/q1,qa/q2" {
		t.Errorf("round 2 ran %d more of %v", got.Confirm, got.ConfirmSamples)
	}
	sum := e.read("GITHUB_STEP_SUMMARY")
	if !strings.Contains(sum, "**Decide:** 2 round(s), 8 extra attempt(s)") || !strings.Contains(sum, "look 3 of 4") || !strings.Contains(sum, "🔻 **regressed**") {
		t.Errorf("summary:\n%s", sum)
	}
	// The attempts limit stops decide before a round it cannot pay for.
	d, code, e = run("rounds=3,per-round=2,attempts=1")
	if len(d.calls) != 1 {
		t.Fatalf("attempts=1: %d launches, %v", len(d.calls), d.calls)
	}
	if sum := e.read("GITHUB_STEP_SUMMARY"); code != ghaction.ExitOK || !strings.Contains(sum, "stopped undecided: the 1 extra attempts are spent") {
		t.Errorf("attempts=1: exit %d\n%s", code, sum)
	}
	// A limit smaller than a round truncates it to the samples it pays for.
	d, _, _ = run("rounds=3,per-round=2,attempts=4")
	if len(d.calls) < 2 || len(d.calls[1].ConfirmSamples) != 2 {
		t.Errorf("attempts=4: %d launches, %v", len(d.calls), d.calls)
	}
	// The eval set's decide: applies when the input is not set, and
	// decide: off turns it off.
	evalSet = &report.DecideSettings{Rounds: 3, PerRound: 2, Attempts: 100}
	if d, code, _ := run(""); code != ghaction.ExitFailed || len(d.calls) != 3 {
		t.Errorf("the eval set's decide: exit %d after %d launches", code, len(d.calls))
	}
	if d, code, _ := run("off"); code != ghaction.ExitOK || len(d.calls) != 1 {
		t.Errorf("decide: off over the eval set's: exit %d after %d launches", code, len(d.calls))
	}
	evalSet = nil
	// Bad settings are bad input.
	for _, bad := range []string{"rounds=0", "rounds=x", "usd=-1", "time=soon", "tries=3", "maybe"} {
		_, code, _ := run(bad)
		if code != ghaction.ExitBadInput {
			t.Errorf("decide %q: exit %d", bad, code)
		}
	}
}

// The action writes into report-dir every format of the table that has a
// file (markdown as summary.md, with its notes): a format added to
// report.Formats lands there with no change here.
func TestReportDirFollowsTheFormatTable(t *testing.T) {
	saved := report.Formats
	t.Cleanup(func() { report.Formats = saved })
	report.Formats = append(append([]report.Format(nil), saved...), report.Format{Name: "probe", File: "probe.txt",
		Render: func(w io.Writer, rep *report.Report) error {
			_, err := fmt.Fprintf(w, "probe: %d attempts\n", rep.Counts.Total)
			return err
		}})
	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["GITHUB_EVENT_NAME"] = "push"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(1) }}
	ghaction.Run(context.Background(), e.env(), stub.launch)
	dir := filepath.Join(e.workspace, ".steward/report")
	if b, err := os.ReadFile(filepath.Join(dir, "probe.txt")); err != nil || string(b) != "probe: 4 attempts\n" {
		t.Errorf("probe.txt %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.md")); err == nil {
		t.Error("the action wrote report.md beside summary.md")
	}
}
