package docker

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Capacity implements sandbox.Provider (C3): the smallest of 2 × the daemon's
// CPUs, what fits in its memory at the specs' per-sandbox memory, and, when a
// spec wants a network per sandbox, the networks the address pools can still give.
func (p *Provider) Capacity(ctx context.Context, specs []sandbox.Spec) (sandbox.Capacity, error) {
	info, err := p.cli.Info(ctx)
	if err != nil {
		return sandbox.Capacity{}, sandbox.InfraError(fmt.Errorf("read docker info: %w", err))
	}
	var mem int64
	isolated := false
	for _, s := range specs {
		m := s.Memory
		if m <= 0 {
			m = DefaultMemory
		}
		if m > mem {
			mem = m
		}
		if m := networkMode(s.Network); m == NetworkIsolated || m == NetworkAllowlist {
			isolated = true
		}
	}
	if mem == 0 {
		mem = DefaultMemory
	}
	free := -1
	if isolated {
		r, err := p.Preflight(ctx, 0)
		if err != nil {
			return sandbox.Capacity{}, err
		}
		free = r.Free
		// The run's own gateway network comes out of the same pools.
		p.mu.Lock()
		if p.netGW == nil {
			free--
		}
		p.mu.Unlock()
		if free < 0 {
			free = 0
		}
	}
	return ComputeCapacity(info.NCPU, info.MemTotal, mem, free), nil
}

// ComputeCapacity is the pure sizing rule behind Capacity. freeNetworks < 0
// means no spec needs a network per sandbox.
func ComputeCapacity(cpus int, memTotal, perSandbox int64, freeNetworks int) sandbox.Capacity {
	if cpus < 1 {
		cpus = 1
	}
	c := sandbox.Capacity{Limit: 2 * cpus, Source: fmt.Sprintf("docker default: 2 × %d CPUs", cpus)}
	if perSandbox > 0 && memTotal > 0 {
		byMem := int(memTotal / perSandbox)
		if byMem < 1 {
			byMem = 1
		}
		if byMem < c.Limit {
			c = sandbox.Capacity{Limit: byMem, Source: fmt.Sprintf("docker default: memory %s ÷ %s", gib(memTotal), gib(perSandbox))}
		}
	}
	if freeNetworks >= 0 && freeNetworks < c.Limit {
		lim := freeNetworks
		if lim < 1 {
			lim = 1 // the preflight reports the shortage; one sandbox at a time still runs
		}
		c = sandbox.Capacity{Limit: lim, Source: fmt.Sprintf("docker default: %d free networks in address pools", freeNetworks)}
	}
	return c
}

func gib(b int64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	v := float64(b) / (1 << 30)
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " GiB"
}

// UsedSubnets are the IPv4 subnets existing networks occupy.
func (p *Provider) UsedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("list networks: %w", err))
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if pr, err := netip.ParsePrefix(c.Subnet); err == nil && pr.Addr().Is4() {
				used = append(used, pr.Masked())
			}
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].String() < used[j].String() })
	return used, nil
}

// Pools are the daemon's address pools and where they were read from.
func (p *Provider) Pools(ctx context.Context) ([]AddressPool, string, error) {
	info, err := p.cli.Info(ctx)
	if err == nil && len(info.DefaultAddressPools) > 0 {
		var pools []AddressPool
		for _, ap := range info.DefaultAddressPools {
			pools = append(pools, AddressPool{Base: ap.Base, Size: ap.Size})
		}
		return pools, "daemon info", nil
	}
	path := p.daemonJSONPath()
	pools, ok, err := ReadDaemonPools(path)
	if err != nil {
		return nil, "", err
	}
	if ok {
		return pools, "daemon.json " + path, nil
	}
	return BuiltinPools, "Docker's built-in pools", nil
}

func (p *Provider) daemonJSONPath() string {
	if p.opts.DaemonJSONPath != "" {
		return p.opts.DaemonJSONPath
	}
	return DefaultDaemonJSONPath
}

// Preflight works out how many networks the daemon can still allocate and
// whether that covers wantNetworks (D1). It changes nothing.
func (p *Provider) Preflight(ctx context.Context, wantNetworks int) (PoolReport, error) {
	pools, src, err := p.Pools(ctx)
	if err != nil {
		return PoolReport{}, fmt.Errorf("preflight address pools: %w", err)
	}
	used, err := p.UsedSubnets(ctx)
	if err != nil {
		return PoolReport{}, fmt.Errorf("preflight address pools: %w", err)
	}
	return BuildPoolReport(pools, src, used, wantNetworks, p.daemonJSONPath(), runtime.GOOS)
}

