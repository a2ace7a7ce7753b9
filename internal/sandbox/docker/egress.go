package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/egress"
	"github.com/steward-evals/steward/internal/sandbox"
)

// A sandbox of network: allowlist (a Harbor task's network_mode =
// "allowlist", sandbox.Spec.AllowedHosts) is a gateway-mode sandbox (on the
// run's internal gateway network: the model gateway and nothing else) that
// is also on a network of its own, internal too, shared with one egress
// proxy container: `steward __egress` (internal/egress), FROM scratch,
// which is also on a network with a route out (the run's outbound network,
// or STEWARD_EGRESS_NETWORK). The sandbox gets HTTP_PROXY, HTTPS_PROXY
// (and their lower-case forms) naming the proxy, and NO_PROXY naming the
// gateway; with no route out of either of its networks, a connection that
// does not go through the proxy goes nowhere. Close removes the proxy and
// its network with the sandbox. See docs/docker.md#network-allowlists.

// Roles of an egress proxy's container and network.
const (
	roleEgress    = "egress"
	roleEgressNet = "network-egress"
)

// EgressPort is where a sandbox's egress proxy listens.
const EgressPort = 3128

// Environment variables that configure the egress proxies (the operator's, not a task's).
const (
	// EnvEgressAllow lists private prefixes (comma-separated CIDRs or
	// addresses) the proxies may dial: a package mirror on the runner's
	// network. Loopback, link-local and metadata addresses stay refused.
	EnvEgressAllow = "STEWARD_EGRESS_ALLOW"
	// EnvEgressNetwork names the Docker network the proxies go out
	// through instead of the run's outbound network; containers on it are
	// reached by their names and aliases.
	EnvEgressNetwork = "STEWARD_EGRESS_NETWORK"
)

// egressProxy is one sandbox's proxy.
type egressProxy struct {
	id   string
	net  *runNet
	addr netip.Addr
}

// EgressOptions reads the egress settings from the environment.
func EgressOptions(getenv func(string) string, o *Options) error {
	if getenv == nil {
		return nil
	}
	o.EgressNetwork = strings.TrimSpace(getenv(EnvEgressNetwork))
	for _, v := range strings.Split(getenv(EnvEgressAllow), ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		pfx, err := egress.ParsePrefix(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", sandbox.ErrBadInput, EnvEgressAllow, err)
		}
		o.EgressAllow = append(o.EgressAllow, pfx)
	}
	return nil
}

// checkAllowedHosts reads a spec's allowed hosts.
func checkAllowedHosts(s *sandbox.Spec) error {
	if len(s.AllowedHosts) == 0 {
		return fmt.Errorf("task %s: network allowlist without allowed hosts", s.Task)
	}
	for _, h := range s.AllowedHosts {
		if _, err := egress.ParseHost(h); err != nil {
			return fmt.Errorf("task %s: allowed host %w", s.Task, err)
		}
	}
	return nil
}

// egressImage builds (once per provider) the proxy's image: FROM scratch
// holding the egress binary as /steward.
func (p *Provider) egressImage(ctx context.Context) (string, error) {
	p.egressMu.Lock()
	defer p.egressMu.Unlock()
	if p.egressRef != "" {
		return p.egressRef, nil
	}
	bin := p.opts.EgressBinary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return "", fmt.Errorf("egress proxy image: %w", err)
		}
	}
	ref, err := p.relayImage(ctx, bin)
	if err != nil {
		return "", fmt.Errorf("egress proxy image: %w", err)
	}
	p.egressRef = ref
	return ref, nil
}

// egressOut is the network the proxies go out through.
func (p *Provider) egressOut(ctx context.Context) (string, error) {
	if name := p.opts.EgressNetwork; name != "" {
		ins, err := p.cli.NetworkInspect(ctx, name, network.InspectOptions{})
		if err != nil {
			return "", fmt.Errorf("%w: the egress network %q (%s): %v", sandbox.ErrBadInput, name, EnvEgressNetwork, err)
		}
		return ins.ID, nil
	}
	n, err := p.ensureNet(ctx, true)
	if err != nil {
		return "", err
	}
	return n.ID, nil
}

