package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// harborWorkflowDoc is the sharded Harbor workflow as docs/harbor.md shows
// it: the test runs what users paste.
func harborWorkflowDoc(t *testing.T) *workflow {
	t.Helper()
	doc := string(mustRead(t, "../../docs/harbor.md"))
	m := regexp.MustCompile("(?s)```yaml\n(# \\.github/workflows/harbor-dataset\\.yml\n.*?)```\n").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/harbor.md shows no .github/workflows/harbor-dataset.yml")
	}
	src := strings.ReplaceAll(m[1], "uses: steward-evals/steward@v1", "uses: ./")
	p := filepath.Join(t.TempDir(), "harbor-dataset.yml")
	writeFile(t, p, src)
	wf := readWorkflow(t, p)
	wf.File = "docs/harbor.md:harbor-dataset.yml"
	return wf
}

// harborReport is what report.json says of a Harbor run beyond runnerReport.
type harborReport struct {
	RunIDs   []string        `json:"run_ids"`
	Shard    string          `json:"shard"`
	Attempts []harborAttempt `json:"attempts"`
	Ramp     []struct {
		Task     string `json:"task"`
		Decision string `json:"decision"`
	} `json:"ramp"`
}

type harborAttempt struct {
	Sample      string `json:"sample"`
	Status      string `json:"status"`
	Carried     bool   `json:"carried"`
	CarriedFrom string `json:"carried_from"`
}

func readHarborReport(t *testing.T, j *ghJob, res *stepResult) harborReport {
	t.Helper()
	var rep harborReport
	if err := json.Unmarshal(mustRead(t, filepath.Join(j.ws, res.outputs["json-path"])), &rep); err != nil {
		t.Fatalf("%s: report.json: %v", res.step.Name, err)
	}
	return rep
}

