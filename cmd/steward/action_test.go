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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	dockerpkg "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
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
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if _, ok := g.vars["TMPDIR"]; !ok {
		env = append(env, "TMPDIR="+os.TempDir())
	}
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
	t.Parallel()
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
		if r.Method == "POST" && r.Path != "/graphql" { // the viewer query (whose token this is) reads
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

// docker runs the docker CLI (bounded), failing the test on error.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := dockerErr(args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func dockerErr(args ...string) (string, error) { return dockertest.CLI(args...) }

// needDocker fails under CI=true when no daemon answers, skips otherwise.
func needDocker(t *testing.T) {
	t.Helper()
	dockertest.Client(t)
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no docker CLI: %v", err)
		}
		t.Skipf("no docker CLI: %v", err)
	}
}

// actionImage returns the action's image, built once per test process from
// Dockerfile.prebuilt and the binary under test, without pulling (FROM
// scratch); TestMain removes it after the last test.
func actionImage(t *testing.T) string {
	t.Helper()
	prebuilt.Lock()
	defer prebuilt.Unlock()
	if prebuilt.tag == "" && prebuilt.err == nil {
		prebuilt.tag, prebuilt.err = buildActionImage()
	}
	if prebuilt.err != nil {
		t.Fatal(prebuilt.err)
	}
	return prebuilt.tag
}

// prebuilt serialises the build of the action image with the removal of
// any image built from Dockerfile.prebuilt in this process (TestReleaseDryRun's
// cleanup, TestMain): the legacy builder shares the untagged layers of
// identical steps between builds, and removing one image with its parents
// while another build is about to reuse such a layer fails that build ("No
// such image"). Two builds at once are safe.
var prebuilt struct {
	sync.Mutex
	tag string
	err error
}

func buildActionImage() (string, error) {
	ctxDir, err := os.MkdirTemp("", "steward-action-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(ctxDir)
	for src, dst := range map[string]string{
		exe:                                  "steward",
		"/etc/ssl/certs/ca-certificates.crt": "ca-certificates.crt",
		dockertest.BusyboxPath:               "busybox",
		"../../Dockerfile.prebuilt":          "Dockerfile.prebuilt",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(ctxDir, dst), b, 0o755); err != nil {
			return "", err
		}
	}
	tag := fmt.Sprintf("steward-action-test:%d-%d", os.Getpid(), time.Now().UnixNano())
	if out, err := dockerErr("build", "--pull=false", "-q", "-f", filepath.Join(ctxDir, "Dockerfile.prebuilt"), "-t", tag, ctxDir); err != nil {
		return "", fmt.Errorf("docker build %s: %v\n%s", tag, err, out)
	}
	return tag, nil
}

// removeActionImage removes the image actionImage built, if it did.
func removeActionImage() {
	prebuilt.Lock()
	defer prebuilt.Unlock()
	if prebuilt.tag != "" {
		_, _ = dockerErr("rmi", "-f", prebuilt.tag)
	}
}

// builtBusybox is a dockertest.BusyboxContext for a `build:` of this
// test's own (owner) whose images Steward builds are removed when the test
// ends (dockertest.RemoveBuilt); no other test's build uses its layers.
func builtBusybox(t *testing.T, owner string) string {
	dir := dockertest.BusyboxContext(t, owner)
	t.Cleanup(func() {
		if sum, err := dockerpkg.ContextHash(dir); err == nil {
			dockertest.RemoveBuilt(sum)
		}
	})
	return dir
}

// scopes are the containers whose Steward's images cleanupScope removes;
// TestMain removes what is left of them once no test runs (an image still
// in use by another test's sandbox when its own scope was cleaned: two
// action containers with the same binary share one relay image, labelled
// with the scope of whichever built it).
var scopes struct {
	sync.Mutex
	ids []string
}

// removeScopedImages removes the images of every scope cleanupScope saw.
func removeScopedImages() {
	scopes.Lock()
	defer scopes.Unlock()
	for _, id := range scopes.ids {
		if ids, _ := dockerErr("images", "-q", "--filter", "label="+dockerpkg.LabelLockScope+"=container:"+id); ids != "" {
			_, _ = dockerErr(append([]string{"rmi", "-f"}, strings.Fields(ids)...)...)
		}
	}
}

