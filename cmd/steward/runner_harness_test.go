package main

// A GitHub Actions runner, as far as Steward's action sees one: it reads a
// workflow's YAML, walks its jobs and steps, runs each `uses: ./` step the
// way the runner runs a container action (`docker run` with the runner's
// flags, mounts and variables), reads the step's output as the runner does
// (internal/ghaction/runnerlog) and its file commands (GITHUB_OUTPUT,
// GITHUB_STEP_SUMMARY). The steps around it that the shipped workflows use
// are simulated on the host: checkout, cache restore/save, artifact
// upload/download and `run:` scripts (with a `gh` stub that answers only the
// call the fork-safe reporter makes).

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/ghaction/runnerlog"
)

// workspaceUID and workspaceGID own the runner's workspace: the hosted
// runner's "runner" user (1001), which is not the container's root, when the
// test runs as root (it then gives the workspace to that user); the test's
// own user otherwise (as on a hosted runner, where the test itself runs as
// "runner").
var workspaceUID, workspaceGID = func() (uint32, uint32) {
	if os.Geteuid() == 0 {
		return 1001, 127
	}
	return uint32(os.Geteuid()), uint32(os.Getegid())
}()

type actionDef struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Runs struct {
		Args []string `yaml:"args"`
	} `yaml:"runs"`
}

