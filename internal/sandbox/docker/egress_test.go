package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/egress"
	"github.com/steward-evals/steward/internal/sandbox"
)

// httpGet sends one HTTP/1.0 GET with nc from sb, not through any proxy,
// and returns what came back ("" = unreachable).
func httpGet(t *testing.T, sb sandbox.Sandbox, host string, port int) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecSpec{
		Shell:   fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s %d`, host, port),
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout)
}

// buildEgressd builds the proxy alone, static, for the proxy image.
func buildEgressd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "egressd")
	build := exec.Command("go", "build", "-o", bin, "./testdata/egressd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build egressd: %v\n%s", err, out)
	}
	return bin
}

// upstreamServer is a sandbox moved onto net with alias, serving "from-NAME"
// over HTTP on ports 80 and 443 (busybox httpd).
// egressRun is a run whose provider starts egress proxies from a freshly
// built static helper (skipped under -short, which builds nothing).
func egressRun(t *testing.T) *testRun {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a static helper")
	}
	bin := buildEgressd(t)
	return newRun(t, func(o *Options) { o.EgressBinary = bin })
}

// upstreamNetwork is an internal network of the test's own for its
// upstreams (the proxies' way out in these tests), removed at cleanup.
func upstreamNetwork(t *testing.T, r *testRun) *runNet {
	t.Helper()
	out, err := r.P.createNetwork(context.Background(), dockerName(r.ID, "upstreams"), true, true, "upstreams", "test-upstreams")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.P.removeNetwork(context.Background(), out.ID) })
	return out
}

func upstreamServer(t *testing.T, r *testRun, n *runNet, name, alias string) (sandbox.Sandbox, string) {
	t.Helper()
	ctx := context.Background()
	s := spec(t, "upstream-"+name)
	s.CapAdd = []string{"NET_BIND_SERVICE"}
	sb := mustCreate(t, r, s)
	if err := r.P.cli.NetworkDisconnect(ctx, r.P.netGW.ID, sb.ID(), true); err != nil {
		t.Fatal(err)
	}
	if err := r.P.cli.NetworkConnect(ctx, n.ID, sb.ID(), &network.EndpointSettings{Aliases: []string{alias}}); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, sb, fmt.Sprintf(`mkdir -p www && echo from-%s > www/index.html && httpd -p 80 -h "$PWD/www" && httpd -p 443 -h "$PWD/www"`, name))
	if res.ExitCode != 0 {
		t.Fatalf("start httpd: %+v", res)
	}
	waitListening(t, sb, 80)
	waitListening(t, sb, 443)
	ins, err := r.P.cli.ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	return sb, ins.NetworkSettings.Networks[n.Name].IPAddress
}

// countRole counts this run's containers and networks of a role.
func countRole(t *testing.T, r *testRun, role string) (int, int) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+r.ID), filters.Arg("label", labelRole+"="+role))
	cs, err := r.P.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	f = filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+r.ID), filters.Arg("label", labelRole+"="+role+"-net"))
	if role == roleEgress {
		f = filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+r.ID), filters.Arg("label", labelRole+"="+roleEgressNet))
	}
	ns, err := r.P.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs), len(ns)
}

// TestEgressAllowlist: a network: allowlist sandbox reaches an allowed host
// through its egress proxy (plain HTTP through HTTP_PROXY, and a CONNECT
// tunnel), is refused a host not on its list and an allowed name whose
// address is private and not opened, cannot connect to anything directly,
// still reaches the gateway; Close removes its proxy and the proxy's
// network, Finalize everything. The upstreams are the test's own
// containers, on an internal network of the test's (the proxies' way out
// here, STEWARD_EGRESS_NETWORK), so nothing leaves the machine.
func TestEgressAllowlist(t *testing.T) {
	t.Parallel()
	r := egressRun(t)
	ctx := context.Background()
	out := upstreamNetwork(t, r)

	sp := spec(t, "allow")
	sp.Network = NetworkAllowlist
	sp.AllowedHosts = []string{"good.upstream.test", "private.upstream.test"}
	sp.Env = map[string]string{"HTTP_PROXY": "http://task.example:1", "KEEP": "1"} // the proxy's own win
	prepare(t, r, &sp)
	if r.P.egressRef != "" {
		rememberImage(r.P.egressRef)
	}
	g, gwPort := helloGateway(t, r, "gw")

	good, goodIP := upstreamServer(t, r, out, "good", "good.upstream.test")
	upstreamServer(t, r, out, "denied", "denied.upstream.test")
	_, privateIP := upstreamServer(t, r, out, "private", "private.upstream.test")
	if goodIP == "" || privateIP == "" {
		t.Fatal("upstreams have no address")
	}
	// The operator opens the good upstream's address alone.
	r.P.opts.EgressNetwork = out.Name
	r.P.opts.EgressAllow = []netip.Prefix{netip.MustParsePrefix(goodIP + "/32")}

	sb := mustCreate(t, r, sp)
	if r.P.egressRef != "" {
		rememberImage(r.P.egressRef)
	}
	env := mustExec(t, sb, `echo "$HTTP_PROXY $https_proxy $NO_PROXY $KEEP"`)
	f := strings.Fields(string(env.Stdout))
	if len(f) != 4 || !strings.HasPrefix(f[0], "http://") || f[0] != f[1] || !strings.Contains(f[2], g.Host) || f[3] != "1" {
		t.Fatalf("proxy environment: %q", env.Stdout)
	}

	// Plain HTTP through HTTP_PROXY (busybox wget honours http_proxy).
	if res := mustExec(t, sb, `wget -q -O- http://good.upstream.test/`); strings.TrimSpace(string(res.Stdout)) != "from-good" {
		t.Fatalf("allowed host through the proxy: %+v", res)
	}
	// A CONNECT tunnel (what HTTPS clients do), carrying a request.
	connect := func(target string) string {
		res := mustExec(t, sb, fmt.Sprintf(`hp=${HTTP_PROXY#http://}; printf 'CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\nGET / HTTP/1.0\r\n\r\n' | nc -w 5 ${hp%%:*} ${hp##*:}`, target))
		return string(res.Stdout)
	}
	if got := connect("good.upstream.test:443"); !strings.Contains(got, "200 Connection established") || !strings.Contains(got, "from-good") {
		t.Fatalf("CONNECT to the allowed host: %q", got)
	}
	// Not on the list: refused by the proxy, plain or tunnelled.
	if res := mustExec(t, sb, `wget -q -O- http://denied.upstream.test/ 2>&1`); res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "403") || strings.Contains(string(res.Stdout), "from-denied") {
		t.Fatalf("host not on the list: %+v", res)
	}
	if got := connect("denied.upstream.test:443"); !strings.Contains(got, "403") || !strings.Contains(got, "not in allowed_hosts") || strings.Contains(got, "from-denied") {
		t.Fatalf("CONNECT to a host not on the list: %q", got)
	}
	// On the list, but its address is private and not opened.
	if got := connect("private.upstream.test:443"); !strings.Contains(got, "403") || !strings.Contains(got, "private") || strings.Contains(got, "from-private") {
		t.Fatalf("CONNECT to an allowed name at a private address: %q", got)
	}
	// An IP literal, even the allowed host's.
	if got := connect(goodIP + ":443"); !strings.Contains(got, "403") || strings.Contains(got, "from-good") {
		t.Fatalf("CONNECT to an address: %q", got)
	}
	// Direct connections go nowhere, although the server answers on its
	// own network (control, from the good upstream itself).
	if got := httpGet(t, good, goodIP, 80); !strings.Contains(got, "from-good") {
		t.Fatalf("control: the upstream does not answer on its network: %q", got)
	}
	if got := httpGet(t, sb, goodIP, 80); got != "" {
		t.Fatalf("the sandbox reached the upstream directly: %q", got)
	}
	// The gateway is reached directly, as in a gateway-mode sandbox.
	if got := dial(t, sb, g.Host, gwPort); got != "gw" {
		t.Fatalf("gateway: %q", got)
	}

	if c, n := countRole(t, r, roleEgress); c != 1 || n != 1 {
		t.Fatalf("%d egress proxies, %d egress networks for one sandbox", c, n)
	}
	// The proxy is hardened like a sandbox, its log bounded, and it is on
	// its sandbox's network and its way out only.
	px, err := r.P.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+r.ID), filters.Arg("label", labelRole+"="+roleEgress))})
	if err != nil || len(px) != 1 {
		t.Fatalf("proxies %v, %v", px, err)
	}
	pins, err := r.P.cli.ContainerInspect(ctx, px[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := pins.HostConfig
	if len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL" || len(hc.CapAdd) != 0 || hc.Privileged || !hc.ReadonlyRootfs || len(hc.SecurityOpt) != 1 || hc.SecurityOpt[0] != "no-new-privileges" ||
		hc.Memory != 128<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 128 || len(hc.Binds) != 0 || len(hc.Mounts) != 0 || hc.LogConfig.Config["max-size"] != "1m" {
		t.Fatalf("proxy host config %+v", hc)
	}
	if len(pins.NetworkSettings.Networks) != 2 || pins.NetworkSettings.Networks[out.Name] == nil || pins.NetworkSettings.Networks[sb.egress.net.Name] == nil {
		t.Fatalf("proxy networks %v", pins.NetworkSettings.Networks)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := countRole(t, r, roleEgress); c != 0 || n != 0 {
		t.Fatalf("after Close: %d egress proxies, %d egress networks left", c, n)
	}
	// A second sandbox whose Close never comes: Finalize removes its proxy and network.
	mustCreate(t, r, sp)
	if c, n := countRole(t, r, roleEgress); c != 1 || n != 1 {
		t.Fatalf("%d egress proxies, %d egress networks for the second sandbox", c, n)
	}
	if err := r.P.removeNetwork(ctx, out.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.P.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if c, n := countRun(t, r.P.cli, r.ID); c != 0 || n != 0 {
		t.Fatalf("after Finalize: %d containers, %d networks left", c, n)
	}
}

// TestEgressRefusesBadSpecs: an allowlist without hosts, or with a host the
// rule refuses, is refused before anything is made.
func TestEgressRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	r := newRun(t, func(o *Options) { o.EgressBinary = "/nonexistent" })
	for _, hosts := range [][]string{nil, {"127.0.0.1"}, {"localhost"}} {
		s := spec(t, "bad-allow")
		s.Network, s.AllowedHosts = NetworkAllowlist, hosts
		err := r.P.Prepare(context.Background(), []*sandbox.Spec{&s})
		if err == nil || !strings.Contains(err.Error(), "allow") {
			t.Fatalf("Prepare with allowed hosts %q: %v", hosts, err)
		}
		s.Image = testImage(t)
		if _, err := r.P.Create(context.Background(), s); err == nil || !errors.Is(err, sandbox.ErrBadInput) {
			t.Fatalf("Create with allowed hosts %q: %v", hosts, err)
		}
	}
	if c, n := countRun(t, r.P.cli, r.ID); c != 0 || n > 1 {
		t.Fatalf("refused specs left %d containers, %d networks", c, n)
	}
}

func TestNetworksWantedAllowlist(t *testing.T) {
	specs := []sandbox.Spec{{Network: NetworkAllowlist, AllowedHosts: []string{"pypi.org"}}}
	// The run network, the proxies' way out, and one per live sandbox.
	if got := NetworksWanted(specs, 10); got != 12 {
		t.Fatalf("NetworksWanted = %d, want 12", got)
	}
}

func TestEgressOptions(t *testing.T) {
	env := map[string]string{EnvEgressAllow: " 10.1.0.0/16, 192.168.3.4 ,", EnvEgressNetwork: "mirror-net"}
	var o Options
	if err := EgressOptions(func(k string) string { return env[k] }, &o); err != nil {
		t.Fatal(err)
	}
	if o.EgressNetwork != "mirror-net" || len(o.EgressAllow) != 2 || o.EgressAllow[1] != netip.MustParsePrefix("192.168.3.4/32") {
		t.Fatalf("%+v", o)
	}
	env[EnvEgressAllow] = "10.1.0.0/16,mirror.local"
	if err := EgressOptions(func(k string) string { return env[k] }, &o); !errors.Is(err, sandbox.ErrBadInput) || !strings.Contains(err.Error(), EnvEgressAllow) {
		t.Fatalf("a bad prefix: %v", err)
	}
}

// TestEgressProbeLearnsTheHostsAddresses: when Steward runs in a container
// the proxies' deny list comes from a probe on the host's network; run
// here, on the host, it finds exactly the addresses this process sees,
// and leaves no container.
func TestEgressProbeLearnsTheHostsAddresses(t *testing.T) {
	t.Parallel()
	r := egressRun(t)
	ctx := context.Background()
	if _, err := r.P.egressImage(ctx); err != nil {
		t.Fatal(err)
	}
	rememberImage(r.P.egressRef)
	r.P.opts.InContainer = true // the probe path; this test runs on the host, so it must see the host's addresses
	// Tests running beside this one add and remove Docker bridges, so the
	// host's addresses are read before and after the probe: it must find
	// every address that was there throughout, and none that never was.
	before, err := egress.ProbeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	// (And every 20 ms while the probe runs: a bridge another test held
	// only meanwhile is one this process saw too; a CI run met one.)
	seen := map[string]bool{}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if as, err := egress.ProbeAddrs(); err == nil {
				for _, a := range as {
					seen[a] = true
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	got, err := r.P.egressDeny(ctx)
	close(done)
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	after, err := egress.ProbeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, a := range got {
		found[a] = true
		if !slices.Contains(before, a) && !slices.Contains(after, a) && !seen[a] {
			t.Errorf("probe found %s, which this process never saw (%q, then %q)", a, before, after)
		}
	}
	throughout := 0
	for _, a := range before {
		if slices.Contains(after, a) {
			throughout++
			if !found[a] {
				t.Errorf("probe missed %s (it found %q, this process saw %q, then %q)", a, got, before, after)
			}
		}
	}
	if throughout == 0 {
		t.Fatalf("this process sees no address of its own: %q, then %q", before, after)
	}
	if c, _ := countRun(t, r.P.cli, r.ID); c != 0 {
		t.Fatalf("the probe left %d containers", c)
	}
	r.P.opts.InContainer = false
}

// TestEgressProxyRoutesNothing: the proxy's container is on the sandbox's
// network and on the way out, and a container's network namespace
// inherits the host's IPv4 forwarding (on where Docker runs). A sandbox
// that may change its routes (a task's cap_add: NET_ADMIN; NET_RAW, which
// crafts frames to the proxy's MAC, is as good) routes through the proxy
// to whatever is on the way out, bypassing the allowlist: the proxy's
// namespace forwards no packets. The upstream routes its answers back
// through the proxy too, so a forwarding proxy would carry a whole TCP
// exchange; the control shows the upstream answers on its own network.
func TestEgressProxyRoutesNothing(t *testing.T) {
	t.Parallel()
	r := egressRun(t)
	ctx := context.Background()
	out := upstreamNetwork(t, r)
	sp := spec(t, "route")
	sp.Network = NetworkAllowlist
	sp.AllowedHosts = []string{"good.upstream.test"}
	sp.CapAdd = []string{"NET_ADMIN"}
	prepare(t, r, &sp)
	r.P.opts.EgressNetwork = out.Name
	sb := mustCreate(t, r, sp)
	if r.P.egressRef != "" {
		rememberImage(r.P.egressRef)
	}
	pins, err := r.P.cli.ContainerInspect(ctx, sb.egress.id)
	if err != nil {
		t.Fatal(err)
	}
	sins, err := r.P.cli.ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	proxyOut := pins.NetworkSettings.Networks[out.Name]
	sbEgress := sins.NetworkSettings.Networks[sb.egress.net.Name]
	if proxyOut == nil || proxyOut.IPAddress == "" || sbEgress == nil || sbEgress.IPAddress == "" {
		t.Fatalf("addresses: proxy %v, sandbox %v", pins.NetworkSettings.Networks, sins.NetworkSettings.Networks)
	}
	// The upstream answers the sandbox through the proxy (the test's own
	// container, given NET_ADMIN for this route alone).
	upR := mustCreate(t, r, func() sandbox.Spec {
		s := spec(t, "up-router")
		s.CapAdd = []string{"NET_ADMIN", "NET_BIND_SERVICE"}
		return s
	}())
	if err := r.P.cli.NetworkDisconnect(ctx, r.P.netGW.ID, upR.ID(), true); err != nil {
		t.Fatal(err)
	}
	if err := r.P.cli.NetworkConnect(ctx, out.ID, upR.ID(), &network.EndpointSettings{}); err != nil {
		t.Fatal(err)
	}
	uins, err := r.P.cli.ContainerInspect(ctx, upR.ID())
	if err != nil {
		t.Fatal(err)
	}
	upIP := uins.NetworkSettings.Networks[out.Name].IPAddress
	if res := mustExec(t, upR, `mkdir -p www && echo from-up > www/index.html && httpd -p 80 -h "$PWD/www" && ip route add `+sbEgress.IPAddress+`/32 via `+proxyOut.IPAddress); res.ExitCode != 0 {
		t.Fatalf("upstream: %+v", res)
	}
	waitListening(t, upR, 80)
	if got := httpGet(t, upR, upIP, 80); !strings.Contains(got, "from-up") {
		t.Fatalf("control: the upstream does not answer on its network: %q", got)
	}
	// The hostile agent: a route to the upstream through its proxy.
	if res := mustExec(t, sb, `ip route add `+upIP+`/32 via `+sb.egress.addr.String()); res.ExitCode != 0 {
		t.Fatalf("sandbox route: %+v", res)
	}
	if got := httpGet(t, sb, upIP, 80); got != "" {
		t.Fatalf("the sandbox reached a host on the proxy's way out by routing through the proxy: %q", got)
	}
	// Where the host's firewall filters bridged frames (br_netfilter with
	// Docker's rules, as on most daemons) that route is dropped on the host;
	// where it does not, the proxy's own namespace is the last word: it
	// forwards nothing, IPv4 or IPv6.
	// (ip_forward, then every interface's IPv4 and IPv6 forwarding: the
	// way out is connected after the container is created.)
	got := inNetns(t, r, sb.egress.id, `cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv4/conf/*/forwarding /proc/sys/net/ipv6/conf/*/forwarding`)
	if f := strings.Fields(got); len(f) < 7 || strings.Trim(strings.Join(f, ""), "0") != "" {
		t.Fatalf("the proxy's network namespace forwards packets (ip_forward, ipv4 conf/*, ipv6 conf/*): %q", got)
	}
}

// inNetns runs shell in a busybox container in the network namespace of
// container id and returns its output.
func inNetns(t *testing.T, r *testRun, id, shell string) string {
	t.Helper()
	ctx := context.Background()
	resp, err := r.P.cli.ContainerCreate(ctx, &container.Config{Image: testImage(t), Cmd: []string{"/bin/sh", "-c", shell}, Entrypoint: []string{}, Labels: r.P.labels("netns", "test-netns", nil)},
		&container.HostConfig{NetworkMode: container.NetworkMode("container:" + id), CapDrop: []string{"ALL"}}, nil, nil, dockerName(r.ID, "netns", randomID(3)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.P.removeContainer(context.Background(), resp.ID) })
	if err := r.P.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	okC, errC := r.P.cli.ContainerWait(ctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case w := <-okC:
		if w.StatusCode != 0 {
			t.Fatalf("%q in %s's namespace exited %d: %s", shell, id, w.StatusCode, r.P.containerLogs(ctx, resp.ID))
		}
	case err := <-errC:
		t.Fatal(err)
	}
	return r.P.containerLogs(ctx, resp.ID)
}