// cleanupScope removes whatever a Steward running in container id created
// (its lock-scope label names that container), then the container itself.
func cleanupScope(t *testing.T, id string) {
	t.Cleanup(func() { removeScope(id) })
}

// removeScope removes what a Steward running in container id created, then
// the container. TestMain comes back for the images (scopes).
func removeScope(id string) {
	scopes.Lock()
	scopes.ids = append(scopes.ids, id)
	scopes.Unlock()
	f := "label=" + dockerpkg.LabelLockScope + "=container:" + id
	if ids, _ := dockerErr("ps", "-aq", "--filter", f); ids != "" {
		_, _ = dockerErr(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
	}
	if ids, _ := dockerErr("network", "ls", "-q", "--filter", f); ids != "" {
		_, _ = dockerErr(append([]string{"network", "rm"}, strings.Fields(ids)...)...)
	}
	_, _ = dockerErr("rm", "-f", id)
	if ids, _ := dockerErr("images", "-q", "--filter", f); ids != "" {
		_, _ = dockerErr(append([]string{"rmi", "-f"}, strings.Fields(ids)...)...)
	}
}

// leftovers lists the containers and networks of a run still in Docker.
func leftovers(t *testing.T, runID string) string {
	t.Helper()
	var left []string
	for _, kind := range [][]string{{"ps", "-a", "--format", "{{.Names}}"}, {"network", "ls", "--format", "{{.Name}}"}} {
		args := append(append([]string(nil), kind...),
			"--filter", "label="+sandbox.LabelManaged+"=true", "--filter", "label="+sandbox.LabelRun+"="+runID)
		if out := docker(t, args...); out != "" {
			left = append(left, out)
		}
	}
	return strings.Join(left, "\n")
}

// dockerEvalSet is a model-bound task in Docker sandboxes built FROM scratch
// (busybox): the built-in chat agent asks the mock model through the gateway.
const dockerEvalSet = `
name: action-docker
model: {upstream: mock, name: mock-1}
tasks:
  - name: arith
    sandbox: {provider: docker, build: image, memory: 128m}
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - {id: mul, input: "What is 6*7?", target: "42"}
      - {id: add, input: "What is 1+2?", target: "3"}
      - {id: sub, input: "What is 10-4?", target: "6"}
`

// The action's image, built here, runs against the real engine with only the
// socket mounted: its sandboxes are siblings that reach its gateway through
// the relay, and nothing of the run is left afterwards.
func TestActionImageSiblingSandboxes(t *testing.T) {
	t.Parallel()
	needDocker(t)
	img := actionImage(t)

	evals := t.TempDir()
	writeFile(t, filepath.Join(evals, "steward.yaml"), dockerEvalSet)
	if err := os.CopyFS(filepath.Join(evals, "image"), os.DirFS(dockertest.BusyboxContext(t, "cmd-steward-action-image"))); err != nil {
		t.Fatal(err)
	}

	id := docker(t, "create",
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-w", "/github/workspace",
		"-e", "STEWARD_IN_CONTAINER=1",
		"-e", "GITHUB_ACTIONS=true",
		"-e", "GITHUB_WORKSPACE=/github/workspace",
		"-e", "GITHUB_STEP_SUMMARY=/github/file_commands/summary.md",
		"-e", "GITHUB_OUTPUT=/github/file_commands/output",
		"-e", "GITHUB_EVENT_NAME=push",
		"-e", "INPUT_EVAL-SET=steward.yaml",
		"-e", "INPUT_COMMENT=false",
		"-e", "INPUT_RECORD=.steward",
		"-e", "INPUT_REPORT-DIR=.steward/report",
		"--label", "dev.steward.test=cmd-steward-action-image",
		img) // CMD ["action"]
	cleanupScope(t, id)
	docker(t, "cp", evals+"/.", id+":/github/workspace")
	fc := t.TempDir()
	writeFile(t, filepath.Join(fc, "summary.md"), "")
	writeFile(t, filepath.Join(fc, "output"), "")
	docker(t, "cp", fc+"/.", id+":/github/file_commands")

	log, err := dockerErr("start", "-a", id)
	if err != nil {
		t.Fatalf("the action container failed: %v\n%s", err, log)
	}
	if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", id); code != "0" {
		t.Fatalf("the action exited %s:\n%s", code, log)
	}
	// Only the socket was mounted: no bind mount carried the eval set in.
	if m := docker(t, "inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", id); strings.TrimSpace(m) != "/var/run/docker.sock" {
		t.Fatalf("mounts %q: only the socket may be mounted", m)
	}

	out := t.TempDir()
	docker(t, "cp", id+":/github/workspace/.steward/report/report.json", out)
	docker(t, "cp", id+":/github/file_commands/.", out)
	var rep struct {
		RunIDs []string `json:"run_ids"`
		Counts struct{ Total, Passed int }
		Spend  struct{ Requests int64 }
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "report.json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Counts.Total != 3 || rep.Counts.Passed != 3 || rep.Spend.Requests < 3 || len(rep.RunIDs) != 1 {
		t.Fatalf("report %+v (every sandbox must reach the gateway and the mock model):\n%s\n%s", rep, log, mustRead(t, filepath.Join(out, "report.json")))
	}
	outs := readOutputs(t, filepath.Join(out, "output"))
	if outs["passed"] != "3" || outs["json-path"] != ".steward/report/report.json" {
		t.Fatalf("outputs %v", outs)
	}
	if !strings.Contains(string(mustRead(t, filepath.Join(out, "summary.md"))), "arith") {
		t.Fatal("no step summary")
	}
	if !strings.Contains(log, "steward-relay-") {
		t.Fatalf("the gateway was not reached through the relay:\n%s", log)
	}
	if left := leftovers(t, rep.RunIDs[0]); left != "" {
		t.Fatalf("the run left containers or networks:\n%s", left)
	}
}