type workflowStep struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	If   string            `yaml:"if"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]string `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type workflowJob struct {
	If          string            `yaml:"if"`
	Needs       any               `yaml:"needs"`
	Permissions map[string]string `yaml:"permissions"`
	Strategy    struct {
		Matrix map[string][]any `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []workflowStep `yaml:"steps"`
}

type workflow struct {
	File        string
	Name        string                 `yaml:"name"`
	On          map[string]any         `yaml:"on"`
	Permissions map[string]string      `yaml:"permissions"`
	Jobs        map[string]workflowJob `yaml:"jobs"`
	order       []string
}

// readWorkflow parses a workflow file; jobs keep their file order.
func readWorkflow(t *testing.T, file string) *workflow {
	t.Helper()
	b := mustRead(t, file)
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	w.File = file
	var doc yaml.Node
	_ = yaml.Unmarshal(b, &doc)
	for i, n := range doc.Content[0].Content {
		if n.Value == "jobs" {
			jobs := doc.Content[0].Content[i+1]
			for k := 0; k < len(jobs.Content); k += 2 {
				w.order = append(w.order, jobs.Content[k].Value)
			}
		}
	}
	return &w
}

// usesAction says whether the workflow has a step running this action.
func (w *workflow) usesAction() bool {
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			if isThisAction(s.Uses) {
				return true
			}
		}
	}
	return false
}

func isThisAction(uses string) bool { return uses == "./" || uses == "." }

// ghRunner holds what outlives a job: the fake GitHub, the caches and the
// artifacts of one workflow run.
type ghRunner struct {
	t        *testing.T
	image    string
	action   actionDef
	gh       *fakegithub.Server
	apiURL   string // the fake GitHub as the container reaches it
	bridgeIP string
	repoRoot string
	owner    string
	repo     string
	label    string // on every action container of this test

	caches    map[string]cacheEntry // key → saved files
	cacheSeq  []string
	artifacts map[int]map[string]string // run id → name → host directory
	ghStub    string                    // directory holding the gh stub
	headSHA   string
	// prepare, when set, is every new job's prepare (what a test's
	// workspace holds beside the checkout, in every job of a workflow run).
	prepare func(ws string)
}

// bridgeGateway is the address containers on the default bridge reach the
// host at (read from inside a container, as a runner's container sees it).
func bridgeGateway(t *testing.T, image string) string {
	t.Helper()
	out := docker(t, "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "ip route | awk '/^default/ {print $3}'")
	if out == "" {
		t.Fatalf("no default route in a container")
	}
	return out
}

func newGHRunner(t *testing.T, image string) *ghRunner {
	t.Helper()
	var a actionDef
	if err := yaml.Unmarshal(mustRead(t, "../../action.yml"), &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	ip := bridgeGateway(t, image)
	gh := fakegithub.NewAt(t, ip+":0")
	root, _ := filepath.Abs("../..")
	r := &ghRunner{
		t: t, image: image, action: a, gh: gh, apiURL: gh.URL, bridgeIP: ip, repoRoot: root,
		owner: "octo", repo: "evals", label: "steward-test-runner-" + randHex(4),
		caches: map[string]cacheEntry{}, artifacts: map[int]map[string]string{}, headSHA: "0123456789abcdef0123456789abcdef01234567",
	}
	r.ghStub = t.TempDir()
	for _, d := range []string{r.ghStub, filepath.Dir(r.ghStub)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The only call a shipped workflow makes with gh: the fork-safe reporter
	// reads the pull request's head commit.
	writeFile(t, filepath.Join(r.ghStub, "gh"), `#!/bin/sh
if [ "$1" = api ] && [ "$2" = "repos/$GITHUB_REPOSITORY/pulls/$FAKE_GH_PR" ] && [ "$3" = --jq ] && [ "$4" = .head.sha ]; then
  echo "$FAKE_GH_HEAD_SHA"; exit 0
fi
echo "gh stub: unexpected call: $*" >&2; exit 1
`)
	if err := os.Chmod(filepath.Join(r.ghStub, "gh"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ids, _ := dockerErr("ps", "-aq", "--filter", "label="+r.label); ids != "" {
			_, _ = dockerErr(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
		}
	})
	return r
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// event payloads

func (r *ghRunner) prEvent(number int, fork bool) map[string]any {
	head := r.owner + "/" + r.repo
	if fork {
		head = "forker/" + r.repo
	}
	repo := map[string]any{"full_name": r.owner + "/" + r.repo, "name": r.repo, "owner": map[string]any{"login": r.owner}, "default_branch": "main", "fork": false}
	return map[string]any{
		"action": "synchronize", "number": number,
		"pull_request": map[string]any{
			"number": number, "state": "open", "title": "Change the evals",
			"head": map[string]any{"ref": "feature", "sha": r.headSHA, "repo": map[string]any{"full_name": head, "fork": fork}},
			"base": map[string]any{"ref": "main", "sha": "fedcba9876543210fedcba9876543210fedcba98", "repo": repo},
			"user": map[string]any{"login": "contributor"},
		},
		"repository": repo,
		"sender":     map[string]any{"login": "contributor"},
	}
}

func (r *ghRunner) workflowRunEvent(workflowName string, runID int) map[string]any {
	repo := map[string]any{"full_name": r.owner + "/" + r.repo, "name": r.repo, "owner": map[string]any{"login": r.owner}}
	return map[string]any{
		"action": "completed",
		"workflow_run": map[string]any{
			"id": runID, "name": workflowName, "event": "pull_request", "conclusion": "success", "head_sha": r.headSHA,
			"head_repository": map[string]any{"full_name": "forker/" + r.repo},
			"pull_requests":   []any{}, // empty for forks, as on GitHub
		},
		"repository": repo,
	}
}

// cacheEntry is a saved cache: its files and the path they were saved from
// (actions/cache restores an entry only to the path it was saved from: the
// path is part of the cache's version).
type cacheEntry struct{ dir, path string }

func (r *ghRunner) pushEvent() map[string]any {
	repo := map[string]any{"full_name": r.owner + "/" + r.repo, "name": r.repo, "owner": map[string]any{"login": r.owner}, "default_branch": "main"}
	return map[string]any{"ref": "refs/heads/main", "before": "fedcba9876543210fedcba9876543210fedcba98", "after": r.headSHA,
		"repository": repo, "pusher": map[string]any{"name": "maintainer"}, "head_commit": map[string]any{"id": r.headSHA}}
}

// A job of a workflow run.
type ghJob struct {
	// proc is the running step's `docker run` process: what the runner
	// signals when the workflow run is cancelled.
	proc      *os.Process
	r         *ghRunner
	wf        *workflow
	name      string
	eventName string
	event     map[string]any
	runID     int
	token     string
	write     bool
	matrix    map[string]string
	secrets   map[string]string
	extraEnv  map[string]string // added to every action step (a test's model key)
	ghPR      int               // the pull request the gh stub knows
	steps     map[string]map[string]string
	failed    bool
	root      string
	ws        string
	results   []*stepResult
	// prepare runs after checkout, before any other step (supplies what an
	// example needs and a runner would have: the fake provider's URL, busybox).
	prepare func(ws string)
}

type stepResult struct {
	step    workflowStep
	code    int
	raw     string
	log     *runnerlog.Log
	outputs map[string]string
	summary string
	inputs  map[string]string
	elapsed time.Duration
}

// permitsWrite says whether the job's token may write pull requests.
func permitsWrite(wf *workflow, j workflowJob) bool {
	p := wf.Permissions
	if j.Permissions != nil {
		p = j.Permissions
	}
	return p["pull-requests"] == "write"
}

func (r *ghRunner) newJob(wf *workflow, name, eventName string, event map[string]any, runID int, matrix map[string]string) *ghJob {
	j := &ghJob{r: r, wf: wf, name: name, eventName: eventName, event: event, runID: runID, matrix: matrix,
		steps: map[string]map[string]string{}, secrets: map[string]string{}, extraEnv: map[string]string{}, prepare: r.prepare}
	fork := false
	if eventName == "pull_request" {
		fork = lookup(event, "pull_request.head.repo.full_name") != r.owner+"/"+r.repo
	}
	j.write = permitsWrite(wf, wf.Jobs[name]) && !fork // a fork's pull_request token is read-only
	j.token = "ghs_" + randHex(16)
	r.gh.AddToken(j.token, "github-actions[bot]", j.write)
	j.root = r.t.TempDir()
	// `run:` steps run as the workspace's owner: let them reach it.
	for _, d := range []string{j.root, filepath.Dir(j.root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, d := range []string{"home", "workflow", "file_commands", "workspace"} {
		if err := os.MkdirAll(filepath.Join(j.root, d), 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	j.ws = filepath.Join(j.root, "workspace")
	return j
}

func lookup(m map[string]any, p string) any {
	var cur any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// ref is GITHUB_REF as the runner sets it for the job's event: a pull
// request's merge ref, main's branch for a push or a workflow_run (the
// github.ref expression and the environment read the same).
func (j *ghJob) ref() string {
	switch j.eventName {
	case "push", "workflow_run":
		return "refs/heads/main"
	}
	return "refs/pull/" + str(lookup(j.event, "pull_request.number")) + "/merge"
}

// expressions: the subset the shipped workflows use.

func (j *ghJob) value(p string) any {
	switch {
	case p == "github.token":
		return j.token
	case p == "github.repository":
		return j.r.owner + "/" + j.r.repo
	case p == "github.run_id":
		return strconv.Itoa(j.runID)
	case p == "github.event_name":
		return j.eventName
	case p == "github.sha":
		return j.r.headSHA
	case p == "github.ref":
		return j.ref()
	case strings.HasPrefix(p, "github.event."):
		return lookup(j.event, strings.TrimPrefix(p, "github.event."))
	case strings.HasPrefix(p, "matrix."):
		return j.matrix[strings.TrimPrefix(p, "matrix.")]
	case strings.HasPrefix(p, "secrets."):
		return j.secrets[strings.TrimPrefix(p, "secrets.")]
	case strings.HasPrefix(p, "steps."):
		parts := strings.SplitN(strings.TrimPrefix(p, "steps."), ".", 3)
		if len(parts) == 3 && parts[1] == "outputs" {
			return j.steps[parts[0]][parts[2]]
		}
	}
	j.r.t.Fatalf("%s: unsupported expression context %q", j.wf.File, p)
	return nil
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int:
		return strconv.Itoa(x)
	}
	return fmt.Sprint(v)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	}
	return true
}

func (j *ghJob) eval(e string) any {
	e = strings.TrimSpace(e)
	e = strings.TrimSuffix(strings.TrimPrefix(e, "${{"), "}}")
	e = strings.TrimSpace(e)
	if parts := splitTop(e, "||"); len(parts) > 1 {
		for _, p := range parts {
			if v := j.eval(p); truthy(v) {
				return v
			}
		}
		return false
	}
	if parts := splitTop(e, "&&"); len(parts) > 1 {
		var v any
		for _, p := range parts {
			if v = j.eval(p); !truthy(v) {
				return v
			}
		}
		return v
	}
	for _, op := range []string{"!=", "=="} {
		if parts := splitTop(e, op); len(parts) == 2 {
			eq := strings.EqualFold(str(j.eval(parts[0])), str(j.eval(parts[1])))
			return eq == (op == "==")
		}
	}
	switch {
	case strings.HasPrefix(e, "!"):
		return !truthy(j.eval(e[1:]))
	case strings.HasPrefix(e, "'") && strings.HasSuffix(e, "'"):
		return strings.ReplaceAll(e[1:len(e)-1], "''", "'")
	case e == "true" || e == "false":
		return e == "true"
	case e == "always()":
		return true
	case e == "success()":
		return !j.failed
	case e == "failure()":
		return j.failed
	case e == "cancelled()":
		return false
	}
	if _, err := strconv.ParseFloat(e, 64); err == nil {
		f, _ := strconv.ParseFloat(e, 64)
		return f
	}
	return j.value(e)
}

// splitTop splits on op outside quotes.
func splitTop(e, op string) []string {
	var parts []string
	inQ := false
	last := 0
	for i := 0; i < len(e); i++ {
		if e[i] == '\'' {
			inQ = !inQ
		}
		if !inQ && strings.HasPrefix(e[i:], op) {
			parts = append(parts, e[last:i])
			i += len(op) - 1
			last = i + 1
		}
	}
	return append(parts, e[last:])
}

// expand replaces every ${{ … }} in s.
func (j *ghJob) expand(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${{")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		k := strings.Index(s[i:], "}}")
		if k < 0 {
			j.r.t.Fatalf("%s: unclosed expression in %q", j.wf.File, s)
		}
		b.WriteString(s[:i])
		b.WriteString(str(j.eval(s[i : i+k+2])))
		s = s[i+k+2:]
	}
}

func (j *ghJob) cond(c string, def string) bool {
	if strings.TrimSpace(c) == "" {
		c = def
	}
	return truthy(j.eval(c))
}

// runJob runs the job's steps in order, as the runner does.
func (j *ghJob) run() {
	t := j.r.t
	job := j.wf.Jobs[j.name]
	for _, s := range job.Steps {
		if !j.cond(s.If, "success()") {
			continue
		}
		var outputs map[string]string
		ok := true
		switch {
		case isThisAction(s.Uses):
			res := j.runAction(s)
			outputs, ok = res.outputs, res.code == 0
		case strings.HasPrefix(s.Uses, "actions/checkout@"):
			j.checkout()
		case strings.HasPrefix(s.Uses, "actions/cache/restore@"):
			outputs = j.cacheRestore(s)
		case strings.HasPrefix(s.Uses, "actions/cache/save@"):
			j.cacheSave(s)
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
			j.upload(s)
		case strings.HasPrefix(s.Uses, "actions/download-artifact@"):
			j.download(s)
		case s.Run != "":
			outputs, ok = j.runScript(s)
		default:
			t.Fatalf("%s: job %s: step %q uses %q, which this runner does not simulate", j.wf.File, j.name, s.Name, s.Uses)
		}
		if s.ID != "" {
			j.steps[s.ID] = outputs
		}
		if !ok {
			j.failed = true
		}
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func copyPath(t *testing.T, src, dst string) {
	t.Helper()
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if st.IsDir() {
		copyTree(t, src, dst)
		return
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, mustRead(t, src), st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// chownTree gives the workspace to its owner, as the runner's checkout leaves it.
func chownTree(t *testing.T, root string) {
	t.Helper()
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Lchown(p, int(workspaceUID), int(workspaceGID))
		}
		return nil
	})
}

// checkout puts the repository's tracked example files and workflows into
// the workspace (what actions/checkout gives; build outputs excluded).
func (j *ghJob) checkout() {
	t := j.r.t
	out, err := exec.Command("git", "-C", j.r.repoRoot, "ls-files", "examples", ".github", "action.yml").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		copyPath(t, filepath.Join(j.r.repoRoot, f), filepath.Join(j.ws, f))
	}
	if j.prepare != nil {
		j.prepare(j.ws)
	}
	chownTree(t, j.ws)
}

func (j *ghJob) cacheRestore(s workflowStep) map[string]string {
	key := j.expand(s.With["key"])
	path := j.expand(s.With["path"])
	hit := ""
	src := ""
	if e, ok := j.r.caches[key]; ok && e.path == path {
		src, hit = e.dir, "true"
	} else {
		for _, pre := range strings.Split(j.expand(s.With["restore-keys"]), "\n") {
			pre = strings.TrimSpace(pre)
			if pre == "" || src != "" {
				continue
			}
			for i := len(j.r.cacheSeq) - 1; i >= 0; i-- { // newest first
				if e := j.r.caches[j.r.cacheSeq[i]]; strings.HasPrefix(j.r.cacheSeq[i], pre) && e.path == path {
					src = e.dir
					break
				}
			}
		}
	}
	if src != "" {
		copyTree(j.r.t, src, filepath.Join(j.ws, j.expand(s.With["path"])))
		chownTree(j.r.t, j.ws)
	}
	return map[string]string{"cache-hit": hit}
}

func (j *ghJob) cacheSave(s workflowStep) {
	key := j.expand(s.With["key"])
	if _, ok := j.r.caches[key]; ok {
		return // caches are immutable
	}
	src := filepath.Join(j.ws, j.expand(s.With["path"]))
	if _, err := os.Stat(src); err != nil {
		return
	}
	dst := j.r.t.TempDir()
	copyTree(j.r.t, src, dst)
	j.r.caches[key] = cacheEntry{dir: dst, path: j.expand(s.With["path"])}
	j.r.cacheSeq = append(j.r.cacheSeq, key)
}

func (j *ghJob) upload(s workflowStep) {
	name := j.expand(s.With["name"])
	src := filepath.Join(j.ws, j.expand(s.With["path"]))
	st, err := os.Stat(src)
	if err != nil {
		j.r.t.Logf("upload-artifact %s: no files at %s (a warning on GitHub)", name, src)
		return
	}
	dst := j.r.t.TempDir()
	if st.IsDir() {
		copyTree(j.r.t, src, dst)
	} else {
		copyPath(j.r.t, src, filepath.Join(dst, filepath.Base(src)))
	}
	if j.r.artifacts[j.runID] == nil {
		j.r.artifacts[j.runID] = map[string]string{}
	}
	j.r.artifacts[j.runID][name] = dst
}

func (j *ghJob) download(s workflowStep) {
	dst := filepath.Join(j.ws, j.expand(s.With["path"]))
	store := j.r.artifacts[j.runID]
	if id := j.expand(s.With["run-id"]); id != "" {
		n, err := strconv.Atoi(id)
		if err != nil {
			j.r.t.Fatalf("%s: download-artifact run-id %q", j.wf.File, id)
		}
		store = j.r.artifacts[n]
	}
	if name := j.expand(s.With["name"]); name != "" {
		src, ok := store[name]
		if !ok {
			j.r.t.Fatalf("%s: download-artifact: no artifact %q", j.wf.File, name)
		}
		copyTree(j.r.t, src, dst)
	} else {
		pat := j.expand(s.With["pattern"])
		var names []string
		for n := range store {
			if ok, _ := path.Match(pat, n); ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			copyTree(j.r.t, store[n], filepath.Join(dst, n))
		}
	}
	chownTree(j.r.t, j.ws)
}

// runScript runs a `run:` step with bash on the host, in the workspace, as
// the workspace's owner (the runner's user).
func (j *ghJob) runScript(s workflowStep) (map[string]string, bool) {
	t := j.r.t
	out := filepath.Join(j.root, "file_commands", "run_output_"+randHex(4))
	writeFile(t, out, "")
	if err := os.Chown(out, int(workspaceUID), int(workspaceGID)); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("bash", "-e", "-c", j.expand(s.Run))
	c.Dir = j.ws
	if os.Geteuid() == 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: workspaceUID, Gid: workspaceGID}}
	}
	c.Env = []string{"PATH=" + j.r.ghStub + ":" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"GITHUB_OUTPUT=" + out, "GITHUB_REPOSITORY=" + j.r.owner + "/" + j.r.repo, "GITHUB_WORKSPACE=" + j.ws,
		"FAKE_GH_HEAD_SHA=" + j.r.headSHA, "FAKE_GH_PR=" + strconv.Itoa(j.ghPR)}
	for k, v := range s.Env {
		c.Env = append(c.Env, k+"="+j.expand(v))
	}
	b, err := c.CombinedOutput()
	if err != nil {
		t.Logf("%s: run step %q failed: %v\n%s", j.wf.File, s.Name, err, b)
		return nil, false
	}
	return readOutputs(t, out), true
}

// actionInputs maps a step's `with:` to INPUT_* as the runner does: every
// input action.yml declares, its default (evaluated) when not given; names
// upper-cased with hyphens kept and spaces as underscores.
func (j *ghJob) actionInputs(s workflowStep) map[string]string {
	t := j.r.t
	in := map[string]string{}
	for k := range s.With {
		if _, ok := j.r.action.Inputs[k]; !ok {
			t.Errorf("%s: step %q passes input %q, which action.yml does not declare", j.wf.File, s.Name, k)
		}
	}
	for name, def := range j.r.action.Inputs {
		v, ok := s.With[name]
		if !ok {
			v = def.Default
		}
		in["INPUT_"+strings.ToUpper(strings.ReplaceAll(name, " ", "_"))] = j.expand(v)
	}
	return in
}

// runAction runs the step's container the way the runner does.
func (j *ghJob) runAction(s workflowStep) *stepResult {
	return j.startAction(s, nil)
}

// startAction runs the action container; when during is set it is called
// with the container's name once the container runs, and the result is
// returned after the container exits.
func (j *ghJob) startAction(s workflowStep, during func(name string, exited <-chan struct{})) *stepResult {
	t := j.r.t
	fc := filepath.Join(j.root, "file_commands")
	suffix := randHex(8)
	files := map[string]string{
		"GITHUB_OUTPUT": "set_output_" + suffix, "GITHUB_STEP_SUMMARY": "step_summary_" + suffix,
		"GITHUB_ENV": "set_env_" + suffix, "GITHUB_PATH": "add_path_" + suffix, "GITHUB_STATE": "save_state_" + suffix,
	}
	for _, f := range files {
		writeFile(t, filepath.Join(fc, f), "")
	}
	eb, _ := json.Marshal(j.event)
	writeFile(t, filepath.Join(j.root, "workflow", "event.json"), string(eb))

	env := map[string]string{}
	for k, v := range j.actionInputs(s) {
		env[k] = v
	}
	for k, v := range s.Env {
		env[k] = j.expand(v)
	}
	for k, v := range j.extraEnv {
		env[k] = v
	}
	headRef, baseRef := "", ""
	if j.eventName == "pull_request" {
		headRef, baseRef = "feature", "main"
	}
	ref := j.ref()
	refName := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/pull/")
	for k, v := range map[string]string{
		"HOME": "/github/home", "GITHUB_JOB": j.name, "GITHUB_REF": ref, "GITHUB_SHA": j.r.headSHA,
		"GITHUB_REPOSITORY": j.r.owner + "/" + j.r.repo, "GITHUB_REPOSITORY_OWNER": j.r.owner, "GITHUB_REPOSITORY_ID": "4711",
		"GITHUB_RUN_ID": strconv.Itoa(j.runID), "GITHUB_RUN_NUMBER": "7", "GITHUB_RETENTION_DAYS": "90", "GITHUB_RUN_ATTEMPT": "1",
		"GITHUB_ACTOR": "contributor", "GITHUB_TRIGGERING_ACTOR": "contributor", "GITHUB_WORKFLOW": j.wf.Name,
		"GITHUB_HEAD_REF": headRef, "GITHUB_BASE_REF": baseRef, "GITHUB_EVENT_NAME": j.eventName,
		"GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": j.r.apiURL, "GITHUB_GRAPHQL_URL": j.r.apiURL + "/graphql",
		"GITHUB_REF_NAME": refName, "GITHUB_REF_PROTECTED": "false", "GITHUB_REF_TYPE": "branch",
		"GITHUB_WORKSPACE": "/github/workspace", "GITHUB_ACTION": "__self", "GITHUB_EVENT_PATH": "/github/workflow/event.json",
		"GITHUB_ACTION_REPOSITORY": "", "GITHUB_ACTION_REF": "",
		"RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_NAME": "GitHub Actions 2", "RUNNER_ENVIRONMENT": "github-hosted",
		"RUNNER_TOOL_CACHE": "/opt/hostedtoolcache", "RUNNER_TEMP": "/home/runner/work/_temp", "RUNNER_WORKSPACE": "/home/runner/work/evals",
		"ACTIONS_RUNTIME_URL": "https://pipelines.actions.githubusercontent.com/abc/", "ACTIONS_RUNTIME_TOKEN": "rt_" + randHex(20),
		"ACTIONS_CACHE_URL": "https://artifactcache.actions.githubusercontent.com/abc/", "ACTIONS_RESULTS_URL": "https://results-receiver.actions.githubusercontent.com/",
		"GITHUB_ACTIONS": "true", "CI": "true",
	} {
		env[k] = v
	}
	for k, f := range files {
		env[k] = "/github/file_commands/" + f
	}
	name := "steward-runner-" + randHex(6)
	// --cidfile is the harness's, not the runner's: the container's ID names
	// the scope of what Steward creates in Docker (its lock-scope label), so
	// that the test removes it all at the end, built images included.
	cidfile := filepath.Join(j.root, name+".cid")
	args := []string{"run", "--name", name, "--cidfile", cidfile, "--label", j.r.label, "--workdir", "/github/workspace", "--rm"}
	var keys []string
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	cenv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DOCKER_BUILDKIT=0"}
	for _, k := range keys {
		args = append(args, "-e", k) // the value comes from the docker client's environment, as the runner passes it
		cenv = append(cenv, k+"="+env[k])
	}
	args = append(args,
		"-v", "/var/run/docker.sock:/var/run/docker.sock",
		"-v", filepath.Join(j.root, "home")+":/github/home",
		"-v", filepath.Join(j.root, "workflow")+":/github/workflow",
		"-v", fc+":/github/file_commands",
		"-v", j.ws+":/github/workspace",
		j.r.image)
	args = append(args, j.r.action.Runs.Args...)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "docker", args...)
	c.Env = cenv
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the test's own signals (its ^C) do not reach the step
	var out lockedBuffer
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered before anything here can fail the test, so that what the
	// action created in Docker goes even then.
	t.Cleanup(func() {
		if id, err := os.ReadFile(cidfile); err == nil {
			removeScope(strings.TrimSpace(string(id)))
		}
	})
	exited := make(chan struct{})
	var werr error
	j.proc = c.Process
	go func() { werr = c.Wait(); close(exited) }()
	if during != nil {
		during(name, exited)
	}
	<-exited
	res := &stepResult{step: s, code: c.ProcessState.ExitCode(), raw: out.String(), elapsed: time.Since(start), inputs: env}
	if werr != nil && res.code < 0 {
		t.Fatalf("docker run: %v\n%s", werr, res.raw)
	}
	res.log = runnerlog.Parse(res.raw)
	res.outputs = readOutputs(t, filepath.Join(fc, files["GITHUB_OUTPUT"]))
	res.summary = string(mustRead(t, filepath.Join(fc, files["GITHUB_STEP_SUMMARY"])))
	j.results = append(j.results, res)
	return res
}

// lockedBuffer is a buffer safe for docker's two output pipes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// ownedByWorkspaceOwner lists files under dir not owned by the workspace's owner.
func notOwned(dir string) []string {
	var bad []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && (st.Uid != workspaceUID || st.Gid != workspaceGID) {
			bad = append(bad, fmt.Sprintf("%s (%d:%d)", p, st.Uid, st.Gid))
		}
		return nil
	})
	return bad
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return out
}
