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
	harborBusybox(t, filepath.Join(dir, "dataset", "hello-file", "environment"), "", "cmd/steward harbor example")

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

// harborBusybox readies a Harbor environment directory copied from the
// repository for a build here: the static busybox beside its Dockerfile
// (dockerfile; "" for Dockerfile), and this test's own layer chain (a file
// naming owner copied first, see testdata/images/busybox/Dockerfile),
// whose images are removed when the test ends.
func harborBusybox(t *testing.T, env, dockerfile, owner string) {
	t.Helper()
	bb, err := os.ReadFile(dockertest.BusyboxPath)
	if err != nil {
		t.Fatalf("static busybox needed (apt-get install -y busybox-static): %v", err)
	}
	if err := os.WriteFile(filepath.Join(env, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(env, "owner"), owner+"\n")
	name := dockerfile
	if name == "" {
		name = "Dockerfile"
	}
	df, err := os.ReadFile(filepath.Join(env, name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(env, name), strings.Replace(string(df), "FROM scratch\n", "FROM scratch\nCOPY owner /etc/steward-test-owner\n", 1))
	sum, err := sbdocker.BuildSum(env, dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dockertest.RemoveBuilt(sum) })
}
