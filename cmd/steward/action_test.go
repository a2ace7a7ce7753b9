package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/record"
)

// ghEnv is a GitHub Actions job environment for `steward action` in dir.
type ghEnv struct {
	dir, summary, output, event string
	vars                        map[string]string
}

func newGHEnv(t *testing.T, dir, apiURL string, pr int) *ghEnv {
	t.Helper()
	g := &ghEnv{
		dir:     dir,
		summary: filepath.Join(dir, "step_summary.md"),
		output:  filepath.Join(dir, "github_output"),
		event:   filepath.Join(dir, "event.json"),
	}
	writeFile(t, g.event, fmt.Sprintf(`{"action":"synchronize","number":%d,"pull_request":{"number":%d,"head":{"ref":"feature"},"base":{"ref":"main"}},"repository":{"full_name":"octo/evals"}}`, pr, pr))
	writeFile(t, g.summary, "")
	writeFile(t, g.output, "")
	g.vars = map[string]string{
		"GITHUB_ACTIONS":      "true",
		"CI":                  "true",
		"GITHUB_WORKSPACE":    dir,
		"GITHUB_STEP_SUMMARY": g.summary,
		"GITHUB_OUTPUT":       g.output,
		"GITHUB_REPOSITORY":   "octo/evals",
		"GITHUB_EVENT_NAME":   "pull_request",
		"GITHUB_EVENT_PATH":   g.event,
		"GITHUB_API_URL":      apiURL,
		"GITHUB_SERVER_URL":   "https://github.com",
		"GITHUB_RUN_ID":       "4242",
		"INPUT_EVAL-SET":      "steward.yaml",
		"INPUT_COMMENT":       "true",
		"INPUT_RECORD":        ".steward",
		"INPUT_REPORT-DIR":    "out/report",
		"INPUT_MODE":          "run",
	}
	return g
}

func (g *ghEnv) cmd(args ...string) *exec.Cmd {
	if len(args) == 0 {
		args = []string{"action"}
	}
	c := exec.Command(exe, args...)
	c.Dir = g.dir
	// Only what a runner would pass: no inherited INPUT_* or GITHUB_*.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	for k, v := range g.vars {
		env = append(env, k+"="+v)
	}
	c.Env = env
	return c
}