// egressDeny are the addresses the proxies never dial although they may
// be global: the host's own. On the host they are its interfaces'; when
// Steward runs in a container they are learnt once by a probe container on
// the host's network (egress.Spec.Probe), and a failed probe refuses the
// sandbox rather than start a proxy that might reach the host.
func (p *Provider) egressDeny(ctx context.Context) ([]string, error) {
	if !p.opts.InContainer {
		return egress.ProbeAddrs()
	}
	p.egressMu.Lock()
	defer p.egressMu.Unlock()
	if p.hostAddrs != nil {
		return p.hostAddrs, nil
	}
	addrs, err := p.probeHostAddrs(ctx)
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("learn the host's addresses for the egress proxies: %w", err))
	}
	p.hostAddrs = addrs
	return addrs, nil
}

// probeHostAddrs runs the egress image's probe on the host's network and
// reads the addresses it prints.
func (p *Provider) probeHostAddrs(ctx context.Context) ([]string, error) {
	img := p.egressRef
	if img == "" {
		return nil, errors.New("no egress image")
	}
	cmd := p.opts.EgressCommand
	if len(cmd) == 0 {
		cmd = []string{"/steward", egress.Arg}
	}
	cmd = append(append([]string(nil), cmd...), "0.0.0.0:0", egress.Spec{Probe: true}.Encode())
	init := true
	pids := int64(16)
	resp, err := p.cli.ContainerCreate(ctx, &container.Config{
		Image: img, Cmd: cmd, Entrypoint: []string{}, Labels: p.labels("", roleEgress+"-probe", nil),
	}, &container.HostConfig{
		NetworkMode:    "host",
		Init:           &init,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Resources:      container.Resources{NanoCPUs: 5e8, Memory: 64 << 20, PidsLimit: &pids},
	}, nil, nil, dockerName(p.opts.RunID, "egress-probe", randomID(3)))
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		_ = p.removeContainer(cctx, resp.ID)
	}()
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	okC, errC := p.cli.ContainerWait(wctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case w := <-okC:
		if w.StatusCode != 0 {
			return nil, fmt.Errorf("probe exited %d: %s", w.StatusCode, strings.TrimSpace(p.containerLogs(ctx, resp.ID)))
		}
	case err := <-errC:
		return nil, err
	}
	logs := p.containerLogs(ctx, resp.ID)
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, egress.HostAddrsPrefix); ok {
			addrs := []string{}
			for _, f := range strings.Fields(rest) {
				pfx, err := egress.ParsePrefix(f)
				if err != nil {
					return nil, fmt.Errorf("probe printed %q: %w", f, err)
				}
				addrs = append(addrs, pfx.String())
			}
			return addrs, nil
		}
	}
	return nil, fmt.Errorf("probe printed no addresses: %q", strings.TrimSpace(logs))
}

