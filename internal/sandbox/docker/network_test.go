package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/testlock"
)

// serveHello answers every connection on ln with a line.
// helloGateway listens where the run's gateway would and answers every
// connection with line: the run's gateway address and the port.
func helloGateway(t *testing.T, r *testRun, line string) (sandbox.GatewayAddr, int) {
	t.Helper()
	g, err := r.P.Gateway(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		t.Fatalf("listen on the gateway address %s: %v", g.Listen, err)
	}
	serveHello(t, ln, line)
	return g, ln.Addr().(*net.TCPAddr).Port
}

func serveHello(t *testing.T, ln net.Listener, line string) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, line)
			c.Close()
		}
	}()
}

// dial runs nc in sb against addr and returns what it read (empty = unreachable).
func dial(t *testing.T, sb sandbox.Sandbox, host string, port int) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecSpec{
		Shell:   fmt.Sprintf("nc -w 3 %s %d </dev/null", host, port),
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func containerIP(t *testing.T, cli *client.Client, id string) string {
	t.Helper()
	ins, err := cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range ins.NetworkSettings.Networks {
		if ep.IPAddress != "" {
			return ep.IPAddress
		}
	}
	t.Fatalf("container %s has no IP", id)
	return ""
}

// startServer starts an nc server in sb answering "from-<name>" on port 8080
// and returns once the kernel lists its listening socket. nc -ll keeps one
// listener for every connection, so a later "unreachable" is never a refusal
// between two listeners of a restart loop.
func startServer(t *testing.T, sb sandbox.Sandbox, name string) {
	t.Helper()
	res := mustExec(t, sb, fmt.Sprintf(`nc -ll -p 8080 -e echo from-%s >/dev/null 2>&1 &`, name))
	if res.ExitCode != 0 {
		t.Fatalf("start server: %+v", res)
	}
	waitListening(t, sb, 8080)
}

// waitListening returns once sb's /proc/net/tcp{,6} holds a socket in state
// LISTEN (0A) on port; the exec's timeout bounds the wait.
func waitListening(t *testing.T, sb sandbox.Sandbox, port int) {
	t.Helper()
	pat := fmt.Sprintf(":%04X [0-9A-F:]* 0A ", port)
	res := mustExec(t, sb, fmt.Sprintf(`until grep -q '%s' /proc/net/tcp /proc/net/tcp6 2>/dev/null; do usleep 10000; done`, pat))
	if res.ExitCode != 0 {
		t.Fatalf("port %d never listened: %+v", port, res)
	}
}

func TestNetworkIsolation(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	a, b := spec(t, "net-a"), spec(t, "net-b")
	prepare(t, r, &a, &b)
	g, port := helloGateway(t, r, "from-gateway")
	if h, _, _ := net.SplitHostPort(g.Listen); h != g.Host {
		t.Fatalf("gateway %+v", g)
	}

	sa := mustCreate(t, r, a)
	sb := mustCreate(t, r, b)

	// Both sandboxes reach the gateway.
	if got := dial(t, sa, g.Host, port); got != "from-gateway" {
		t.Fatalf("sandbox a reached the gateway with %q", got)
	}
	if got := dial(t, sb, g.Host, port); got != "from-gateway" {
		t.Fatalf("sandbox b reached the gateway with %q", got)
	}

	// Sandbox b serves; a cannot reach it, although b itself can (positive control).
	startServer(t, sb, "b")
	ipB := containerIP(t, r.P.cli, sb.ID())
	if got := dial(t, sb, ipB, 8080); got != "from-b" {
		t.Fatalf("control: b cannot reach its own server: %q", got)
	}
	if got := dial(t, sa, ipB, 8080); got != "" {
		t.Fatalf("sandbox a reached sandbox b: %q", got)
	}

	// Networks do not grow with sandboxes: one run network for any number of sandboxes.
	_, nets := countRun(t, r.P.cli, r.ID)
	if nets != 1 {
		t.Fatalf("%d networks for 2 gateway sandboxes", nets)
	}

	// A server in a container on another network, reachable from its own network
	// (control) but not from a sandbox on the default network.
	other := otherNetworkServer(t, r)
	if got := dial(t, other.peer, other.ip, 8080); got != "from-other" {
		t.Fatalf("control: peer cannot reach the other server: %q", got)
	}
	if got := dial(t, sa, other.ip, 8080); got != "" {
		t.Fatalf("sandbox reached a server on another network: %q", got)
	}

}

type otherServer struct {
	ip   string
	peer sandbox.Sandbox
}

// otherNetworkServer starts, on a separate ordinary bridge network, a server
// container and a peer container, both labelled with the run for cleanup.
func otherNetworkServer(t *testing.T, r *testRun) otherServer {
	t.Helper()
	ctx := context.Background()
	n, err := r.P.createNetwork(ctx, dockerName(r.ID, "other"), false, true, "other", "test-other")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.P.removeNetwork(context.Background(), n.ID) })
	mk := func() sandbox.Sandbox {
		s := spec(t, "other")
		sb := mustCreate(t, r, s)
		cli := r.P.cli
		// Move it from the run network to the other one.
		if err := cli.NetworkDisconnect(ctx, r.P.netGW.ID, sb.ID(), true); err != nil {
			t.Fatal(err)
		}
		if err := cli.NetworkConnect(ctx, n.ID, sb.ID(), &network.EndpointSettings{}); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	srv, peer := mk(), mk()
	startServer(t, srv, "other")
	ins, err := r.P.cli.ContainerInspect(ctx, srv.ID())
	if err != nil {
		t.Fatal(err)
	}
	return otherServer{ip: ins.NetworkSettings.Networks[n.Name].IPAddress, peer: peer}
}