// slowEvalSet: three quick samples, then slow ones, at most three at a time,
// so that at the first signal some attempts are published, three are running
// and the rest are queued. Each slow agent writes its shell's and its
// child's pids into MARKERS, then runs SIGNAL (an agentSignals line).
const slowEvalSet = `
name: action-cancel
tasks:
  - name: slow
    sandbox: {provider: PROVIDER}
    exclusive: false
    max_samples: 3
    agent: 'if [ "$STEWARD_INPUT" = slow ]; then sleep 120 & echo "$$ $!" > MARKERS/$STEWARD_SAMPLE_ID.pids; SIGNAL; wait; fi; echo ok'
    scorer: {match: exact}
    samples:
      - {id: q1, input: quick, target: ok}
      - {id: q2, input: quick, target: ok}
      - {id: q3, input: quick, target: ok}
      - {id: s1, input: slow, target: ok}
      - {id: s2, input: slow, target: ok}
      - {id: s3, input: slow, target: ok}
      - {id: s4, input: slow, target: ok}
      - {id: s5, input: slow, target: ok}
      - {id: s6, input: slow, target: ok}
`

// runnerCancel sends what the Actions runner sends when a job is cancelled:
// SIGINT, SIGTERM 7.5 s later, then SIGKILL 2.5 s after that. It stops as
// soon as exited is closed and says whether the kill was needed.
func runnerCancel(t *testing.T, signal func(os.Signal), exited <-chan struct{}) (killed bool) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("exited %v after SIGINT", time.Since(start).Round(10*time.Millisecond)) }()
	signal(syscall.SIGINT)
	for _, step := range []struct {
		after time.Duration
		sig   os.Signal
	}{{7500 * time.Millisecond, syscall.SIGTERM}, {2500 * time.Millisecond, syscall.SIGKILL}} {
		select {
		case <-exited:
			return false
		case <-time.After(step.after):
			t.Logf("sending %v", step.sig)
			signal(step.sig)
		}
	}
	<-exited
	return true
}

