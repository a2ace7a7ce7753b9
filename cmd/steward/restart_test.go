package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/faultproxy"
)

// A daemon restart as the run sees it: connections to the daemon drop
// (creates and an exec start, as while dockerd goes down and comes back).
// The attempts that hit it are infrastructure errors, retried within
// `retries`; the run completes, nothing hangs, nothing is left.
func TestFaultDockerDaemonRestart(t *testing.T) {
	p, host, img := faultDocker(t, "cmd/steward fault tests (restart)")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: boxed
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    timeout: 20s
    retries: 3
    max_samples: 1
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: a, input: ok, target: ok}
      - {id: b, input: ok, target: ok}
      - {id: c, input: ok, target: ok}
`)
	env := []string{"DOCKER_HOST=" + host}
	// Prepare the image first, so the faults land on running attempts.
	if out, code := faultLaunch(t, dir, env, 5*time.Minute, "launch", "--dry"); code != 0 {
		t.Fatalf("dry exit %d:\n%s", code, out)
	}
	if err := p.SetRules(
		faultproxy.Rule{Method: "POST", Path: `^/containers/create$`, Action: faultproxy.Drop, Times: 2},
		faultproxy.Rule{Method: "POST", Path: `^/exec/[^/]+/start$`, Action: faultproxy.Drop, Times: 1},
	); err != nil {
		t.Fatal(err)
	}
	out, code := faultLaunch(t, dir, env, 5*time.Minute, "launch")
	hits := p.Hits()
	if hits[0] != 2 || hits[1] != 1 {
		t.Fatalf("the dropped connections were not all hit: %v\n%s", hits, out)
	}
	if code != 0 || !strings.Contains(out, "3 total · 0 reused · 0 running · 0 queued · 3 passed") {
		t.Fatalf("exit %d: the run must complete with every attempt passed after retries:\n%s", code, out)
	}
	if n := strings.Count(out, "infrastructure error, retrying"); n < 2 {
		t.Fatalf("%d retry lines, want the dropped calls retried as infra errors:\n%s", n, out)
	}
	rep := faultReadReport(t, dir, env)
	faultNoContainers(t, rep.RunIDs)
}
