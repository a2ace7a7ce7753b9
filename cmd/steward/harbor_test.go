package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// The dataset author's CI check of docs/harbor.md, on examples/harbor:
// `steward launch --agent oracle` exits 0 (every task passes with its
// reference solution) and the eval set's do-nothing agent exits 1 with
// every attempt failed (none errored) in the JSON report.
func TestHarborExampleOracleAndDoNothing(t *testing.T) {
	t.Parallel()
	needDocker(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/harbor")); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, "dataset", "hello-file", "environment")
	bb, err := os.ReadFile(dockertest.BusyboxPath)
	if err != nil {
		t.Fatalf("static busybox needed (apt-get install -y busybox-static): %v", err)
	}
	if err := os.WriteFile(filepath.Join(env, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	// This suite's own layer chain (see testdata/images/busybox/Dockerfile), removed at the end.
	writeFile(t, filepath.Join(env, "owner"), "cmd/steward harbor example\n")
	df, err := os.ReadFile(filepath.Join(env, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(env, "Dockerfile"), strings.Replace(string(df), "FROM scratch\n", "FROM scratch\nCOPY owner /etc/steward-test-owner\n", 1))
	sum, err := sbdocker.ContextHash(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dockertest.RemoveBuilt(sum) })

	out, code := steward(t, dir, "launch", "--agent", "oracle", "steward.yaml")
	if code != 0 || !strings.Contains(out, "1 passed · 0 failed · 0 errored") {
		t.Fatalf("--agent oracle: exit %d\n%s", code, out)
	}
	cmd := exec.Command(exe, "launch", "--json", "steward.yaml")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("the do-nothing agent: %v, want exit 1\n%s", err, stderr.String())
	}
	var rep struct {
		Attempts []struct {
			Sample, Status string
		} `json:"attempts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if len(rep.Attempts) != 1 || rep.Attempts[0].Status != "failed" {
		t.Fatalf("the do-nothing agent's attempts %+v, want one failed\n%s", rep.Attempts, stderr.String())
	}
}
