package faultproxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// proxied starts a proxy in front of the real daemon and returns it with a
// client that talks through it.
func proxied(t *testing.T) (*Proxy, *client.Client) {
	t.Helper()
	dockertest.Client(t) // the CI rule: fail under CI=true without a daemon
	p, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	host, err := p.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if !strings.HasPrefix(host, "tcp://127.0.0.1:") {
		t.Fatalf("DOCKER_HOST %q", host)
	}
	c, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// proxiedProvider is a docker provider talking through a fresh proxy, its
// task's busybox image prepared, and the real daemon's client with the
// listing of the run's containers; everything the run made is removed at
// the end, whatever the provider left.
func proxiedProvider(t *testing.T, prefix string) (*Proxy, *docker.Provider, *sandbox.Spec, *client.Client, container.ListOptions) {
	t.Helper()
	p, c := proxied(t)
	ctx := context.Background()
	runID := strings.ReplaceAll(prefix+time.Now().Format("150405.000"), ".", "")
	prov, err := docker.New(ctx, docker.Options{RunID: runID, Client: c, Liveness: runlock.Liveness{}})
	if err != nil {
		t.Fatal(err)
	}
	spec := &sandbox.Spec{RunID: runID, Task: "fp", Build: dockertest.BusyboxContext(t, "internal/faultproxy tests"), Memory: 64 << 20}
	if err := prov.Prepare(ctx, []*sandbox.Spec{spec}); err != nil {
		t.Fatal(err)
	}
	real := dockertest.Client(t)
	runs := container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))}
	t.Cleanup(func() {
		_ = prov.Finalize(context.Background())
		left, _ := real.ContainerList(context.Background(), runs)
		for _, l := range left {
			_ = real.ContainerRemove(context.Background(), l.ID, container.RemoveOptions{Force: true})
		}
		if spec.Image != "" {
			_, _ = real.ImageRemove(context.Background(), spec.Image, image.RemoveOptions{PruneChildren: true})
		}
	})
	return p, prov, spec, real, runs
}

func TestRefuseDropHang(t *testing.T) {
	p, c := proxied(t)
	ctx := context.Background()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	if err := p.SetRules(
		Rule{Method: "POST", Path: `^/containers/create$`, Action: Refuse, Status: 500, Message: "disk on fire", Times: 1},
		Rule{Path: `^/info$`, Action: Drop},
		Rule{Path: `^/version$`, Action: Hang},
	); err != nil {
		t.Fatal(err)
	}
	_, err := c.ContainerCreate(ctx, &container.Config{Image: "steward-no-such-image:none"}, nil, nil, nil, "")
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("refused create: %v", err)
	}
	// Times: 1 — the second create reaches the daemon (which says the image is missing).
	_, err = c.ContainerCreate(ctx, &container.Config{Image: "steward-no-such-image:none"}, nil, nil, nil, "")
	if err == nil || strings.Contains(err.Error(), "disk on fire") || !strings.Contains(strings.ToLower(err.Error()), "no such image") {
		t.Fatalf("second create should reach the daemon: %v", err)
	}
	if _, err := c.Info(ctx); err == nil {
		t.Fatal("dropped /info answered")
	}
	hctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c.ServerVersion(hctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung /version: %v", err)
	}
	if got := p.Hits(); got[0] != 1 || got[1] < 1 || got[2] != 1 {
		t.Fatalf("hits %v", got)
	}
	// Containers listing is unaffected.
	if _, err := c.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "faultproxy-test"))}); err != nil {
		t.Fatalf("pass-through list: %v", err)
	}
	reqs := strings.Join(p.Requests(), "\n")
	for _, want := range []string{"POST /containers/create refuse", "POST /containers/create pass", "GET /info drop", "GET /version hang", "GET /containers/json pass"} {
		if !strings.Contains(reqs, want) {
			t.Fatalf("request log lacks %q:\n%s", want, reqs)
		}
	}
	if err := p.SetRules(Rule{Path: "("}); err == nil {
		t.Fatal("bad regexp accepted")
	}
	if _, err := New("http://x"); err == nil {
		t.Fatal("bad upstream accepted")
	}
}

// Hijacked exec streams pass through intact (stdin, stdout, stderr, exit
// code); a stalled exec start is bounded by the command's timeout and is infra; a refused
// create is an infrastructure error for the provider.
func TestDockerProviderThroughProxy(t *testing.T) {
	p, prov, spec, _, _ := proxiedProvider(t, "faultproxy")
	ctx := context.Background()
	sb, err := prov.Create(ctx, *spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `read x; echo "out:$x"; echo err >&2; exit 3`, Stdin: []byte("hello\n"), Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 3 || strings.TrimSpace(string(res.Stdout)) != "out:hello" || !strings.Contains(string(res.Stderr), "err") {
		t.Fatalf("exec through the proxy: %+v %v", res, err)
	}

	// exec start stalls: the timeout bounds it, and it is infra.
	if err := p.SetRules(Rule{Method: "POST", Path: `^/exec/[^/]+/start$`, Action: Stall, Times: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo never-seen", Timeout: 500 * time.Millisecond})
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("a stalled exec was not bounded by its timeout")
	}
	// A stream that brought nothing by the deadline is the daemon's fault,
	// not the command's: an infrastructure error, never a judged timeout.
	if !errors.Is(err, sandbox.ErrInfra) || !res.TimedOut || strings.Contains(string(res.Stdout), "never-seen") {
		t.Fatalf("stalled exec: %+v %v", res, err)
	}
	if p.Hits()[0] != 1 {
		t.Fatalf("stall rule hits %v", p.Hits())
	}

	// create refused: an infrastructure error.
	if err := p.SetRules(Rule{Method: "POST", Path: `^/containers/create$`, Action: Refuse, Message: "no space left on device"}); err != nil {
		t.Fatal(err)
	}
	if _, err := prov.Create(ctx, *spec); !errors.Is(err, sandbox.ErrInfra) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("refused create: %v", err)
	}
}

// A create given up on while the daemon works (the attempt aborted, the
// supervisor gone) leaves no container behind: the daemon made it, but its
// answer never reached the provider, so nothing held its id. Before, such a
// container outlived the run (TestSupervisorGoneWorkersCleanUp, a docker
// trial: "docker ps: [9cd4261b41b5]" after the worker had exited).
func TestAbandonedCreateLeavesNoContainer(t *testing.T) {
	p, prov, spec, real, runs := proxiedProvider(t, "fpabandon")
	ctx := context.Background()
	if err := p.SetRules(Rule{Method: "POST", Path: `^/containers/create$`, Action: Stall, Times: 1}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		sb, err := prov.Create(cctx, *spec)
		if sb != nil {
			_ = sb.Close(context.Background())
		}
		errc <- err
	}()
	// The daemon has made the container; its answer is withheld.
	made := time.Now().Add(time.Minute)
	for {
		left, err := real.ContainerList(ctx, runs)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			break
		}
		if time.Now().After(made) {
			t.Fatal("the daemon never made the stalled create's container")
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon for a condition, not a synchronisation
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned create: %v", err)
	}
	left, err := real.ContainerList(ctx, runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("the abandoned create left %d container(s): %s", len(left), left[0].Names)
	}
}
