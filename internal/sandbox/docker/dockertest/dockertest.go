// Package dockertest holds helpers for tests that use the real Docker engine:
// the CI rule for a missing daemon and a busybox image built FROM scratch.
package dockertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/steward-evals/steward/internal/testlock"
)

// Client returns a client for the real daemon. When no daemon answers it
// fails the test under CI=true and skips it otherwise. The test holds the
// Docker test lock shared until it ends (internal/testlock): test packages
// run side by side, and the few tests that disturb the daemon on purpose
// (testlock.Exclusive) run alone.
func Client(t testing.TB) *client.Client {
	t.Helper()
	testlock.Shared(t, testlock.Docker)
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker daemon required under CI=true: %v", err)
		}
		t.Skipf("no docker daemon: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// BusyboxPath is where Debian's busybox-static installs its binary.
const BusyboxPath = "/bin/busybox"

// BusyboxContext returns a fresh build directory holding
// testdata/images/busybox/Dockerfile and the host's static busybox. owner is
// written into the context, and the Dockerfile copies it first, so that each
// test suite gets its own image (its content hash differs) on a layer chain of
// its own, and can remove it with its parents without deleting a cached layer
// that another suite's concurrent build is about to use.
// A test that builds images uses the daemon: it holds the Docker test lock
// shared, as Client does.
func BusyboxContext(t testing.TB, owner string) string {
	t.Helper()
	testlock.Shared(t, testlock.Docker)
	bb, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatalf("static busybox needed for test images (apt-get install -y busybox-static): %v", err)
	}
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "images", "busybox", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// CLI runs the docker CLI (bounded to 3 minutes, the legacy builder as the
// engine here has it) and returns its output, trimmed.
func CLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "docker", args...)
	c.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	out, err := c.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// RemoveBuilt removes every image Steward built from a build directory
// whose context hash is sum: the one its tag names and any that lost the
// tag to a concurrent build of the same directory. All carry the hash as a
// label.
func RemoveBuilt(sum string) {
	if ids, _ := CLI("images", "-q", "--filter", "label=dev.steward.context-hash="+sum); ids != "" {
		_, _ = CLI(append([]string{"rmi"}, strings.Fields(ids)...)...)
	}
}

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate repository root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}
