package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/sandbox"
	dockerpkg "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// The action as users run it: the image built from Dockerfile.prebuilt, run
// exactly as a GitHub-hosted runner runs a container action, for every
// workflow under .github/workflows that uses it and every example under
// examples/, plus a fork's read-only token, a rate-limited API and a
// cancellation with the runner's signal sequence.
func TestRunnerFaithful(t *testing.T) {
	t.Parallel()
	needDocker(t)
	img := actionImage(t)
	t.Run("workflows", func(t *testing.T) { runnerWorkflows(t, img) })
	t.Run("examples", func(t *testing.T) { runnerExamples(t, img) })
	t.Run("read-only-token", func(t *testing.T) { runnerReadOnly(t, img) })
	t.Run("rate-limited", func(t *testing.T) { runnerRateLimited(t, img) })
	t.Run("bad-input", func(t *testing.T) { runnerBadInput(t, img) })
	t.Run("cancelled", func(t *testing.T) { runnerCancelled(t, img) })
	t.Run("harbor-sharded", func(t *testing.T) { runnerHarborSharded(t, img) })
}

// report.json as the checks need it.
type runnerReport struct {
	RunIDs  []string `json:"run_ids"`
	Partial bool     `json:"partial"`
	EvalSet string   `json:"eval_set"`
	Tasks   []struct {
		Name string `json:"name"`
	} `json:"tasks"`
	Attempts []struct {
		Source string `json:"source"`
	} `json:"attempts"`
	Counts struct {
		Total, Passed, Failed, Errored, Infra, Interrupted, Skipped int
	} `json:"counts"`
}

// checkStep holds for every run of the action: nothing secret in the job
// log, every mask before commands stop, commands resumed, outputs equal to
// report.json, an exit code that matches the counts, a summary naming every
// task, workspace files owned by the workspace's owner, nothing of the run
// left in Docker. It returns the report.
func checkStep(t *testing.T, j *ghJob, res *stepResult, evalSet string, secrets ...string) runnerReport {
	t.Helper()
	l := res.log
	secrets = append(secrets, j.token, res.inputs["ACTIONS_RUNTIME_TOKEN"])
	if leaks := l.Leaks(secrets...); len(leaks) > 0 {
		t.Errorf("%s: the job log shows %d secret value(s):\n%s", res.step.Name, len(leaks), l.Text())
	}
	for _, s := range secrets {
		if !slices.Contains(l.MasksBeforeStop, s) {
			t.Errorf("%s: secret %.6s… not masked before ::stop-commands::", res.step.Name, s)
		}
	}
	if l.Unresumed {
		t.Errorf("%s: the step ended with workflow commands stopped", res.step.Name)
	}
	var rep runnerReport
	jp := res.outputs["json-path"]
	if jp == "" || filepath.IsAbs(jp) {
		t.Fatalf("%s: exit %d, json-path output %q (want workspace-relative):\n%s", res.step.Name, res.code, jp, l.Text())
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(j.ws, jp)), &rep); err != nil {
		t.Fatalf("%s: report.json: %v", res.step.Name, err)
	}
	c := rep.Counts
	errored := c.Errored + c.Infra + c.Interrupted
	for k, v := range map[string]int{"total": c.Total, "passed": c.Passed, "failed": c.Failed, "errored": errored, "skipped": c.Skipped} {
		if res.outputs[k] != strconv.Itoa(v) {
			t.Errorf("%s: output %s = %q, report.json says %d", res.step.Name, k, res.outputs[k], v)
		}
	}
	for _, k := range []string{"summary-path", "junit-path", "report-dir"} {
		p := res.outputs[k]
		if p == "" || filepath.IsAbs(p) {
			t.Errorf("%s: output %s = %q, want a workspace-relative path", res.step.Name, k, p)
		} else if _, err := os.Stat(filepath.Join(j.ws, p)); err != nil {
			t.Errorf("%s: output %s: %v", res.step.Name, k, err)
		}
	}
	want := 0
	switch {
	case rep.Partial:
		want = 130
	case c.Infra > 0:
		want = 3
	case c.Failed+errored > 0:
		want = 1
	}
	if res.code != want {
		t.Errorf("%s: exit %d, the counts %+v call for %d:\n%s", res.step.Name, res.code, c, want, l.Text())
	}
	for _, task := range rep.Tasks {
		if !strings.Contains(res.summary, task.Name) {
			t.Errorf("%s: the job summary does not name task %s:\n%s", res.step.Name, task.Name, res.summary)
		}
	}
	if evalSet != "" && len(rep.Tasks) == 0 && rep.Counts.Total > 0 {
		t.Errorf("%s: report.json names no task", res.step.Name)
	}
	// Paths in reports are the workspace's, not the container's.
	for _, p := range []string{rep.EvalSet, res.summary} {
		if strings.Contains(p, "/github/workspace") {
			t.Errorf("%s: a report shows the container's path:\n%s", res.step.Name, p)
		}
	}
	for _, a := range rep.Attempts {
		if strings.HasPrefix(a.Source, "/") {
			t.Errorf("%s: attempt source %q is not workspace-relative", res.step.Name, a.Source)
			break
		}
	}
	if !strings.Contains(res.summary, "steward ") {
		t.Errorf("%s: the job summary has no version footer:\n%s", res.step.Name, res.summary)
	}
	if bad := notOwned(j.ws); len(bad) > 0 {
		t.Errorf("%s: workspace files not owned by the workspace's owner (%d:%d): %v", res.step.Name, workspaceUID, workspaceGID, bad[:min(5, len(bad))])
	}
	for _, id := range rep.RunIDs {
		if left := leftovers(t, id); left != "" {
			t.Errorf("%s: run %s left containers or networks:\n%s", res.step.Name, id, left)
		}
	}
	return rep
}

