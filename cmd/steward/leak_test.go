package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/docker/docker/api/types/container"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

func leakEvalSet(t *testing.T, agent string) string {
	t.Helper()
	dir := t.TempDir()
	// Only this test's images are removed: other packages' tests run at
	// the same time with images of their own.
	img := builtBusybox(t, "cmd-steward-leak")
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: box
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    agent: '`+agent+`'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}, {id: c, input: "", target: ok}]
`)
	return dir
}

// Leak test (D4): SIGKILL a running launch with live sandboxes (supervisor
// and workers at once); `steward sweep` removes every container and network
// it left, while a second run alive at the same time loses nothing.
func TestKilledDockerRunIsSwept(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	ctx := context.Background()
	victim := leakEvalSet(t, "sleep 60; echo ok")
	survivor := leakEvalSet(t, "sleep 8; echo ok")

	live := exec.Command(exe, "launch", "--max-concurrency", "3")
	live.Dir = survivor
	var liveOut bytes.Buffer
	live.Stdout, live.Stderr = &liveOut, &liveOut
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}

	// The daemon's own event stream says when a sandbox of the doomed run starts.
	// (Four minutes bound it: on a slow machine busy with other packages'
	// tests the build and network alone can take most of one.)
	evCtx, evCancel := context.WithTimeout(ctx, 4*time.Minute)
	defer evCancel()
	starts, evErrs := cli.Events(evCtx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(events.ActionStart)),
		filters.Arg("label", sandbox.LabelTask+"=box"))})

	doomed := exec.Command(exe, "launch", "--max-concurrency", "3")
	doomed.Dir = victim
	doomed.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var doomedOut bytes.Buffer
	doomed.Stdout, doomed.Stderr = &doomedOut, &doomedOut
	if err := doomed.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the doomed run has a live sandbox.
	var runID string
	for runID == "" {
		select {
		case m := <-starts:
			if lock := m.Actor.Attributes["dev.steward.lock"]; strings.Contains(lock, strings.TrimPrefix(victim, "/")) || strings.HasPrefix(lock, victim) {
				runID = m.Actor.Attributes[sandbox.LabelRun]
			}
			continue
		case err := <-evErrs:
			t.Logf("docker events: %v", err)
		}
		break
	}
	evCancel()
	if runID == "" {
		_ = syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the doomed run never had a live sandbox:\n%s", doomedOut.String())
	}
	// Kill the supervisor and its workers at once: nobody cleans up.
	_ = syscall.Kill(-doomed.Process.Pid, syscall.SIGKILL)
	_ = doomed.Wait()
	byRun := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))
	left, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: byRun})
	if len(left) == 0 {
		// Only a concurrent sweeper (another test package's launch) can have
		// removed them already; what must hold below still holds.
		t.Log("the kill's leftovers were already swept by a concurrent sweeper")
	}
	out, code := steward(t, victim, "sweep")
	if code != 0 {
		t.Fatalf("sweep exit %d:\n%s", code, out)
	}
	left, _ = cli.ContainerList(ctx, container.ListOptions{All: true, Filters: byRun})
	nets, _ := cli.NetworkList(ctx, network.ListOptions{Filters: byRun})
	if len(left) > 0 || len(nets) > 0 {
		t.Fatalf("after sweep: %d containers, %d networks of the dead run\n%s", len(left), len(nets), out)
	}
	// The live run lost nothing.
	if err := live.Wait(); err != nil {
		t.Fatalf("live run: %v\n%s", err, liveOut.String())
	}
	if !strings.Contains(liveOut.String(), "3 passed") {
		t.Fatalf("live run:\n%s", liveOut.String())
	}
}
