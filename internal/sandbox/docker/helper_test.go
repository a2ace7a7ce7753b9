package docker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

// helperMain is a "run" in a subprocess: it holds a run lock, makes a few
// sandboxes (one with a network of its own), says READY and waits to be killed.
func helperMain() int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Println("ERR", err); return 1 }
	lock, err := runlock.Acquire(os.Getenv("HELPER_LOCK"))
	if err != nil {
		return fail(err)
	}
	defer lock.Release()
	p, err := New(ctx, Options{RunID: os.Getenv("HELPER_RUN"), LockPath: lock.Path(), Labels: map[string]string{"dev.steward.test": "true"}, Liveness: runlock.Liveness{}})
	if err != nil {
		return fail(err)
	}
	s := sandbox.Spec{Task: "leaky", Image: os.Getenv("HELPER_IMAGE"), Memory: 64 << 20}
	iso := s
	iso.Network = NetworkIsolated
	if err := p.Prepare(ctx, []*sandbox.Spec{&s, &iso}); err != nil {
		return fail(err)
	}
	for _, sp := range []sandbox.Spec{s, s, iso} {
		sb, err := p.Create(ctx, sp)
		if err != nil {
			return fail(err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "sleep 1000 &"}); err != nil {
			return fail(err)
		}
	}
	fmt.Println("READY")
	time.Sleep(10 * time.Minute) // the behaviour under test: a live run that the test SIGKILLs
	return 0
}

func TestSweepAfterSIGKILL(t *testing.T) {
	t.Parallel()
	image := testImage(t)
	ctx := context.Background()

	// A live run in this process, alive throughout.
	live := newRun(t, nil)
	ls := spec(t, "live")
	prepare(t, live, &ls)
	liveSB := mustCreate(t, live, ls)

	// A run in a subprocess, killed with SIGKILL while its sandboxes are up.
	deadRun := "t" + randomID(5)
	lockPath := filepath.Join(t.TempDir(), "dead.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STEWARD_DOCKER_HELPER=leaky", "HELPER_LOCK="+lockPath, "HELPER_RUN="+deadRun, "HELPER_IMAGE="+image)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); removeRun(t, live.P.cli, deadRun) })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "READY" {
		t.Fatalf("helper said %q", line)
	}
	c, n := countRun(t, live.P.cli, deadRun)
	if c != 3 || n != 2 || !runlock.Alive(lockPath) {
		t.Fatalf("helper run has %d containers, %d networks, lock alive %v", c, n, runlock.Alive(lockPath))
	}
	// While it lives, Sweep leaves it alone.
	if _, err := live.P.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if c2, n2 := countRun(t, live.P.cli, deadRun); c2 != c || n2 != n {
		t.Fatalf("sweep touched a live run: %d/%d containers, %d/%d networks", c2, c, n2, n)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if runlock.Alive(lockPath) {
		t.Fatal("dead run's lock still alive")
	}
	var log strings.Builder
	res, err := live.P.Sweep(ctx, &log)
	if err != nil {
		t.Fatal(err)
	}
	if c, n := countRun(t, live.P.cli, deadRun); c != 0 || n != 0 {
		t.Fatalf("after sweep the dead run still has %d containers, %d networks", c, n)
	}
	// Another sweeper (a launch in a concurrently running test package) may
	// have removed some of the dead run's resources first; what must hold is
	// that none is left (checked above) and that this sweep says what it removed.
	if res.Containers+res.Networks > 0 && !strings.Contains(log.String(), deadRun) {
		t.Fatalf("sweep result %+v log %q", res, log.String())
	}
	// The live run lost nothing: its sandbox and network are there and work.
	if c, n := countRun(t, live.P.cli, live.ID); c != 1 || n != 1 {
		t.Fatalf("live run now has %d containers, %d networks", c, n)
	}
	if r := mustExec(t, liveSB, "echo alive"); string(r.Stdout) != "alive\n" {
		t.Fatalf("live sandbox: %+v", r)
	}
}

// TestSiblingSandboxes runs "Steward" in a container with the host's socket
// mounted (as the GitHub container action does): its sandboxes are siblings and
// must reach the gateway it serves inside its own container, through the relay.
func TestSiblingSandboxes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a static helper")
	}
	image := testImage(t)
	r := newRun(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "steward"), "./testdata/sibling")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, out)
	}
	// The same context the relay image is built from, so both share one image.
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY steward /steward\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := r.P.buildImage(ctx, dir, "sibling", "")
	if err != nil {
		t.Fatal(err)
	}
	rememberImage(ref)
	inner := "t" + randomID(5)
	t.Cleanup(func() { removeRun(t, r.P.cli, inner) })
	resp, err := r.P.cli.ContainerCreate(ctx, &container.Config{
		Image:  ref,
		Cmd:    []string{"/steward", "sibling", image},
		Env:    []string{"RUN_ID=" + inner},
		Labels: r.P.labels("sibling", "test-steward", nil),
	}, &container.HostConfig{
		Binds: []string{"/var/run/docker.sock:/var/run/docker.sock"}, // the runner's doing, not Steward's
	}, nil, nil, dockerName(r.ID, "steward"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.P.removeContainer(context.Background(), resp.ID) })
	if err := r.P.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	okC, errC := r.P.cli.ContainerWait(wctx, resp.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case w := <-okC:
		code = w.StatusCode
	case err := <-errC:
		t.Fatalf("wait for the steward container: %v", err)
	}
	logs := r.P.containerLogs(ctx, resp.ID)
	if code != 0 || !strings.Contains(logs, "SIBLING OK") {
		t.Fatalf("steward container exited %d:\n%s", code, logs)
	}
	t.Logf("steward container:\n%s", logs)
	if c, n := countRun(t, r.P.cli, inner); c != 0 || n != 0 {
		t.Fatalf("the in-container run left %d containers, %d networks", c, n)
	}
}

// TestSweepScopes: a lock path is judged only in the sweeper's own scope; a run
// that lived in another container is dead once that container stops.
func TestSweepScopes(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	ctx := context.Background()
	cli := r.P.cli
	s := spec(t, "scope")
	prepare(t, r, &s)
	// "Another Steward's container", still running.
	other := mustCreate(t, r, s)
	mkNet := func(name, scope string) string {
		labels := map[string]string{
			sandbox.LabelManaged: "true", sandbox.LabelRun: r.ID, LabelLock: "/nonexistent/" + name + ".lock",
			LabelLockScope: scope, "dev.steward.test": "true", LabelOwner: runlock.Here().Encode(),
		}
		resp, err := cli.NetworkCreate(ctx, dockerName(r.ID, name), network.CreateOptions{Driver: "bridge", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), resp.ID) })
		return resp.ID
	}
	exists := func(id string) bool {
		_, err := cli.NetworkInspect(ctx, id, network.InspectOptions{})
		return err == nil
	}
	inOther := mkNet("in-other", "container:"+other.ID())
	otherHost := mkNet("other-host", "host:elsewhere")
	mine := mkNet("mine", r.P.scope)
	if _, err := r.P.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if !exists(inOther) || !exists(otherHost) {
		t.Fatal("sweep removed resources whose lock it cannot judge")
	}
	if exists(mine) {
		t.Fatal("sweep kept a dead run's network in its own scope")
	}
	// The other container goes away: its run is dead.
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.P.Sweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if exists(inOther) {
		t.Fatal("sweep kept the network of a run whose container is gone")
	}
	if !exists(otherHost) {
		t.Fatal("sweep removed another host's resource")
	}
}