// A Harbor dataset in the action, sharded: docs/harbor.md's workflow (a
// matrix of two shards, then a merge job with the verdict against main's
// record) on testdata/harbor's five tasks and testdata/harbor-compose's
// compose task, with the oracle. A push to main runs every task across the
// shards, each shard's ramp tending it; a pull request with nothing changed
// then runs no attempt (everything carried from the push) and its merge
// comments the verdict unchanged; a second push to the pull request carries
// again and updates the same sticky comment.
func runnerHarborSharded(t *testing.T, img string) {
	r := newGHRunner(t, img)
	const pr = 17
	r.gh.AddPullRequest(r.owner, r.repo, pr)
	wf := harborWorkflowDoc(t)
	r.prepare = func(ws string) {
		ds := filepath.Join(ws, "evals", "terminal-bench")
		copyTree(t, "../../testdata/harbor", ds)
		envs, _ := filepath.Glob(filepath.Join(ds, "*", "environment"))
		if len(envs) != 5 {
			t.Fatalf("testdata/harbor: %d environments, want 5", len(envs))
		}
		for _, env := range envs {
			harborBusybox(t, env, "", "cmd/steward runner harbor-sharded")
		}
		// And the compose task: main and a web service, built here too.
		copyTree(t, "../../testdata/harbor-compose/web-service", filepath.Join(ds, "web-service"))
		for _, c := range []struct{ ctx, dockerfile string }{{"main", ""}, {"web", "web.Dockerfile"}} {
			harborBusybox(t, filepath.Join(ds, "web-service", "environment", c.ctx), c.dockerfile, "cmd/steward runner harbor-sharded "+c.ctx)
		}
		writeFile(t, filepath.Join(ws, "evals", "terminal-bench.yaml"), `name: terminal-bench
tasks:
  - name: terminal-bench
    sandbox: {provider: docker}
    tasks_from: {harbor: terminal-bench}
    agent: oracle
`)
		// A tend every 200 ms: a shard's run, which builds and starts
		// sandboxes, lasts several of them.
		writeFile(t, filepath.Join(ws, "evals", "_steward.yaml"), "tend_interval: 200ms\n")
	}
	samples := []string{"background-server", "reward-json", "system-state", "timeout", "web-service", "write-file"}

	// One workflow run: every action step checked; the shards' reports and
	// the merge's returned.
	run := func(name, event string, payload map[string]any, runID, ghPR int) (shards []harborReport, merge *stepResult, merged harborReport) {
		t.Helper()
		jobs := runWorkflow(t, r, wf, event, payload, runID, ghPR)
		steps := actionSteps(jobs)
		if len(steps) != 3 {
			t.Fatalf("%s: %d action steps, want two shards and the merge", name, len(steps))
		}
		shardTotal := 0
		for _, s := range steps {
			rep := checkStep(t, s.j, s.res, "evals/terminal-bench.yaml")
			t.Logf("%s: job %s %v: exit %d, %+v", name, s.j.name, s.j.matrix, s.res.code, rep.Counts)
			if s.res.code != 0 {
				t.Errorf("%s: job %s %v: exit %d:\n%s", name, s.j.name, s.j.matrix, s.res.code, s.res.log.Text())
			}
			if rep.Counts.Passed != rep.Counts.Total || rep.Counts.Total == 0 {
				t.Errorf("%s: job %s %v: counts %+v, want every attempt passed", name, s.j.name, s.j.matrix, rep.Counts)
			}
			if s.res.inputs["INPUT_MODE"] == "merge" {
				merge, merged = s.res, readHarborReport(t, s.j, s.res)
				if rep.Counts.Total != shardTotal {
					t.Errorf("%s: the merge reports %d attempts, the shards ran %d", name, rep.Counts.Total, shardTotal)
				}
				continue
			}
			shardTotal += rep.Counts.Total
			hr := readHarborReport(t, s.j, s.res)
			if want := s.j.matrix["shard"] + "/2"; hr.Shard != want {
				t.Errorf("%s: shard report says shard %q, want %q", name, hr.Shard, want)
			}
			// A shard that ran attempts tended them: ramp points in its
			// report, the ramp's section in its job summary.
			if slices.ContainsFunc(hr.Attempts, func(a harborAttempt) bool { return !a.Carried }) &&
				(len(hr.Ramp) == 0 || !strings.Contains(s.res.summary, "### Sample ramp")) {
				t.Errorf("%s: shard %s ran attempts but shows no ramp (%d points):\n%s", name, hr.Shard, len(hr.Ramp), s.res.summary)
			}
			shards = append(shards, hr)
		}
		if merge == nil {
			t.Fatalf("%s: no merge step ran", name)
		}
		var got []string
		for _, s := range shards {
			for _, a := range s.Attempts {
				got = append(got, a.Sample)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, samples) {
			t.Errorf("%s: the shards ran %v, want each of %v once", name, got, samples)
		}
		for _, x := range r.gh.TakeRejections() {
			t.Errorf("%s: fake GitHub rejected %s %s (%d): %s", name, x.Method, x.Path, x.Status, x.Rejected)
		}
		return shards, merge, merged
	}

	// A push to main: every task runs, split across the two shards, each
	// shard's ramp tending its run; the merge saves main's record.
	shards, merge, merged := run("push", "push", r.pushEvent(), 9501, 0)
	pushRuns := merged.RunIDs // the merged record's run, and the shards' runs below
	for i, s := range shards {
		pushRuns = append(pushRuns, s.RunIDs...)
		if len(s.Attempts) == 0 || len(s.Attempts) == len(samples) {
			t.Errorf("push: shard %d ran %d of %d samples: not split", i+1, len(s.Attempts), len(samples))
		}
		for _, a := range s.Attempts {
			if a.Carried || a.Status != "passed" {
				t.Errorf("push: shard %d: %s %s carried=%v, want run and passed", i+1, a.Sample, a.Status, a.Carried)
			}
		}
	}
	if merge.outputs["comment-url"] != "" || len(stickyComments(t, r.gh)) != 0 {
		t.Errorf("push: commented (%s) though comment is false on a push", merge.outputs["comment-url"])
	}

	// A pull request with nothing changed, twice: no attempt runs (every
	// result carried from the push's shard runs), the verdict is
	// unchanged, and one sticky comment says so.
	var commentID int64
	for i, runID := range []int{9502, 9503} {
		name := []string{"pull request", "pull request, pushed again"}[i]
		shards, merge, _ := run(name, "pull_request", r.prEvent(pr, false), runID, pr)
		for k, s := range shards {
			for _, a := range s.Attempts {
				if !a.Carried || a.Status != "passed" || !slices.Contains(pushRuns, a.CarriedFrom) {
					t.Errorf("%s: shard %d: %s %s carried=%v from %q, want carried from the push's runs %v (its merge or its shards)", name, k+1, a.Sample, a.Status, a.Carried, a.CarriedFrom, pushRuns)
				}
			}
		}
		if v := merge.outputs["verdict"]; v != "unchanged" {
			t.Errorf("%s: verdict %q, want unchanged:\n%s", name, v, merge.summary)
		}
		if !strings.Contains(merge.summary, "### Compared with base") {
			t.Errorf("%s: no comparison in the merge's summary:\n%s", name, merge.summary)
		}
		c := checkComment(t, r, merge, pr)
		if !strings.Contains(c.Body, "unchanged") || !strings.Contains(c.Body, "terminal-bench") {
			t.Errorf("%s: the comment does not give the verdict:\n%s", name, c.Body)
		}
		if cs := stickyComments(t, r.gh); len(cs) != 1 {
			t.Errorf("%s: %d sticky comments, want one: %v", name, len(cs), ids(cs))
		}
		if i == 0 {
			commentID = c.ID
		} else if c.ID != commentID {
			t.Errorf("%s: commented %d, want the same comment %d updated", name, c.ID, commentID)
		}
	}
}
