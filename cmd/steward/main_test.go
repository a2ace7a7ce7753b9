package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

var exe string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "steward-main-")
	if err != nil {
		panic(err)
	}
	exe = filepath.Join(dir, "steward")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := kubetest.Main(m) // stops the kubernetes test cluster if a test started it
	removeScopedImages()
	removeActionImage()
	os.RemoveAll(dir)
	os.Exit(code)
}

func steward(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func writeFile(t testing.TB, p, body string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestQuickstartAndExitCodes(t *testing.T) {
	t.Parallel()
	out, code := steward(t, "../..", "launch", "--record", t.TempDir(), "examples/quickstart/steward.yaml")
	if code != 0 || !strings.Contains(out, "13 passed") {
		t.Fatalf("quickstart exit %d:\n%s", code, out)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), "tasks:\n  - name: x\n    agnt: echo\n")
	out, code = steward(t, dir, "launch")
	if code != 2 || !strings.Contains(out, "steward.yaml:3") || !strings.Contains(out, `did you mean "agent"`) {
		t.Fatalf("bad input exit %d:\n%s", code, out)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: x
    sandbox: {provider: local}
    agent: echo no
    scorer: {match: exact}
    samples: [{id: a, input: "", target: yes}]
`)
	if out, code = steward(t, dir, "launch"); code != 1 {
		t.Fatalf("failed run exit %d:\n%s", code, out)
	}
	if out, code = steward(t, dir, "launch", "--no-such-flag"); code != 2 {
		t.Fatalf("bad flag exit %d:\n%s", code, out)
	}
}

// A SIGKILLed launch leaves a record the next command opens with every
// published attempt intact, and a re-run completes the set carrying them.
func TestKilledLaunchLosesNothing(t *testing.T) {
	t.Parallel()
	for trial := 0; trial < 3; trial++ {
		dir := t.TempDir()
		// Each agent says it started; the kill comes after the k-th, mid-run.
		sig := newAgentSignals(t, dir)
		var samples []string
		for i := 0; i < 40; i++ {
			samples = append(samples, fmt.Sprintf(`      - {id: s%02d, input: "", target: ok}`, i))
		}
		writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: slow
    sandbox: {provider: local}
    exclusive: false
    max_samples: 4
    agent: '`+sig.shell("started")+`; sleep 0.1; echo ok'
    scorer: {match: exact}
    samples:
`+strings.Join(samples, "\n")+"\n")
		cmd := exec.Command(exe, "launch")
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for k := 1 + trial*12; k > 0; k-- { // 1, 13, 25 of 40 started
			sig.next(t, time.Minute)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		ctx := context.Background()
		db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
		if err != nil {
			t.Fatalf("trial %d: reopen: %v", trial, err)
		}
		runs, _ := db.Runs(ctx)
		if len(runs) != 1 {
			t.Fatalf("trial %d: runs %+v", trial, runs)
		}
		as, err := db.Attempts(ctx, runs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		published := 0
		for _, a := range as {
			if a.Status != "passed" || a.Fingerprint == "" || a.Finished.IsZero() {
				t.Fatalf("trial %d: half-written attempt %+v", trial, a)
			}
			published++
		}
		db.Close()
		t.Logf("trial %d: %d of 40 published before the kill", trial, published)
		out, code := steward(t, dir, "launch")
		if code != 0 {
			t.Fatalf("trial %d: re-run exit %d\n%s", trial, code, out)
		}
		if !strings.Contains(out, fmt.Sprintf("40 total · %d reused", published)) {
			t.Fatalf("trial %d: %d published before the kill, re-run says:\n%s", trial, published, out)
		}
	}
}

// Invocations sharing a lease key never overlap their setup→teardown
// windows; a SIGSTOPped owner keeps the lease; recover needs the token.
func TestLeaseAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	log := filepath.Join(dir, "windows.log")
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: shared
    sandbox: {provider: local}
    shared_state: {key: cohort-a}
    host:
      setup: 'echo "start $(date +%s%N)" >> `+log+`'
      teardown: 'echo "end $(date +%s%N)" >> `+log+`'
    agent: 'sleep 0.2; echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}]
`)
	const n = 3
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		c := exec.Command(exe, "launch", "--record", rec, "--title", strconv.Itoa(i))
		c.Dir = dir
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("launch: %v\n%s", err, c.Stdout)
		}
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("windows log:\n%s", b)
	}
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "start") || !strings.HasPrefix(lines[i+1], "end") {
			t.Fatalf("setup→teardown windows overlap:\n%s", b)
		}
	}

	// A stopped owner keeps the lease; a waiter waits and says for what.
	// Its agent runs inside the lease and says so.
	sig := newAgentSignals(t, dir)
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(string(mustRead(t, filepath.Join(dir, "steward.yaml"))), "sleep 0.2", sig.shell("held")+"; sleep 3", 1))
	owner := exec.Command(exe, "launch", "--record", rec)
	owner.Dir = dir
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	sig.next(t, time.Minute)
	_ = owner.Process.Signal(syscall.SIGSTOP)
	waiter := exec.Command(exe, "launch", "--record", rec)
	waiter.Dir = dir
	wout := newOutputWatch()
	waiter.Stdout, waiter.Stderr = wout, wout
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waiterDone, waiterExited := make(chan error, 1), make(chan struct{})
	go func() { waiterDone <- waiter.Wait(); close(waiterExited) }()
	// The waiter says it waits (it found the lease held); it must not end.
	wout.waitContains(t, "waits for lease", waiterExited, time.Minute)
	select {
	case <-waiterExited:
		t.Fatalf("waiter finished while the owner was stopped:\n%s", wout.String())
	default:
	}
	// Kill the owner: the lease stays held (no takeover).
	_ = owner.Process.Signal(syscall.SIGKILL)
	_ = owner.Wait()
	// A window for a wrong takeover, which would have to happen on one of
	// the waiter's retries (every 250 ms): the behaviour under test is that
	// nothing happens, so there is no event to wait for.
	time.Sleep(time.Second)
	out, _ := steward(t, dir, "lease", "inspect", "cohort-a", "--record", rec)
	m := regexp.MustCompile(`token:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("lease freed after the owner died:\n%s", out)
	}
	token := m[1]
	if !strings.Contains(wout.String(), "waits for lease") || strings.Contains(wout.String(), token) {
		t.Fatalf("waiter output (must say what it waits for, never show the token):\n%s", wout.String())
	}
	if out, code := steward(t, dir, "lease", "recover", "cohort-a", "--record", rec, "--token", "wrong", "--owner-gone", "--state-quiescent"); code == 0 {
		t.Fatalf("wrong token recovered:\n%s", out)
	}
	if out, code := steward(t, dir, "lease", "recover", "cohort-a", "--record", rec, "--token", token, "--owner-gone"); code != 2 {
		t.Fatalf("recover without both confirmations: %d\n%s", code, out)
	}
	if out, code := steward(t, dir, "lease", "recover", "cohort-a", "--record", rec, "--token", token, "--owner-gone", "--state-quiescent"); code != 0 {
		t.Fatalf("recover: %d\n%s", code, out)
	}
	if err := <-waiterDone; err != nil {
		t.Fatalf("waiter after recover: %v\n%s", err, wout.String())
	}
	// The token appears in no report.
	rep, _ := steward(t, dir, "report", "--record", rec, "--format", "json")
	if strings.Contains(rep, token) {
		t.Fatal("token in the report")
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
