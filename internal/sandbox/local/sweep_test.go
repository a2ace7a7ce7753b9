package local

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/runlock"
)

// makeRunDir is what a worker's first sandbox does to the run's directory.
func makeRunDir(t *testing.T, tmp, runID, lock string) string {
	t.Helper()
	p, dir, err := ForRun(tmp, runID, lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ensureRunDir(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startGroup starts `sleep 60` as a process group leader with env, noted in
// the run directory's pgids/ as a sandbox command would be (with its start time).
func startGroup(t *testing.T, dir string, env []string, start string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 60")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "pgids", strconv.Itoa(cmd.Process.Pid)), []byte(start), 0o644); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func exited(cmd *exec.Cmd) bool {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func TestSweepStopsAndRemovesDeadRunsOnly(t *testing.T) {
	tmp := t.TempDir()
	deadDir := makeRunDir(t, tmp, "dead", "/nonexistent/dead.lock")
	liveDir := makeRunDir(t, tmp, "live", "/held/live.lock")
	// A process group the dead run left running (it carries the run's marker).
	cmd := startGroup(t, deadDir, append(os.Environ(), "STEWARD_RUN_ID=dead"), "")
	judge := func(lock string, _ runlock.Identity) (bool, error) { return lock != "/held/live.lock", nil }
	if n := Sweep(tmp, judge, &bytes.Buffer{}); n != 1 {
		t.Fatalf("swept %d run dirs, want 1", n)
	}
	if !exited(cmd) {
		t.Fatal("the dead run's process group still runs")
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatal("the dead run's directory is still there")
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Fatal("the live run's directory was removed")
	}
}

// A run whose owner lived in another mount namespace (a container sharing
// the host's hostname and network) has a lock path that does not exist here:
// nothing proves it dead, so its sandboxes and processes are left alone and
// the sweep says why.
func TestSweepLeavesRunOfAnotherMountNamespace(t *testing.T) {
	tmp := t.TempDir()
	owner := runlock.Here()
	owner.MntNS = "mnt:[1]" // not this process's
	dir := filepath.Join(tmp, runDirPrefix+"elsewhere")
	if err := os.MkdirAll(filepath.Join(dir, "pgids"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner.Encode()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lock"), []byte("/in/the/container/.steward/runs/x.lock"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := startGroup(t, dir, append(os.Environ(), "STEWARD_RUN_ID=elsewhere"), "")
	var out bytes.Buffer
	here := runlock.Here()
	n := Sweep(tmp, func(lock string, o runlock.Identity) (bool, error) { return runlock.Judge(lock, o, here) }, &out)
	if n != 0 {
		t.Fatalf("swept %d run dirs of a run that cannot be proven dead", n)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the other namespace's process was killed: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal("the other namespace's run directory was removed")
	}
	if s := out.String(); !strings.Contains(s, "run elsewhere alone") || !strings.Contains(s, "mount namespace") {
		t.Fatalf("the sweep does not say why it left the run alone:\n%s", s)
	}
}

// A dead run's pgids/ names a process group whose PID now belongs to a
// stranger (PIDs wrap; /tmp is world-writable): the stranger is not killed.
func TestSweepSparesReusedPID(t *testing.T) {
	tmp := t.TempDir()
	dir := makeRunDir(t, tmp, "gone", "/nonexistent/gone.lock")
	// A stranger without the run's marker …
	stranger := startGroup(t, dir, []string{"PATH=/usr/bin:/bin"}, "")
	// … and one with the marker but another start time than the note says.
	reused := startGroup(t, dir, append(os.Environ(), "STEWARD_RUN_ID=gone"), "1")
	var out bytes.Buffer
	Sweep(tmp, func(string, runlock.Identity) (bool, error) { return true, nil }, &out)
	for name, c := range map[string]*exec.Cmd{"stranger": stranger, "reused": reused} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("the %s process group was killed: %v", name, err)
		}
	}
	if !strings.Contains(out.String(), "spared process group") {
		t.Fatalf("the sweep does not say what it spared:\n%s", out.String())
	}
}
