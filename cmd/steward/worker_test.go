package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const twoTasks = `
tasks:
  - name: victim
    sandbox: {provider: local}
    exclusive: false
    agent: 'sleep 1; echo ok'
    scorer: {match: exact}
    samples: [{id: v1, input: "", target: ok}, {id: v2, input: "", target: ok}, {id: v3, input: "", target: ok}, {id: v4, input: "", target: ok}]
  - name: other
    sandbox: {provider: local}
    exclusive: false
    agent: 'sleep 0.5; echo ok'
    scorer: {match: exact}
    samples: [{id: o1, input: "", target: ok}, {id: o2, input: "", target: ok}, {id: o3, input: "", target: ok}]
`

type workerJSONReport struct {
	RunIDs   []string `json:"run_ids"`
	Attempts []struct {
		Task, Sample, Status, Reason string
	} `json:"attempts"`
}

func workerReport(t *testing.T, dir string) workerJSONReport {
	t.Helper()
	out, _ := steward(t, dir, "report", "--format", "json")
	var r workerJSONReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return r
}

// W1: a worker SIGKILLed mid-run costs its task (errored with the reason);
// the other task finishes and the report is complete.
func TestWorkerKilledCostsOnlyItsTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The victim's agents leave a grandchild outside their process group,
	// then say they run: the worker is killed mid-attempt.
	sig := newAgentSignals(t, dir)
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(twoTasks, "agent: 'sleep 1; echo ok'", "agent: 'setsid sleep 300 </dev/null >/dev/null 2>&1 & "+sig.shell("started")+"; sleep 1; echo ok'", 1))
	cmd := exec.Command(exe, "launch")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sig.next(t, time.Minute)
	victim := workerFor(t, cmd.Process.Pid, "victim")
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("launch: %v\n%s", err, out.String())
	}
	r := workerReport(t, dir)
	if len(r.Attempts) != 7 {
		t.Fatalf("report has %d attempts", len(r.Attempts))
	}
	// Nothing of the dead worker's agents outlives the run.
	if left := crashProcs(r.RunIDs[0]); len(left) > 0 {
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		t.Fatalf("processes of the killed worker's agents outlive the run: %v", left)
	}
	for _, a := range r.Attempts {
		switch a.Task {
		case "victim":
			if a.Status != "errored" || !strings.Contains(a.Reason, "worker process for victim crashed") {
				t.Fatalf("victim attempt %+v", a)
			}
		case "other":
			if a.Status != "passed" {
				t.Fatalf("other attempt %+v", a)
			}
		}
	}
}

// W1: a worker that panics costs its task, with the panic as the reason.
func TestWorkerPanicCostsOnlyItsTask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), twoTasks)
	cmd := exec.Command(exe, "launch")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEWARD_WORKER_FAULT=panic:victim")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("launch passed with a panicking worker:\n%s", out)
	}
	for _, a := range workerReport(t, dir).Attempts {
		if a.Task == "victim" && (a.Status != "errored" || !strings.Contains(a.Reason, "panic: injected fault")) {
			t.Fatalf("victim attempt %+v", a)
		}
		if a.Task == "other" && a.Status != "passed" {
			t.Fatalf("other attempt %+v", a)
		}
	}
}

// max_workers packs tasks into fewer processes without changing what runs.
func TestMaxWorkersPacks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// An agent that runs says so: the workers are up then.
	sig := newAgentSignals(t, dir)
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(twoTasks, "agent: 'sleep 1; echo ok'", "agent: '"+sig.shell("started")+"; sleep 1; echo ok'", 1))
	cmd := exec.Command(exe, "launch", "--max-workers", "1")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sig.next(t, time.Minute)
	b, _ := exec.Command("pgrep", "-P", itoa(cmd.Process.Pid), "-af", "__worker --for").Output()
	seen := strings.TrimSpace(string(b))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("launch: %v\n%s", err, out.String())
	}
	if strings.Count(seen, "\n") != 0 || !strings.Contains(seen, "--for victim,other") {
		t.Fatalf("worker processes with --max-workers 1:\n%s", seen)
	}
	if !strings.Contains(out.String(), "7 passed") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// workerFor is the pid of launch's worker process for task, which the caller
// knows runs (one of its agents said so).
func workerFor(t *testing.T, launch int, task string) int {
	t.Helper()
	b, _ := exec.Command("pgrep", "-P", itoa(launch), "-f", "__worker --for "+task).Output()
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("no worker process for task %s", task)
	}
	return atoi(f[0])
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// A worker that stops answering (SIGSTOP) is found by the heartbeat, killed
// with its agents, and its task's unfinished attempts are infra errors that
// say so (never "timed out": the agents did not); the other task finishes
// and the run ends.
func TestWorkerStoppedIsReaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Each victim agent says it runs once its sleep has started.
	sig := newAgentSignals(t, dir)
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(twoTasks, "agent: 'sleep 1; echo ok'", "agent: 'sleep 30 & "+sig.shell("started")+"; wait; echo ok'", 1))
	cmd := exec.Command(exe, "launch")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEWARD_WORKER_TIMEOUT=2s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	// Stop it once two of its agents run (they are its children's children:
	// a shell and its sleep each).
	sig.next(t, time.Minute)
	sig.next(t, time.Minute)
	victim := workerFor(t, cmd.Process.Pid, "victim")
	agents := descendantsOf(victim)
	if len(agents) < 4 {
		t.Fatalf("agents of the victim's worker: %v", agents)
	}
	if err := syscall.Kill(victim, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(victim, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the run hangs behind a stopped worker:\n%s", out.String())
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 { // infrastructure errors
		t.Fatalf("launch: %v\n%s", err, out.String())
	}
	r := workerReport(t, dir)
	if len(r.Attempts) != 7 {
		t.Fatalf("report has %d attempts", len(r.Attempts))
	}
	for _, a := range r.Attempts {
		switch a.Task {
		case "victim":
			if a.Status != "infra" || !strings.Contains(a.Reason, "worker process for victim unresponsive") || strings.Contains(a.Reason, "timed out") {
				t.Fatalf("victim attempt %+v", a)
			}
		case "other":
			if a.Status != "passed" {
				t.Fatalf("other attempt %+v", a)
			}
		}
	}
	for _, p := range agents {
		if syscall.Kill(p, 0) == nil {
			if st, _ := os.ReadFile(filepath.Join("/proc", itoa(p), "stat")); !strings.Contains(string(st), ") Z ") {
				t.Errorf("agent process %d of the stopped worker still runs", p)
			}
		}
	}
}

// descendantsOf lists the processes below pid.
func descendantsOf(pid int) []int {
	kids := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(st)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 {
			kids[atoi(f[1])] = append(kids[atoi(f[1])], p)
		}
	}
	var out []int
	q := []int{pid}
	for len(q) > 0 {
		for _, c := range kids[q[0]] {
			out = append(out, c)
			q = append(q, c)
		}
		q = q[1:]
	}
	return out
}

// A bad STEWARD_WORKER_TIMEOUT is bad input: exit 2, naming the variable.
func TestWorkerTimeoutBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), twoTasks)
	for _, v := range []string{"soon", "10ms"} {
		cmd := exec.Command(exe, "launch")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "STEWARD_WORKER_TIMEOUT="+v)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "env: STEWARD_WORKER_TIMEOUT: \""+v+"\"") {
			t.Fatalf("STEWARD_WORKER_TIMEOUT=%s: %v\n%s", v, err, out)
		}
	}
}
