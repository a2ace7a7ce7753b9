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

// TestSweepByAnotherUserKeepsALiveRun: two users of one Docker daemon. The
// first (root, this test) has a live run whose lock sits in its own 0700
// directory and whose network is on the daemon; the second (uid 65534 in
// the socket's group) runs `steward sweep`. Its open of the lock gets EACCES
// from the kernel: it cannot tell a live run from a dead one, so it keeps the
// network and says why. A run of the first user that is provably dead (its
// lock gone) is still removed by the first user's own sweep.
func TestSweepByAnotherUserKeepsALiveRun(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to run the sweep as another user")
	}
	sock := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		sock = h
	} else if os.Getenv("DOCKER_HOST") != "" {
		t.Skip("the daemon is not on a unix socket: its group cannot be given to another user")
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	sockGID := fi.Sys().(*syscall.Stat_t).Gid
	ctx := context.Background()
	host, _ := os.Hostname()
	private := t.TempDir() // 0700, the first user's
	lock, err := runlock.Acquire(filepath.Join(private, "run.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	suffix := strconv.Itoa(os.Getpid())
	mk := func(run, lockPath string) string {
		r, err := cli.NetworkCreate(ctx, "steward-test-"+run, network.CreateOptions{Labels: map[string]string{
			sandbox.LabelManaged: "true", sandbox.LabelRun: run, sbdocker.LabelLock: lockPath,
			sbdocker.LabelLockScope: "host:" + host, sbdocker.LabelOwner: runlock.Here().Encode(),
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), r.ID) })
		return r.ID
	}
	live := mk("live-"+suffix, lock.Path())

	// The second user's steward: a copy it may execute, run from a
	// directory it may enter.
	pub, err := os.MkdirTemp("", "steward-user2-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pub)
	if err := os.Chmod(pub, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "steward")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "sweep")
	cmd.Dir = pub
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + pub, "TMPDIR=" + pub, "STEWARD_IN_CONTAINER=0"}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{sockGID}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sweep as uid 65534: %v\n%s", err, out)
	}
	if _, err := cli.NetworkInspect(ctx, live, network.InspectOptions{}); err != nil {
		t.Fatalf("another user's sweep removed a live run's network (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "run live-"+suffix+" alone") || !strings.Contains(string(out), "permission denied") {
		t.Fatalf("the sweep does not say why it left the run alone:\n%s", out)
	}

	// The control: once the first user's run ends, its own sweep removes
	// what it left.
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	out2 := sweepIn(t, t.TempDir())
	if _, err := cli.NetworkInspect(ctx, live, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the dead run's network is still there (%v):\n%s", err, out2)
	}
}