// startEgress starts the proxy of a sandbox about to be created (name
// and id are the sandbox's): its network, its container on it and on the
// way out, listening.
func (p *Provider) startEgress(ctx context.Context, spec sandbox.Spec, name string) (*egressProxy, error) {
	if err := checkAllowedHosts(&spec); err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrBadInput, err)
	}
	img, err := p.egressImage(ctx)
	if err != nil {
		return nil, err
	}
	out, err := p.egressOut(ctx)
	if err != nil {
		return nil, err
	}
	n, err := p.createNetwork(ctx, name+"-egress", true, true, spec.Task, roleEgressNet)
	if err != nil {
		return nil, err
	}
	eg := &egressProxy{net: n}
	fail := func(err error) (*egressProxy, error) {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		p.stopEgress(cctx, eg)
		return nil, err
	}
	var allow []string
	for _, a := range p.opts.EgressAllow {
		allow = append(allow, a.String())
	}
	deny, err := p.egressDeny(ctx)
	if err != nil {
		return fail(err)
	}
	es := egress.Spec{Hosts: spec.AllowedHosts, Allow: allow, Deny: deny}
	cmd := p.opts.EgressCommand
	if len(cmd) == 0 {
		cmd = []string{"/steward", egress.Arg}
	}
	cmd = append(append([]string(nil), cmd...), net.JoinHostPort("0.0.0.0", strconv.Itoa(EgressPort)), es.Encode())
	init := true
	pids := int64(128)
	resp, err := p.cli.ContainerCreate(ctx, &container.Config{
		Image: img, Cmd: cmd, Entrypoint: []string{}, Labels: p.labels(spec.Task, roleEgress, spec.Labels), Hostname: "egress",
	}, &container.HostConfig{
		NetworkMode:    container.NetworkMode(n.Name),
		Init:           &init,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Resources:      container.Resources{NanoCPUs: 5e8, Memory: 128 << 20, MemorySwap: 128 << 20, PidsLimit: &pids},
		// A container's namespace inherits the host's IPv4 forwarding (on
		// where Docker runs): the proxy, on the sandbox's network and on the
		// way out, would route a sandbox's packets (a route through it
		// needs NET_ADMIN, crafted frames NET_RAW) past the allowlist
		// wherever the host's firewall does not filter bridged frames.
		// IPv6 forwarding starts off in a new namespace.
		Sysctls: map[string]string{"net.ipv4.ip_forward": "0"},
		// A line per request: bounded, as a compose service's log is.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
	}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{n.Name: {}}}, nil, name+"-egress")
	if err != nil {
		if ctx.Err() != nil {
			p.abandon(ctx, name+"-egress")
		}
		return fail(sandbox.InfraError(fmt.Errorf("create egress proxy for task %s: %w", spec.Task, err)))
	}
	eg.id = resp.ID
	if err := p.cli.NetworkConnect(ctx, out, eg.id, &network.EndpointSettings{}); err != nil {
		return fail(sandbox.InfraError(fmt.Errorf("connect egress proxy for task %s to its way out: %w", spec.Task, err)))
	}
	if err := p.cli.ContainerStart(ctx, eg.id, container.StartOptions{}); err != nil {
		return fail(sandbox.InfraError(fmt.Errorf("start egress proxy for task %s: %w", spec.Task, err)))
	}
	if err := p.waitLogLine(ctx, eg.id, "egress proxy", 30*time.Second); err != nil {
		return fail(fmt.Errorf("egress proxy for task %s: %w", spec.Task, err))
	}
	ins, err := p.cli.ContainerInspect(ctx, eg.id)
	if err != nil {
		return fail(sandbox.InfraError(fmt.Errorf("inspect egress proxy for task %s: %w", spec.Task, err)))
	}
	if ins.NetworkSettings != nil {
		if ep := ins.NetworkSettings.Networks[n.Name]; ep != nil {
			eg.addr, _ = netip.ParseAddr(ep.IPAddress)
		}
	}
	if !eg.addr.IsValid() {
		return fail(sandbox.InfraError(fmt.Errorf("egress proxy for task %s has no address on its network", spec.Task)))
	}
	return eg, nil
}

// proxyEnv are the variables a sandbox reaches the proxy with: the
// gateway and local names bypass it.
func (p *Provider) proxyEnv(eg *egressProxy, gw *runNet, spec sandbox.Spec) []string {
	u := "http://" + net.JoinHostPort(eg.addr.String(), strconv.Itoa(EgressPort))
	no := []string{"localhost", "127.0.0.1", "::1", gw.Gateway.String()}
	if len(spec.Services) > 0 {
		no = append(no, "main")
		for _, s := range spec.Services {
			no = append(no, s.Name)
		}
	}
	n := strings.Join(no, ",")
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u, "NO_PROXY=" + n, "no_proxy=" + n}
}

// stopEgress removes a proxy's container and network.
func (p *Provider) stopEgress(ctx context.Context, eg *egressProxy) error {
	if eg == nil {
		return nil
	}
	var errs []error
	if eg.id != "" {
		if err := p.removeContainer(ctx, eg.id); err != nil {
			errs = append(errs, err)
		}
	}
	if eg.net != nil {
		if err := p.removeNetwork(ctx, eg.net.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isProxyVar: a variable proxyEnv sets.
func isProxyVar(k string) bool {
	switch k {
	case "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy":
		return true
	}
	return false
}