// checkComment: the comment-url output names a comment by the Actions bot,
// carrying the marker, on pr; or, when none was wanted, there is none.
func checkComment(t *testing.T, r *ghRunner, res *stepResult, pr int) fakegithub.Comment {
	t.Helper()
	u := res.outputs["comment-url"]
	if u == "" {
		t.Fatalf("%s: no comment-url output:\n%s", res.step.Name, res.log.Text())
	}
	for _, c := range r.gh.Comments(r.owner, r.repo, pr) {
		if strings.HasSuffix(u, fmt.Sprintf("#issuecomment-%d", c.ID)) {
			if c.User != "github-actions[bot]" || !strings.HasPrefix(c.Body, "<!-- steward:report") {
				t.Errorf("%s: comment %d by %s:\n%s", res.step.Name, c.ID, c.User, c.Body)
			}
			return c
		}
	}
	t.Fatalf("%s: comment-url %s names no comment on #%d", res.step.Name, u, pr)
	return fakegithub.Comment{}
}

// runWorkflow runs the jobs of wf for one event, in file order, matrices
// expanded, `if:` honoured; it returns the jobs run.
func runWorkflow(t *testing.T, r *ghRunner, wf *workflow, eventName string, event map[string]any, runID int, ghPR int) []*ghJob {
	var jobs []*ghJob
	failed := false
	for _, name := range wf.order {
		spec := wf.Jobs[name]
		combos := []map[string]string{{}}
		for k, vs := range spec.Strategy.Matrix {
			var next []map[string]string
			for _, c := range combos {
				for _, v := range vs {
					m := map[string]string{}
					for a, b := range c {
						m[a] = b
					}
					m[k] = str(v)
					next = append(next, m)
				}
			}
			combos = next
		}
		for _, m := range combos {
			j := r.newJob(wf, name, eventName, event, runID, m)
			j.ghPR = ghPR
			def := "success()"
			if spec.Needs == nil {
				def = "true"
			}
			j.failed = failed
			if !j.cond(spec.If, def) {
				continue
			}
			j.failed = false
			j.run()
			if j.failed {
				failed = true
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// actionSteps returns the action's runs in jobs.
func actionSteps(jobs []*ghJob) (out []struct {
	j   *ghJob
	res *stepResult
}) {
	for _, j := range jobs {
		for _, res := range j.results {
			out = append(out, struct {
				j   *ghJob
				res *stepResult
			}{j, res})
		}
	}
	return out
}

// Every workflow under .github/workflows that uses the action: pull_request
// workflows for a same-repository pull request and for a fork's, then the
// workflow_run ones after the fork's run they follow.
func runnerWorkflows(t *testing.T, img string) {
	r := newGHRunner(t, img)
	const samePR, forkPR = 17, 18
	r.gh.AddPullRequest(r.owner, r.repo, samePR)
	r.gh.AddPullRequest(r.owner, r.repo, forkPR)
	files, _ := filepath.Glob("../../.github/workflows/*.y*ml")
	var pushWfs, prWfs, wrWfs []*workflow
	for _, f := range files {
		wf := readWorkflow(t, f)
		if !wf.usesAction() {
			continue
		}
		_, push := wf.On["push"]
		_, pr := wf.On["pull_request"]
		_, wr := wf.On["workflow_run"]
		switch {
		case push:
			pushWfs = append(pushWfs, wf)
		case pr:
			prWfs = append(prWfs, wf)
		case wr:
			wrWfs = append(wrWfs, wf)
		default:
			t.Errorf("%s uses the action on events this test does not drive: %v", f, wf.On)
		}
	}
	if len(pushWfs) == 0 || len(prWfs) == 0 || len(wrWfs) == 0 {
		t.Fatalf("workflows using the action: %d push, %d pull_request, %d workflow_run", len(pushWfs), len(prWfs), len(wrWfs))
	}
	runID := 9000
	// Pushes to main first: they save the base branch's record.
	for _, wf := range pushWfs {
		runID++
		t.Run(filepath.Base(wf.File)+"/push", func(t *testing.T) {
			jobs := runWorkflow(t, r, wf, "push", r.pushEvent(), runID, 0)
			checkWorkflowRun(t, r, wf, jobs, 0, false)
		})
	}
	forkRuns := map[string]int{} // workflow name → the fork run's id
	for _, wf := range prWfs {
		for _, fork := range []bool{false, true} {
			pr := samePR
			if fork {
				pr = forkPR
			}
			runID++
			name := filepath.Base(wf.File) + map[bool]string{false: "/same-repo", true: "/fork"}[fork]
			t.Run(name, func(t *testing.T) {
				jobs := runWorkflow(t, r, wf, "pull_request", r.prEvent(pr, fork), runID, pr)
				checkWorkflowRun(t, r, wf, jobs, pr, !fork)
			})
			if fork {
				forkRuns[wf.Name] = runID
			}
		}
	}
	for _, wf := range wrWfs {
		wr, _ := wf.On["workflow_run"].(map[string]any)
		names, _ := wr["workflows"].([]any)
		for _, n := range names {
			id, ok := forkRuns[str(n)]
			if !ok {
				t.Errorf("%s follows %q, which no workflow here is named", wf.File, n)
				continue
			}
			t.Run(filepath.Base(wf.File)+"/after-"+str(n), func(t *testing.T) {
				runID++
				jobs := runWorkflow(t, r, wf, "workflow_run", r.workflowRunEvent(str(n), id), runID, forkPR)
				checkWorkflowRun(t, r, wf, jobs, forkPR, true)
			})
		}
	}
}

// checkWorkflowRun: every action step passes its checks (the shipped
// workflows run the quickstart, which passes); a step asked to comment with
// a token that may write leaves exactly its comment; merged totals equal the
// shards' sum.
func checkWorkflowRun(t *testing.T, r *ghRunner, wf *workflow, jobs []*ghJob, pr int, commentable bool) {
	t.Helper()
	steps := actionSteps(jobs)
	if len(steps) == 0 {
		t.Fatalf("%s: no step ran the action", wf.File)
	}
	shardTotal, mergeTotal := 0, -1
	for _, s := range steps {
		j, res := s.j, s.res
		t.Logf("%s job %s %v: exit %d in %v", wf.File, j.name, j.matrix, res.code, res.elapsed.Round(time.Millisecond))
		evalSet := res.inputs["INPUT_EVAL-SET"]
		rep := checkStep(t, j, res, evalSet)
		if res.code != 0 {
			t.Errorf("%s job %s: exit %d:\n%s", wf.File, j.name, res.code, res.log.Text())
		}
		if rep.Counts.Total == 0 {
			t.Errorf("%s job %s: nothing ran", wf.File, j.name)
		}
		switch {
		case res.inputs["INPUT_MODE"] == "merge":
			mergeTotal = rep.Counts.Total
		case res.inputs["INPUT_SHARD"] != "":
			shardTotal += rep.Counts.Total
		}
		// A baseline was saved by the push run before: the comparison shows.
		if res.inputs["INPUT_BASELINE"] != "" && !strings.Contains(res.summary, "### Compared with base") {
			t.Errorf("%s job %s: baseline %s but no comparison in the summary:\n%s", wf.File, j.name, res.inputs["INPUT_BASELINE"], res.summary)
		}
		wantComment := res.inputs["INPUT_COMMENT"] == "true" && j.write && commentable
		if wantComment {
			c := checkComment(t, r, res, pr)
			if title := res.inputs["INPUT_TITLE"]; title != "" && !strings.Contains(c.Body, title) {
				t.Errorf("%s: the comment lacks the title %q:\n%s", wf.File, title, c.Body)
			}
		} else if res.outputs["comment-url"] != "" {
			t.Errorf("%s job %s: commented (%s) though comment=%s write=%v", wf.File, j.name, res.outputs["comment-url"], res.inputs["INPUT_COMMENT"], j.write)
		}
	}
	// A step asked to comment with a read-only token (a fork's) is refused
	// by GitHub; the fake recorded it. Those refusals, and only those, are
	// expected; the step said why.
	readOnly := map[string]bool{}
	for _, s := range steps {
		if s.res.inputs["INPUT_COMMENT"] == "true" && !s.j.write {
			readOnly[s.j.token] = true
			if !strings.Contains(s.res.summary, "read-only") {
				t.Errorf("%s job %s: the summary does not say why there is no comment:\n%s", wf.File, s.j.name, s.res.summary)
			}
		}
	}
	for _, x := range r.gh.TakeRejections() {
		if x.Status != 403 || !readOnly[x.Token] {
			t.Errorf("fake GitHub rejected %s %s (%d): %s", x.Method, x.Path, x.Status, x.Rejected)
		}
	}
	if shardTotal > 0 && mergeTotal != shardTotal {
		t.Errorf("%s: the merge reports %d attempts, the shards ran %d", wf.File, mergeTotal, shardTotal)
	}
}

// exampleWorkflow is the workflow a user writes for one eval set.
func exampleWorkflow(evalSet, title string) *workflow {
	return &workflow{
		File: "example:" + evalSet, Name: "Example " + title,
		On:          map[string]any{"pull_request": nil},
		Permissions: map[string]string{"contents": "read", "pull-requests": "write"},
		Jobs: map[string]workflowJob{"eval": {Steps: []workflowStep{
			{Uses: "actions/checkout@v4"},
			{ID: "steward", Name: "Run " + title, Uses: "./", With: map[string]string{"eval-set": evalSet, "title": title}},
		}}},
		order: []string{"eval"},
	}
}

// Every example under examples/, through the action. An example that needs
// a real API key gets the fake provider instead (its base_url is pointed at
// it and the key it names is set); the Docker one gets its busybox from
// prepare.sh, as its README says.
func runnerExamples(t *testing.T, img string) {
	r := newGHRunner(t, img)
	pr := 17
	r.gh.AddPullRequest(r.owner, r.repo, pr)
	dirs, _ := filepath.Glob("../../examples/*/steward.yaml")
	if len(dirs) < 4 {
		t.Fatalf("examples: %v", dirs)
	}
	for i, f := range dirs {
		name := filepath.Base(filepath.Dir(f))
		evalSet := "examples/" + name + "/steward.yaml"
		t.Run(name, func(t *testing.T) {
			wf := exampleWorkflow(evalSet, name)
			j := r.newJob(wf, "eval", "pull_request", r.prEvent(pr, false), 7000+i, nil)
			var secrets []string
			var fp *fakeprovider.Server
			src := string(mustRead(t, f))
			if strings.Contains(src, "api_key_env:") {
				key := "sk-example-" + randHex(12)
				fp = fakeprovider.New(fakeprovider.Config{APIKey: key})
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				base, err := fp.Start(ctx, r.bridgeIP+":0")
				if err != nil {
					t.Fatal(err)
				}
				j.extraEnv["OPENAI_API_KEY"] = key
				secrets = append(secrets, key)
				j.prepare = func(ws string) {
					p := filepath.Join(ws, evalSet)
					s := string(mustRead(t, p))
					s2 := strings.Replace(s, "# base_url: http://127.0.0.1:8000/v1", "base_url: "+base+"/v1", 1)
					if s2 == s {
						t.Fatalf("%s: no commented base_url line to point at the fake provider", evalSet)
					}
					writeFile(t, p, s2)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), "prepare.sh")); err == nil {
				j.prepare = func(ws string) {
					c := exec.Command("sh", filepath.Join(ws, "examples", name, "prepare.sh"))
					c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
					if out, err := c.CombinedOutput(); err != nil {
						t.Fatalf("prepare.sh: %v\n%s", err, out)
					}
				}
			}
			j.run()
			if len(j.results) != 1 {
				t.Fatalf("the action ran %d times", len(j.results))
			}
			res := j.results[0]
			t.Logf("%s: exit %d in %v", name, res.code, res.elapsed.Round(time.Millisecond))
			rep := checkStep(t, j, res, evalSet, secrets...)
			if rep.Counts.Total == 0 || rep.Counts.Infra > 0 || res.code > 1 {
				t.Errorf("%s: exit %d counts %+v:\n%s", name, res.code, rep.Counts, res.log.Text())
			}
			if name == "quickstart" && (res.code != 0 || rep.Counts.Passed != 13) {
				t.Errorf("quickstart: exit %d counts %+v, want 13 passed", res.code, rep.Counts)
			}
			if fp != nil {
				if st := fp.Stats(); st.Succeeded == 0 || !slices.Contains(st.APIKeys, j.extraEnv["OPENAI_API_KEY"]) {
					t.Errorf("%s: the fake provider was not called with the key: %+v", name, st)
				}
			}
			c := checkComment(t, r, res, pr)
			if !strings.Contains(c.Body, name) {
				t.Errorf("%s: the comment lacks the title:\n%s", name, c.Body)
			}
		})
	}
}

// A fork's pull_request token is read-only: the comment is refused (403),
// the step still succeeds, and the log and the summary say why.
func runnerReadOnly(t *testing.T, img string) {
	r := newGHRunner(t, img)
	r.gh.AddPullRequest(r.owner, r.repo, 18)
	wf := exampleWorkflow("examples/quickstart/steward.yaml", "fork")
	j := r.newJob(wf, "eval", "pull_request", r.prEvent(18, true), 7100, nil)
	if j.write {
		t.Fatal("a fork's token must be read-only")
	}
	j.run()
	res := j.results[0]
	checkStep(t, j, res, "examples/quickstart/steward.yaml")
	if res.code != 0 {
		t.Fatalf("exit %d with a read-only token:\n%s", res.code, res.log.Text())
	}
	rej := r.gh.TakeRejections()
	if len(rej) == 0 {
		t.Fatalf("no write was attempted")
	}
	for _, x := range rej {
		if x.Status != 403 || x.Method != "POST" {
			t.Errorf("fake GitHub rejected %s %s (%d): %s", x.Method, x.Path, x.Status, x.Rejected)
		}
	}
	if len(r.gh.Comments(r.owner, r.repo, 18)) != 0 || res.outputs["comment-url"] != "" {
		t.Errorf("a comment exists after a read-only run")
	}
	var warned bool
	for _, a := range res.log.Annotations {
		warned = warned || (a.Level == "warning" && strings.Contains(a.Message, "read-only"))
	}
	if !warned || !strings.Contains(res.summary, "read-only") {
		t.Errorf("neither the log nor the summary says the token is read-only:\n%s\n%s", res.log.Text(), res.summary)
	}
}

// A rate-limited API (a primary limit, 403 with x-ratelimit-remaining: 0,
// then a 429 with Retry-After) is waited out and the comment posted.
func runnerRateLimited(t *testing.T, img string) {
	r := newGHRunner(t, img)
	r.gh.AddPullRequest(r.owner, r.repo, 17)
	r.gh.InjectRateLimit(fakegithub.Primary, time.Second)
	r.gh.InjectRateLimit(fakegithub.TooMany, time.Second)
	wf := exampleWorkflow("examples/quickstart/steward.yaml", "limited")
	j := r.newJob(wf, "eval", "pull_request", r.prEvent(17, false), 7200, nil)
	j.run()
	res := j.results[0]
	checkStep(t, j, res, "examples/quickstart/steward.yaml")
	checkComment(t, r, res, 17)
	var limited []string
	for _, q := range r.gh.Requests() {
		if q.RateLimited != "" {
			limited = append(limited, q.RateLimited)
		}
	}
	if !slices.Equal(limited, []string{fakegithub.Primary, fakegithub.TooMany}) {
		t.Errorf("rate-limited answers %v", limited)
	}
	if len(grepLines(res.log.Text(), "rate limit")) < 2 {
		t.Errorf("the log does not say the action waited:\n%s", res.log.Text())
	}
}

// Bad input: one error annotation per error, with the file and line, a
// summary that says what was wrong, exit 2.
func runnerBadInput(t *testing.T, img string) {
	r := newGHRunner(t, img)
	r.gh.AddPullRequest(r.owner, r.repo, 17)
	wf := exampleWorkflow("evals/steward.yaml", "bad")
	j := r.newJob(wf, "eval", "pull_request", r.prEvent(17, false), 7300, nil)
	j.prepare = func(ws string) {
		if err := os.MkdirAll(filepath.Join(ws, "evals"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ws, "evals", "steward.yaml"), "tasks:\n  - name: a\n    agnt: echo\n  - name: b\n    agent: echo\n    attempts: -1\n    samples: [{id: x, input: y}]\n")
	}
	j.run()
	res := j.results[0]
	if res.code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", res.code, res.log.Text())
	}
	// The eval set has five errors: agent missing, no samples and the
	// unknown key "agnt" in task a; no scorer and attempts -1 in task b.
	var located []string
	for _, a := range res.log.Annotations {
		if a.Level != "error" {
			continue
		}
		if a.Properties["file"] != "evals/steward.yaml" || a.Properties["line"] == "" {
			t.Errorf("error annotation without the file and line: %+v", a)
			continue
		}
		located = append(located, a.Properties["line"]+": "+a.Message)
	}
	if len(located) != 5 {
		t.Errorf("want one located error annotation per error (5), got %d: %v\n%s", len(located), located, res.log.Text())
	}
	if !strings.Contains(res.summary, "Steward: bad input") || !strings.Contains(res.summary, "5 error(s)") ||
		!strings.Contains(res.summary, "`evals/steward.yaml:3`") || !strings.Contains(res.summary, "agnt") {
		t.Errorf("the summary does not say what was wrong:\n%s", res.summary)
	}
}

// cancelEvalSet: quick local samples (inside the action's container) and
// slow Docker ones (siblings), at most three at a time.
const cancelEvalSet = `
name: action-cancel
tasks:
  - name: quick
    sandbox: {provider: local}
    exclusive: false
    agent: echo ok
    scorer: {match: exact}
    samples:
      - {id: q1, input: quick, target: ok}
      - {id: q2, input: quick, target: ok}
      - {id: q3, input: quick, target: ok}
  - name: slow
    sandbox: {provider: docker, build: image, memory: 64m}
    max_samples: 3
    agent: 'sleep 300; echo ok'
    scorer: {match: exact}
    samples:
      - {id: s1, input: slow, target: ok}
      - {id: s2, input: slow, target: ok}
      - {id: s3, input: slow, target: ok}
      - {id: s4, input: slow, target: ok}
      - {id: s5, input: slow, target: ok}
`

// containerEvents follows the daemon's container events of kind action from
// since on (a second before, so none is missed however late the test
// subscribes), filtered by more, until the test ends.
func containerEvents(t *testing.T, since time.Time, action events.Action, more ...filters.KeyValuePair) (<-chan events.Message, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return containerEventsCtx(ctx, t, since, action, more...)
}

// containerEventsCtx is containerEvents until ctx ends.
func containerEventsCtx(ctx context.Context, t *testing.T, since time.Time, action events.Action, more ...filters.KeyValuePair) (<-chan events.Message, <-chan error) {
	t.Helper()
	api := dockertest.Client(t)
	f := filters.NewArgs(append([]filters.KeyValuePair{filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(action))}, more...)...)
	return api.Events(ctx, events.ListOptions{Since: strconv.FormatInt(since.Add(-time.Second).Unix(), 10), Filters: f})
}

// actionDies follows the daemon's event stream from since on and sends the
// time (the daemon's) at which the container named action died.
func actionDies(t *testing.T, since time.Time, action string) <-chan time.Time {
	t.Helper()
	msgs, errs := containerEvents(t, since, events.ActionDie, filters.Arg("container", action))
	out := make(chan time.Time, 1)
	go func() {
		for {
			select {
			case m := <-msgs:
				if m.Actor.Attributes["name"] == action {
					out <- time.Unix(0, m.TimeNano)
					return
				}
			case <-errs:
				return
			}
		}
	}()
	return out
}

// sandboxStarts follows the daemon's event stream from since on (so no
// start is missed, however late the test subscribes) and sends one value
// per start of a sandbox container of task created by the Steward running
// in the container named action: its lock-scope label names that container.
func sandboxStarts(t *testing.T, since time.Time, action, task string) <-chan struct{} {
	t.Helper()
	api := dockertest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	msgs, errs := containerEvents(t, since, events.ActionStart,
		filters.Arg("label", "dev.steward.role=sandbox"), filters.Arg("label", sandbox.LabelTask+"="+task))
	out := make(chan struct{}, 64)
	go func() {
		var scope string
		for {
			select {
			case m := <-msgs:
				if scope == "" {
					// Once one of its sandboxes started, the action exists;
					// before, the start was another test's.
					c, err := api.ContainerInspect(ctx, action)
					if err != nil {
						continue
					}
					scope = "container:" + c.ID
				}
				if m.Actor.Attributes[dockerpkg.LabelLockScope] == scope {
					out <- struct{}{}
				}
			case <-errs:
				return
			}
		}
	}()
	return out
}

// The runner's cancellation: it signals the step's process, `docker run`
// (which passes SIGINT and SIGTERM on to the container; its SIGKILL ends
// only the client): SIGINT, SIGTERM 7.5 s later, SIGKILL at 10 s. Steward exits on its own after the SIGINT (before
// the SIGTERM), with the partial report posted and a notice saying the run
// was cancelled, and leaves no container or network of the run.
func runnerCancelled(t *testing.T, img string) {
	r := newGHRunner(t, img)
	r.gh.AddPullRequest(r.owner, r.repo, 17)
	wf := exampleWorkflow("cancel/steward.yaml", "cancelled")
	j := r.newJob(wf, "eval", "pull_request", r.prEvent(17, false), 7400, nil)
	j.prepare = func(ws string) {
		copyTree(t, dockertest.BusyboxContext(t, "cmd-steward-runner"), filepath.Join(ws, "cancel", "image"))
		writeFile(t, filepath.Join(ws, "cancel", "steward.yaml"), cancelEvalSet)
	}
	j.checkout()
	var elapsed, died time.Duration
	var signals []string
	since := time.Now()
	res := j.startAction(wf.Jobs["eval"].Steps[1], func(name string, exited <-chan struct{}) {
		dies := actionDies(t, since, name)
		starts := sandboxStarts(t, since, name, "slow")
		bound := time.After(4 * time.Minute)
		for range 3 {
			select {
			case <-starts:
			case <-exited:
				t.Fatalf("the action ended before the cancellation")
			case <-bound:
				t.Fatalf("three slow sandboxes never ran")
			}
		}
		start := time.Now()
		runnerCancel(t, func(s os.Signal) {
			sig := map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[s]
			signals = append(signals, sig)
			_ = j.proc.Signal(s) // docker run passes SIGINT and SIGTERM on to the container
		}, exited)
		elapsed = time.Since(start)
		select {
		case at := <-dies:
			died = at.Sub(start)
		case <-time.After(time.Minute):
			t.Fatalf("the daemon never reported the action's container dying")
		}
	})
	t.Logf("cancellation: Steward's container died %v after the SIGINT, docker run exited %v after it, exit %d (signals %v)",
		died.Round(10*time.Millisecond), elapsed.Round(10*time.Millisecond), res.code, signals)
	// What must hold is that Steward ends on its own before the runner's
	// SIGTERM: its container's death, by the daemon's clock. `docker run
	// --rm` exits only once the daemon has removed the container too, which
	// on a daemon busy with other jobs' builds took seconds more (8.18 s in
	// a CI run); a SIGTERM the runner sends it then reaches no process.
	if died >= 7500*time.Millisecond || res.code != 130 || signals[0] != "SIGINT" || slices.Contains(signals, "SIGKILL") {
		t.Fatalf("exit %d, container died %v after the SIGINT, signals %v: Steward must exit on its own before the runner's SIGTERM (7.5 s):\n%s",
			res.code, died, signals, res.log.Text())
	}
	rep := checkStep(t, j, res, "cancel/steward.yaml")
	if !rep.Partial || res.outputs["partial"] != "true" || rep.Counts.Passed != 3 {
		t.Errorf("report %+v outputs %v", rep, res.outputs)
	}
	c := checkComment(t, r, res, 17)
	if !strings.Contains(c.Body, "Partial report") {
		t.Errorf("the comment is not the partial report:\n%s", c.Body)
	}
	var notice bool
	for _, a := range res.log.Annotations {
		if strings.Contains(a.Message, "context canceled") {
			t.Errorf("annotation %s: %q (say what happened)", a.Level, a.Message)
		}
		notice = notice || (a.Level == "notice" && strings.Contains(a.Message, "cancelled"))
	}
	if !notice {
		t.Errorf("no notice says the run was cancelled:\n%s", res.log.Text())
	}
	if left := docker(t, "ps", "-aq", "--filter", "label=dev.steward.run="+strings.Join(rep.RunIDs, "")); left != "" {
		t.Errorf("containers left: %s", left)
	}
}