func TestNetworkModes(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	iso, br := spec(t, "iso"), spec(t, "br")
	iso.Network, br.Network = NetworkIsolated, NetworkBridge
	prepare(t, r, &iso, &br)
	ctx := context.Background()
	g, port := helloGateway(t, r, "gw")

	s1 := mustCreate(t, r, iso)
	s2 := mustCreate(t, r, iso)
	s3 := mustCreate(t, r, br)
	s4 := mustCreate(t, r, br)
	for i, sb := range []sandbox.Sandbox{s1, s2, s3, s4} {
		if got := dial(t, sb, g.Host, port); got != "gw" {
			t.Fatalf("sandbox %d cannot reach the gateway: %q", i+1, got)
		}
	}
	// Isolated: one network each, plus the run network and the bridge-mode network.
	_, nets := countRun(t, r.P.cli, r.ID)
	if nets != 4 {
		t.Fatalf("%d networks, want 4 (gw, out, 2 isolated)", nets)
	}
	startServer(t, s2, "s2")
	startServer(t, s4, "s4")
	if got := dial(t, s1, containerIP(t, r.P.cli, s2.ID()), 8080); got != "" {
		t.Fatalf("isolated sandboxes reach each other: %q", got)
	}
	if got := dial(t, s3, containerIP(t, r.P.cli, s4.ID()), 8080); got != "" {
		t.Fatalf("bridge-mode sandboxes reach each other: %q", got)
	}
	// Closing an isolated sandbox removes its network.
	if err := s1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, nets := countRun(t, r.P.cli, r.ID); nets != 3 {
		t.Fatalf("%d networks after closing an isolated sandbox", nets)
	}
	// Finalize removes the run networks.
	for _, sb := range []sandbox.Sandbox{s2, s3, s4} {
		sb.Close(ctx)
	}
	if err := r.P.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := countRun(t, r.P.cli, r.ID); c != 0 || n != 0 {
		t.Fatalf("left %d containers, %d networks", c, n)
	}
}

// poolExhausted is the daemon's error when no address pool is left.
const poolExhausted = "could not find an available, non-overlapping IPv4 address pool"