// BuildPoolReport is the pure part of Preflight.
func BuildPoolReport(pools []AddressPool, source string, used []netip.Prefix, want int, daemonJSON, goos string) (PoolReport, error) {
	total, err := TotalNetworks(pools)
	if err != nil {
		return PoolReport{}, err
	}
	free, err := FreeNetworks(pools, used)
	if err != nil {
		return PoolReport{}, err
	}
	sfree, err := FreeNetworks(FinerPools, used)
	if err != nil {
		return PoolReport{}, err
	}
	return PoolReport{
		Pools: pools, PoolsSource: source, Used: used, Total: total, Free: free,
		Want: want, Enough: want <= free, Suggested: FinerPools, SuggestedFree: sfree,
		DaemonJSON: daemonJSON, Restart: RestartCommand(goos),
	}, nil
}

// NetworksWanted is how many networks a run of these specs creates at most
// with concurrency sandboxes at once: one run network, one more when a spec
// uses network: bridge or allowlist, one per live sandbox of network:
// isolated or allowlist specs,
// and one per live sandbox of a compose environment (spec.Services: its
// own network for its services), two for an isolated compose one.
func NetworksWanted(specs []sandbox.Spec, concurrency int) int {
	n := 1
	bridge := false
	per := 0 // networks one live sandbox may own, at most
	for _, s := range specs {
		own := 0
		switch networkMode(s.Network) {
		case NetworkBridge:
			bridge = true
		case NetworkIsolated:
			own++
		case NetworkAllowlist:
			own++         // the sandbox's, shared with its egress proxy
			bridge = true // the proxies' way out (at most: unless STEWARD_EGRESS_NETWORK)
		}
		if len(s.Services) > 0 {
			own++
		}
		per = max(per, own)
	}
	if bridge {
		n++
	}
	return n + per*concurrency
}

// Doctor prints what Steward knows about the daemon: versions, CPUs, memory,
// networks, address pools and free networks, images and leftover resources.
func (p *Provider) Doctor(ctx context.Context, w io.Writer) error {
	var b strings.Builder
	v, err := p.cli.ServerVersion(ctx)
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("read docker version: %w", err))
	}
	info, err := p.cli.Info(ctx)
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("read docker info: %w", err))
	}
	fmt.Fprintf(&b, "docker daemon %s (API %s, client negotiated %s), %s/%s, storage %s, cgroup %s v%s\n",
		v.Version, v.APIVersion, p.cli.ClientVersion(), v.Os, v.Arch, info.Driver, info.CgroupDriver, info.CgroupVersion)
	fmt.Fprintf(&b, "CPUs %d · memory %s · containers %d (%d running) · images %d\n", info.NCPU, gib(info.MemTotal), info.Containers, info.ContainersRunning, info.Images)
	c := ComputeCapacity(info.NCPU, info.MemTotal, DefaultMemory, -1)
	fmt.Fprintf(&b, "default sandbox budget %d (from %s, at %s per sandbox)\n", c.Limit, c.Source, gib(DefaultMemory))
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("list networks: %w", err))
	}
	fmt.Fprintf(&b, "networks %d:\n", len(nets))
	sort.Slice(nets, func(i, j int) bool { return nets[i].Name < nets[j].Name })
	for _, n := range nets {
		var subs []string
		for _, c := range n.IPAM.Config {
			subs = append(subs, c.Subnet)
		}
		fmt.Fprintf(&b, "  %-40s %-8s %s\n", n.Name, n.Driver, strings.Join(subs, ","))
	}
	r, err := p.Preflight(ctx, 0)
	if err != nil {
		return err
	}
	if err := RenderPoolReport(&b, r); err != nil {
		return err
	}
	imgs, err := p.cli.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("list images: %w", err))
	}
	var tags []string
	for _, im := range imgs {
		tags = append(tags, im.RepoTags...)
	}
	sort.Strings(tags)
	fmt.Fprintf(&b, "images %d: %s\n", len(tags), strings.Join(tags, " "))
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("list containers: %w", err))
	}
	sn, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))})
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("list networks: %w", err))
	}
	runs := map[string]bool{}
	dead := 0
	for _, c := range cs {
		runs[c.Labels[sandbox.LabelRun]] = true
		if d, _ := deadRun(ctx, p.cli, p.scope, p.live, c.Labels); d {
			dead++
		}
	}
	for _, n := range sn {
		runs[n.Labels[sandbox.LabelRun]] = true
		if d, _ := deadRun(ctx, p.cli, p.scope, p.live, n.Labels); d {
			dead++
		}
	}
	fmt.Fprintf(&b, "steward resources: %d containers, %d networks from %d runs; %d left by dead runs (steward sweep removes them)\n", len(cs), len(sn), len(runs), dead)
	_, err = io.WriteString(w, b.String())
	return err
}
