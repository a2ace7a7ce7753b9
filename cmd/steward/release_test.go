package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `make release-dry-run` builds the release's image locally (nothing pushed,
// nothing pulled) with the version and commit stamped into the binary:
// `steward version` in the image shows them, and so does the footer of the
// reports it writes.
func TestReleaseDryRun(t *testing.T) {
	t.Parallel()
	needDocker(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make: %v", err)
	}
	image := "steward-release-test:" + randHex(4)
	t.Cleanup(func() {
		prebuilt.Lock() // see prebuilt: no build of the same Dockerfile meanwhile
		defer prebuilt.Unlock()
		_, _ = dockerErr("rmi", "-f", image)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "make", "-C", "../..", "release-dry-run", "VERSION=v9.9.9-test", "COMMIT=0123456789abcdef0123", "IMAGE="+image)
	// No lock here: a build racing another build is safe; only a removal
	// racing a build is not (the cleanup above, and TestMain's).
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("make release-dry-run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "steward v9.9.9-test (0123456789ab)") || !strings.Contains(string(out), "not pushed") {
		t.Fatalf("make release-dry-run:\n%s", out)
	}
	if v := docker(t, "run", "--rm", "--network", "none", image, "version"); v != "steward v9.9.9-test (0123456789ab)" {
		t.Fatalf("steward version in the image: %q", v)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), "tasks:\n  - name: t\n    sandbox: {provider: local}\n    agent: echo ok\n    scorer: {match: exact}\n    samples: [{id: a, input: x, target: ok}]\n")
	docker(t, "run", "--rm", "--network", "none", "-v", dir+":/w", "-w", "/w", image, "launch", "--report-dir", "report", "steward.yaml")
	md := string(mustRead(t, filepath.Join(dir, "report", "report.md")))
	if !regexp.MustCompile(`<sub>steward v9\.9\.9-test \(0123456789ab\)</sub>`).MatchString(md) {
		t.Fatalf("report footer:\n%s", md)
	}
}