// TestPreflightAgainstDaemon predicts how many networks the daemon can still
// create, creates exactly that many, checks that one more fails with the
// daemon's address-pool error, and removes them all. Other users of the daemon
// may create or remove networks meanwhile; then the trial is repeated.
// While it holds every free network no other test can create one: it holds
// the Docker test lock exclusively (test packages run side by side).
func TestPreflightAgainstDaemon(t *testing.T) {
	testlock.Exclusive(t, testlock.Docker)
	r := newRun(t, nil)
	cli := r.P.cli
	ctx := context.Background()
	for trial := 1; trial <= 4; trial++ {
		ok, msg := preflightTrial(t, r, cli, ctx, trial)
		if ok {
			return
		}
		t.Logf("trial %d disturbed: %s", trial, msg)
		time.Sleep(time.Duration(trial) * 2 * time.Second) // back off from the daemon's other users; nothing to wait on
	}
	t.Fatal("the daemon's networks kept changing under the test")
}

func otherNets(ctx context.Context, cli *client.Client, runID string) (string, error) {
	ns, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return "", err
	}
	var ids []string
	for _, n := range ns {
		if n.Labels[sandbox.LabelRun] != runID {
			ids = append(ids, n.ID)
		}
	}
	return strings.Join(sortStrings(ids), ","), nil
}

func preflightTrial(t *testing.T, r *testRun, cli *client.Client, ctx context.Context, trial int) (bool, string) {
	before, err := otherNets(ctx, cli, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.P.Preflight(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("preflight: pools from %s, %d in all, %d used, %d free", rep.PoolsSource, rep.Total, len(rep.Used), rep.Free)
	var made []string
	defer func() {
		for _, id := range made {
			if err := cli.NetworkRemove(context.Background(), id); err != nil {
				t.Errorf("remove network: %v", err)
			}
		}
	}()
	labels := r.P.labels("preflight", "test-preflight", nil)
	for i := 0; i <= rep.Free; i++ {
		resp, err := cli.NetworkCreate(ctx, dockerName(r.ID, "pf", fmt.Sprint(trial), fmt.Sprint(i)), network.CreateOptions{Driver: "bridge", Labels: labels})
		if err == nil {
			made = append(made, resp.ID)
		}
		if i < rep.Free && err != nil {
			if now, _ := otherNets(ctx, cli, r.ID); now != before {
				return false, fmt.Sprintf("network %d of %d failed while others changed networks: %v", i+1, rep.Free, err)
			}
			t.Fatalf("predicted %d free networks, but creating number %d failed: %v", rep.Free, i+1, err)
		}
		if i == rep.Free {
			if now, _ := otherNets(ctx, cli, r.ID); now != before {
				return false, "others changed networks during the trial"
			}
			if err == nil {
				t.Fatalf("predicted %d free networks, but network %d was created too", rep.Free, i+1)
			}
			if !strings.Contains(err.Error(), poolExhausted) {
				t.Fatalf("network %d failed with %v, want the address-pool error", i+1, err)
			}
			// With the pools full, the preflight says so.
			after, err := r.P.Preflight(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if after.Free != 0 || after.Enough {
				t.Fatalf("preflight with pools full: %+v", after)
			}
		}
	}
	return true, ""
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

var _ = bufio.NewReader
var _ = errors.New
var _ = netip.Addr{}
var _ = container.ListOptions{}
var _ = filters.Args{}

func TestFinalizeRemovesLeftovers(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "left")
	prepare(t, r, &s)
	ctx := context.Background()
	// A sandbox nobody closes, and a container created but never started.
	if _, err := r.P.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	_, err := r.P.cli.ContainerCreate(ctx, &container.Config{Image: s.Image, Labels: r.P.labels("left", "sandbox", nil)},
		&container.HostConfig{NetworkMode: container.NetworkMode(r.P.netGW.Name)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if c, n := countRun(t, r.P.cli, r.ID); c != 2 || n != 1 {
		t.Fatalf("before finalize: %d containers, %d networks", c, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.P.Finalize(cctx); err != nil {
		t.Fatal(err)
	}
	if c, n := countRun(t, r.P.cli, r.ID); c != 0 || n != 0 {
		t.Fatalf("after finalize: %d containers, %d networks", c, n)
	}
}