// alive says whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// checkCancelledRecord: the published attempts are the quick ones, whole; the
// report from the record shows the running ones interrupted and the queued
// ones skipped, and nothing else.
func checkCancelledRecord(t *testing.T, dir, rec string) {
	t.Helper()
	ctx := context.Background()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatalf("reopen the record: %v", err)
	}
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) != 1 {
		db.Close()
		t.Fatalf("runs %+v: %v", runs, err)
	}
	as, err := db.Attempts(ctx, runs[0].ID)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, a := range as {
		status[a.Sample] = string(a.Status)
		if a.Status == "passed" && (a.Fingerprint == "" || a.Finished.IsZero()) {
			t.Fatalf("half-written attempt %+v", a)
		}
	}
	for _, q := range []string{"q1", "q2", "q3"} {
		if status[q] != "passed" {
			t.Fatalf("finished attempt %s is %q in the record (all: %v)", q, status[q], status)
		}
	}
	out, _ := stewardJSON(t, dir, "report", "--record", rec, "--format", "json")
	var rep struct {
		Partial  bool       `json:"partial"`
		Attempts []shardRow `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, r := range rep.Attempts {
		got[r.Status]++
		if strings.HasPrefix(r.Sample, "s") && r.Status != "interrupted" && r.Status != "skipped" {
			t.Errorf("slow sample %s is %s, want interrupted or skipped", r.Sample, r.Status)
		}
	}
	if !rep.Partial || len(rep.Attempts) != 9 || got["passed"] != 3 || got["interrupted"] < 1 || got["skipped"] < 1 {
		t.Fatalf("report from the record: partial=%v statuses %v (want 3 passed, the running interrupted, the queued skipped)", rep.Partial, got)
	}
}

// The runner's cancellation sequence mid-run: Steward stops dispatching,
// publishes what finished, posts a partial comment and summary before the
// kill, and leaves no sandbox (process or workdir) behind.
func TestActionCancelled(t *testing.T) {
	t.Parallel()
	gh := fakegithub.New(t)
	gh.AddToken("ghs_writeToken1234", "github-actions[bot]", true)
	gh.AddPullRequest("octo", "evals", 17)

	dir := t.TempDir()
	markers := filepath.Join(dir, "markers")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{markers, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sig := newAgentSignals(t, dir)
	es := strings.NewReplacer("PROVIDER", "local", "MARKERS", markers, "SIGNAL", sig.shell("$STEWARD_SAMPLE_ID")).Replace(slowEvalSet)
	writeFile(t, filepath.Join(dir, "steward.yaml"), es)
	g := newGHEnv(t, dir, gh.URL, 17)
	g.vars["INPUT_GITHUB-TOKEN"] = "ghs_writeToken1234"
	g.vars["TMPDIR"] = tmp // the local sandboxes' workdirs

	c := g.cmd()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = c.Wait(); close(exited) }()
	t.Cleanup(func() { _ = c.Process.Kill(); <-exited })

	for range 3 { // each slow agent says it has written its pids
		sig.next(t, 2*time.Minute)
	}
	var pids []int
	m, _ := filepath.Glob(filepath.Join(markers, "*.pids"))
	for _, f := range m {
		for _, w := range strings.Fields(string(mustRead(t, f))) {
			var pid int
			fmt.Sscan(w, &pid)
			pids = append(pids, pid)
		}
	}
	runnerCancel(t, func(s os.Signal) { _ = c.Process.Signal(s) }, exited)
	// 130 is Steward's own exit after a cancellation; -1 means the SIGKILL.
	if code := c.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d after cancellation, want 130 (not the runner's kill):\n%s", code, out.String())
	}

	mine := stickyComments(t, gh)
	if len(mine) != 1 || !strings.Contains(mine[0].Body, "Partial report") {
		t.Fatalf("no partial comment posted (%d comments):\n%+v\n%s", len(mine), mine, out.String())
	}
	if sum := string(mustRead(t, g.summary)); !strings.Contains(sum, "Partial report") {
		t.Fatalf("the summary has no partial banner:\n%s", sum)
	}
	if outs := readOutputs(t, g.output); outs["partial"] != "true" || outs["passed"] != "3" {
		t.Fatalf("outputs %v", outs)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("sandbox process %d outlived the run", pid)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "steward-*")); len(left) > 0 {
		t.Errorf("sandbox workdirs left: %v", left)
	}
	checkCancelledRecord(t, dir, filepath.Join(dir, ".steward"))
}

// The same sequence against the action's image with Docker sandboxes:
// Steward stops dispatching at the SIGINT, aborts the running attempts when
// its grace ends, removes its sandboxes, network and relay and writes the
// partial report before the kill; the record keeps what finished.
//
// It runs `steward launch --grace 4s` in the image (the action mode's grace,
// internal/cli/action.go): under heavy load the abort, sweep and report after a
// 7 s grace overran the runner's kill at 10 s (exits measured 10.7 s and
// 10.9 s after the SIGINT at load 45), while a 4 s grace exits 5.6–6.7 s
// after it. The action mode itself, run as the runner runs it, is
// TestRunnerFaithful/cancelled; on the host, TestActionCancelled.
func TestActionImageCancelled(t *testing.T) {
	t.Parallel()
	needDocker(t)
	img := actionImage(t)

	evals := t.TempDir()
	es := strings.NewReplacer("PROVIDER", "docker, build: image, memory: 64m", "MARKERS", ".", "SIGNAL", "true").Replace(slowEvalSet)
	writeFile(t, filepath.Join(evals, "steward.yaml"), es)
	if err := os.CopyFS(filepath.Join(evals, "image"), os.DirFS(dockertest.BusyboxContext(t, "cmd-steward-action-image-cancelled"))); err != nil {
		t.Fatal(err)
	}
	// The launch's --events go to a FIFO of the test's, mounted in.
	evDir := t.TempDir()
	ev := newLaunchEvents(t, evDir)
	id := docker(t, "create",
		"-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", evDir+":/events",
		"-w", "/work", "-e", "STEWARD_IN_CONTAINER=1", "-e", "CI=true",
		"--label", "dev.steward.test=cmd-steward-action-image",
		img, "launch", "--grace", "4s", "--max-concurrency", "3", "--tend-interval", "1s", "--events", "/events/"+filepath.Base(ev.path),
		"--record", ".steward", "--report-dir", "report", "steward.yaml")
	cleanupScope(t, id)
	docker(t, "cp", evals+"/.", id+":/work")

	api := dockertest.Client(t)
	start := exec.Command("docker", "start", "-a", id)
	var log bytes.Buffer
	start.Stdout, start.Stderr = &log, &log
	if err := start.Start(); err != nil {
		t.Fatal(err)
	}
	attached := make(chan struct{})
	go func() { _ = start.Wait(); close(attached) }()
	t.Cleanup(func() { _, _ = dockerErr("kill", id); <-attached })

	// Mid-run: the quick attempts are published and three slow sandboxes
	// run, as the launch's live state says.
	ev.wait(t, "three passed and three running", 3*time.Minute, func(e *launchEvents) bool {
		if len(e.lives) == 0 {
			return false
		}
		l := e.lives[len(e.lives)-1]
		return l.Counts.Passed == 3 && slices.Equal(l.Running, []int{3})
	})
	// The daemon says when the container exits; signals go through the API
	// (as the runner's do), not through a CLI process per signal.
	ctx := context.Background()
	waitC, errC := api.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	exited := make(chan struct{})
	go func() {
		select {
		case <-waitC:
		case <-errC:
		}
		close(exited)
	}()
	runnerCancel(t, func(s os.Signal) {
		_ = api.ContainerKill(ctx, id, map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[s])
	}, exited)
	<-attached
	// 130 is Steward's own exit after a cancellation; 137 is the SIGKILL.
	if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", id); code != "130" {
		t.Fatalf("exit %s after cancellation, want 130 (not the runner's kill):\n%s", code, log.String())
	}

	out := t.TempDir()
	for _, f := range []string{"report", ".steward"} {
		docker(t, "cp", id+":/work/"+f, out)
	}
	if md := string(mustRead(t, filepath.Join(out, "report", "report.md"))); !strings.Contains(md, "Partial report") {
		t.Fatalf("report.md has no partial banner:\n%s\n%s", md, log.String())
	}
	var rep struct {
		RunIDs  []string `json:"run_ids"`
		Partial bool     `json:"partial"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "report", "report.json")), &rep); err != nil || len(rep.RunIDs) != 1 || !rep.Partial {
		t.Fatalf("report.json: %v %+v", err, rep)
	}
	if left := leftovers(t, rep.RunIDs[0]); left != "" {
		t.Fatalf("the cancelled run left containers or networks:\n%s\n%s", left, log.String())
	}
	checkCancelledRecord(t, out, filepath.Join(out, ".steward"))
}
