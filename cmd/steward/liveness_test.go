package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// localRunDir makes what a run's local sandboxes leave in tmp: the run
// directory with its lock mark and one noted process group, led by a live
// process started with env.
func localRunDir(t *testing.T, tmp, runID string, owner runlock.Identity, lock string, env []string) *exec.Cmd {
	t.Helper()
	dir := filepath.Join(tmp, "steward-run-"+runID)
	if err := os.MkdirAll(filepath.Join(dir, "pgids"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "owner"), owner.Encode())
	writeFile(t, filepath.Join(dir, "lock"), lock)
	cmd := exec.Command("/bin/sh", "-c", "sleep 120")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	writeFile(t, filepath.Join(dir, "pgids", strconv.Itoa(cmd.Process.Pid)), "")
	return cmd
}

func sweepIn(t *testing.T, tmp string) string {
	t.Helper()
	cmd := exec.Command(exe, "sweep")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, out)
	}
	return string(out)
}

// A run started in another mount namespace (a container sharing the host's
// hostname and network) records a lock path that does not exist here: the
// sweep cannot prove it dead, so it leaves its sandboxes and processes alone
// and says why; a dead run's process group whose PID now belongs to a
// stranger (no run marker) is not killed either.
func TestSweepNeverGuessesLiveness(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	other := runlock.Here()
	other.MntNS, other.Container = "mnt:[4026530000]", strings.Repeat("c", 64)
	live := localRunDir(t, tmp, "elsewhere", other, "/work/.steward/runs/elsewhere.lock", append(os.Environ(), "STEWARD_RUN_ID=elsewhere"))
	stranger := localRunDir(t, tmp, "gone", runlock.Here(), filepath.Join(t.TempDir(), "gone.lock"), []string{"PATH=/usr/bin:/bin"})
	out := sweepIn(t, tmp)
	if err := live.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the other namespace's agent was killed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "steward-run-elsewhere")); err != nil {
		t.Fatalf("the other namespace's sandboxes were removed:\n%s", out)
	}
	if !strings.Contains(out, "run elsewhere alone") || !strings.Contains(out, "container cccccccccccc") {
		t.Fatalf("the sweep does not say why it left run elsewhere alone:\n%s", out)
	}
	if err := stranger.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a stranger holding a dead run's old PID was killed:\n%s", out)
	}
	if !strings.Contains(out, "spared process group "+strconv.Itoa(stranger.Process.Pid)) || !strings.Contains(out, "removed local sandboxes of dead run gone") {
		t.Fatalf("sweep output:\n%s", out)
	}
}

// The same for docker: a network labelled by a run of another mount
// namespace, with this host's scope, is kept (and the sweep says why); one
// of a provably dead run of this namespace is removed.
func TestSweepDockerNeverGuessesLiveness(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	ctx := context.Background()
	host, _ := os.Hostname()
	other := runlock.Here()
	other.MntNS = "mnt:[4026530000]"
	mk := func(run string, owner runlock.Identity, lock string) string {
		r, err := cli.NetworkCreate(ctx, "steward-test-"+run, network.CreateOptions{Labels: map[string]string{
			sandbox.LabelManaged: "true", sandbox.LabelRun: run, sbdocker.LabelLock: lock,
			sbdocker.LabelLockScope: "host:" + host, sbdocker.LabelOwner: owner.Encode(),
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), r.ID) })
		return r.ID
	}
	suffix := strconv.Itoa(os.Getpid())
	kept := mk("elsewhere-"+suffix, other, "/work/.steward/runs/x.lock")
	gone := mk("gone-"+suffix, runlock.Here(), filepath.Join(t.TempDir(), "gone.lock"))
	out := sweepIn(t, t.TempDir())
	if _, err := cli.NetworkInspect(ctx, kept, network.InspectOptions{}); err != nil {
		t.Fatalf("the other namespace's network was removed (%v):\n%s", err, out)
	}
	if !strings.Contains(out, "run elsewhere-"+suffix+" alone") || !strings.Contains(out, "mount namespace") {
		t.Fatalf("the sweep does not say why it left the run alone:\n%s", out)
	}
	if _, err := cli.NetworkInspect(ctx, gone, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the dead run's network is still there (%v):\n%s", err, out)
	}
}