func (g *ghEnv) run(t *testing.T) (string, int) {
	t.Helper()
	c := g.cmd()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// outputs parses GITHUB_OUTPUT (name<<DELIM ... DELIM, and name=value).
func readOutputs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if name, delim, ok := strings.Cut(line, "<<"); ok {
			var val []string
			for sc.Scan() && sc.Text() != delim {
				val = append(val, sc.Text())
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		if name, val, ok := strings.Cut(line, "="); ok {
			out[name] = val
		}
	}
	return out
}

// localEvalSet is a small model-bound eval set on the local provider and the
// mock model: 3 samples pass, 1 fails.
const localEvalSet = `
name: action-e2e
model: {upstream: mock, name: mock-1}
tasks:
  - name: arith
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - {id: mul, input: "What is 6*7?", target: "42"}
      - {id: add, input: "What is 1+2?", target: "3"}
      - {id: sub, input: "What is 10-4?", target: "6"}
      - {id: wrong, input: "What is 2+2?", target: "5"}
`

// The action end to end, as the runner starts it: the first run creates the
// sticky comment, the second edits the same one; outputs, summary and report
// files are written; a read-only token still succeeds and says why there is
// no comment. The fake GitHub fails the test on any request GitHub would
// reject.
func TestActionEndToEnd(t *testing.T) {
	gh := fakegithub.New(t)
	gh.AddToken("ghs_writeToken1234", "github-actions[bot]", true)
	gh.AddToken("ghs_readOnlyToken5678", "github-actions[bot]", false)
	gh.AddPullRequest("octo", "evals", 17)
	// Other comments on the PR, enough for the sticky one to sit beyond the
	// first page once it exists (the action must paginate to find it).
	for i := 0; i < 120; i++ {
		gh.AddComment("octo", "evals", 17, "someone", fmt.Sprintf("review note %d", i))
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), localEvalSet)
	g := newGHEnv(t, dir, gh.URL, 17)
	g.vars["INPUT_GITHUB-TOKEN"] = "ghs_writeToken1234"
	g.vars["INPUT_TITLE"] = "nightly"

	out, code := g.run(t)
	if code != 1 { // one sample fails: the step fails, the report is still posted
		t.Fatalf("first run exit %d, want 1:\n%s", code, out)
	}
	if strings.Contains(out, "ghs_writeToken1234") && !strings.Contains(out, "::add-mask::ghs_writeToken1234") {
		t.Fatalf("the token is printed unmasked:\n%s", out)
	}
	if !strings.Contains(out, "::add-mask::ghs_writeToken1234") {
		t.Fatalf("the token is not registered as a mask:\n%s", out)
	}
	mine := stickyComments(t, gh)
	if len(mine) != 1 {
		t.Fatalf("after the first run %d sticky comments, want 1:\n%s", len(mine), out)
	}
	first := mine[0]
	if !strings.Contains(first.Body, "nightly") || !strings.Contains(first.Body, "wrong") {
		t.Fatalf("comment body lacks the title or the failed sample:\n%s", first.Body)
	}
	outs := readOutputs(t, g.output)
	want := map[string]string{
		"total": "4", "passed": "3", "failed": "1", "errored": "0", "skipped": "0",
		"pass-rate": "0.7500", "partial": "false",
		"summary-path": "out/report/summary.md", "junit-path": "out/report/junit.xml",
		"json-path": "out/report/report.json", "report-dir": "out/report",
	}
	for k, v := range want {
		if outs[k] != v {
			t.Errorf("output %s = %q, want %q (all: %v)", k, outs[k], v, outs)
		}
	}
	if !strings.Contains(outs["comment-url"], fmt.Sprintf("issuecomment-%d", first.ID)) {
		t.Errorf("output comment-url %q does not name comment %d", outs["comment-url"], first.ID)
	}
	sum := string(mustRead(t, g.summary))
	if !strings.Contains(sum, "wrong") || !strings.Contains(sum, "arith") {
		t.Fatalf("step summary lacks the task or the failed sample:\n%s", sum)
	}
	for _, f := range []string{"summary.md", "junit.xml", "report.json", "comment.md"} {
		if st, err := os.Stat(filepath.Join(dir, "out/report", f)); err != nil || st.Size() == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
	var js struct {
		Counts struct{ Total, Passed, Failed int } `json:"counts"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "out/report/report.json")), &js); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !strings.Contains(out, "::error") || !strings.Contains(out, "wrong") {
		t.Errorf("no error annotation for the failed sample:\n%s", out)
	}

	// Second run: everything is carried; the same comment is edited in place.
	writeFile(t, g.summary, "")
	writeFile(t, g.output, "")
	before := len(gh.Requests())
	out, code = g.run(t)
	if code != 1 {
		t.Fatalf("second run exit %d:\n%s", code, out)
	}
	mine = stickyComments(t, gh)
	if len(mine) != 1 || mine[0].ID != first.ID {
		t.Fatalf("second run: sticky comments %+v, want only #%d edited", ids(mine), first.ID)
	}
	var patched, listed bool
	var pages = map[string]bool{}
	for _, r := range gh.Requests()[before:] {
		if r.Method == "PATCH" && strings.HasSuffix(r.Path, fmt.Sprintf("/issues/comments/%d", first.ID)) {
			patched = true
		}
		if r.Method == "POST" {
			t.Errorf("second run created a comment: %s %s", r.Method, r.Path)
		}
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/issues/17/comments") {
			listed = true
			pages[r.Query.Get("page")] = true
		}
	}
	if !patched || !listed {
		t.Fatalf("second run did not list and PATCH the sticky comment:\n%+v", gh.Requests()[before:])
	}
	if len(pages) < 2 {
		t.Errorf("the sticky comment is past the first page but only pages %v were read", pages)
	}
	outs = readOutputs(t, g.output)
	if outs["total"] != "4" || outs["passed"] != "3" || !strings.Contains(outs["comment-url"], fmt.Sprint(first.ID)) {
		t.Fatalf("second run outputs %v", outs)
	}
	if !strings.Contains(string(mustRead(t, g.summary)), "arith") {
		t.Fatal("second run wrote no step summary")
	}

	// A fork's read-only token: no comment, the log and the summary say so,
	// and the step still succeeds when the evals pass.
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(localEvalSet, `target: "5"`, `target: "4"`, 1))
	writeFile(t, g.summary, "")
	writeFile(t, g.output, "")
	g.vars["INPUT_GITHUB-TOKEN"] = "ghs_readOnlyToken5678"
	g.vars["INPUT_TITLE"] = "fork"
	out, code = g.run(t)
	if code != 0 {
		t.Fatalf("read-only token run exit %d, want 0:\n%s", code, out)
	}
	// The fake answered the refused write as GitHub does (403); that is the
	// case under test, so take those rejections (and only those).
	for _, r := range gh.TakeRejections() {
		if r.Status != 403 || !strings.Contains(r.Rejected, "read-only token") {
			t.Errorf("fake GitHub rejected %s %s (%d): %s", r.Method, r.Path, r.Status, r.Rejected)
		}
	}
	if !strings.Contains(out, "::warning") || !strings.Contains(out, "read-only") {
		t.Fatalf("the log does not say the token is read-only:\n%s", out)
	}
	sum = string(mustRead(t, g.summary))
	if !strings.Contains(sum, "cannot write") && !strings.Contains(sum, "read-only") {
		t.Fatalf("the summary does not say why there is no comment:\n%s", sum)
	}
	outs = readOutputs(t, g.output)
	if outs["comment-url"] != "" || outs["passed"] != "4" || outs["pass-rate"] != "1.0000" {
		t.Fatalf("read-only run outputs %v", outs)
	}
	if n := len(stickyComments(t, gh)); n != 1 {
		t.Fatalf("read-only run: %d sticky comments", n)
	}
}

func stickyComments(t *testing.T, gh *fakegithub.Server) []fakegithub.Comment {
	t.Helper()
	var out []fakegithub.Comment
	for _, c := range gh.Comments("octo", "evals", 17) {
		if strings.Contains(c.Body, "<!-- steward:report") {
			out = append(out, c)
		}
	}
	return out
}

func ids(cs []fakegithub.Comment) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

var (
	_ = context.Background
	_ = syscall.SIGINT
	_ = time.Second
	_ = record.FileName
)
