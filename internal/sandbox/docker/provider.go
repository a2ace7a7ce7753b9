// Package docker is the Docker sandbox provider: every sandbox is a container
// started from a local image, kept alive by an idle process, driven through
// exec and the archive API (never bind mounts), with CPU, memory and PID
// limits, no capabilities, no-new-privileges, and a network that reaches the
// model gateway and nothing else (see docs/docker.md).
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/steward-evals/steward/internal/sandbox"
)

// LabelLock names the absolute path of the lock file of the run that created
// a resource; Sweep removes the resource once that lock is no longer held.
const LabelLock = "dev.steward.lock"

// LabelLockScope says where the lock path is meaningful: "container:<id>"
// when Steward ran in that container, "host:<hostname>" otherwise. A sweeper
// judges a lock path only in its own scope (see Sweep).
const LabelLockScope = "dev.steward.lock-scope"

// LabelOwner holds the identity (Liveness.Owner; runlock.Identity, JSON) of the process that
// holds the run's lock: boot id, mount namespace, container, host, pid. A
// sweeper judges the lock path only where the identities say it is meaningful.
const LabelOwner = "dev.steward.owner"

// labelRole tells run-wide resources (networks, relay) from sandboxes.
const labelRole = "dev.steward.role"

// Network modes of sandbox.Spec.Network.
const (
	NetworkGateway  = "gateway"  // reaches the model gateway only (default)
	NetworkBridge   = "bridge"   // reaches the outside world and the gateway, not other sandboxes
	NetworkIsolated = "isolated" // a network of its own per sandbox (counts against the address pools)
	// NetworkAllowlist reaches the gateway and, through an egress proxy of
	// its own (egress.go), Spec.AllowedHosts; a network of its own per
	// sandbox, shared with its proxy.
	NetworkAllowlist = "allowlist"
)

// Defaults applied when a spec leaves a limit at zero.
const (
	DefaultCPUs    = 1.0
	DefaultMemory  = 512 << 20 // 512 MiB, as evalset documents
	DefaultPIDs    = 256
	DefaultWorkdir = "/work"
)

// Options configure a Provider.
type Options struct {
	// RunID names the run; it is put in every label and resource name.
	RunID string
	// Labels are added to every resource (e.g. sandbox.LabelProject).
	Labels map[string]string
	// LockPath is the run's lock file (see internal/runlock); its absolute
	// path is stored in the dev.steward.lock label for Sweep.
	LockPath string
	// Log receives progress lines (image builds, network setup). nil = discard.
	Log io.Writer
	// InContainer says Steward itself runs in a container that reaches the
	// host's daemon through its socket: sandboxes are then siblings and the
	// gateway is reached through a relay (see docs/docker.md).
	InContainer bool
	// SelfContainer is Steward's own container id or name when InContainer;
	// "" = the hostname, as Docker sets it.
	SelfContainer string
	// RelayCommand is the command (inside an image FROM scratch holding
	// RelayBinary) that runs RunRelay: it gets LISTEN and TARGET appended.
	// Default: ["/steward", RelayArg] (RelayBinary is copied to /steward in the relay image).
	RelayCommand []string
	// RelayBinary is a static executable that serves RelayCommand; default
	// os.Executable() (the steward binary, built with CGO_ENABLED=0).
	RelayBinary string
	// EgressCommand and EgressBinary are RelayCommand and RelayBinary for
	// the egress proxies of network: allowlist sandboxes (egress.go): the
	// command gets LISTEN and SPEC appended; default ["/steward", "__egress"].
	EgressCommand []string
	EgressBinary  string
	// EgressAllow are private prefixes the egress proxies may dial
	// (STEWARD_EGRESS_ALLOW); EgressNetwork the network they go out
	// through (STEWARD_EGRESS_NETWORK; "" = the run's outbound network).
	EgressAllow   []netip.Prefix
	EgressNetwork string
	// DaemonJSONPath overrides where the daemon configuration is read; "" = /etc/docker/daemon.json.
	DaemonJSONPath string
	// Client is an existing client to use; nil = client.FromEnv with API version negotiation.
	Client *client.Client
	// Liveness judges which runs are dead (for Sweep and the doctor's
	// facts) and names this process as the owner of what it creates. It is
	// injected (the CLI passes runlock.Liveness{}), as for the local sweep,
	// so the provider knows nothing of locks. nil = no run is ever proven
	// dead: Sweep removes nothing.
	Liveness Liveness
}

// Liveness tells dead runs from live ones (sandbox.Liveness).
type Liveness = sandbox.Liveness

// ErrUnproven is wrapped by the reasons a run's resources are left alone.
var ErrUnproven = errors.New("cannot prove the run dead")

// noLiveness proves nothing dead.
type noLiveness struct{}

func (noLiveness) Owner() string { return "" }
func (noLiveness) Judge(string, string) (bool, error) {
	return false, fmt.Errorf("%w: no liveness judge was given", ErrUnproven)
}

// Provider is the Docker sandbox provider.
type Provider struct {
	cli   *client.Client
	opts  Options
	lock  string
	scope string
	owner string // Liveness.Owner: this process, encoded
	live  Liveness
	log   io.Writer

	mu       sync.Mutex
	builds   map[string]*buildOnce // by content hash
	netGW    *runNet               // gateway-only network
	netOut   *runNet               // bridge-mode network
	gateway  *sandbox.GatewayAddr
	relayID  string
	adopted  bool // the networks are another provider's (AdoptShared): not ours to remove
	orphaned bool // the supervisor that made the adopted networks is gone (SupervisorGone)
	// abandoned names the containers whose create the caller gave up on
	// (its context ended while the daemon worked): the daemon may make one
	// after the call returned, so Finalize removes them by name again.
	abandoned []string
	diskMode  int32 // how disk quotas are enforced (disk.go), learned at the first Create

	egressMu  sync.Mutex
	egressRef string   // the egress proxy's image, once built
	hostAddrs []string // the host's own addresses, learnt by a probe (in a container)

	tplMu        sync.Mutex
	emptyWorkdir map[string]bool // image and workdir with nothing to seed (disk.go)
}

type runNet struct {
	ID, Name string
	Gateway  netip.Addr
}

var _ sandbox.Provider = (*Provider)(nil)

// NewClient returns a Docker client from the environment with API version negotiation.
func NewClient() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("create docker client: %w", err)
	}
	return c, nil
}

// Available reports whether a Docker daemon answers within a short time, so
// that the runner can default to the docker provider.
func Available(ctx context.Context) bool {
	c, err := NewClient()
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.Ping(ctx)
	return err == nil
}

// New connects to the daemon and checks that it answers.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.RunID == "" {
		opts.RunID = randomID(6)
	}
	cli := opts.Client
	if cli == nil {
		var err error
		if cli, err = NewClient(); err != nil {
			return nil, err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("connect to docker daemon: %w", err))
	}
	cli.NegotiateAPIVersion(ctx)
	lock := ""
	if opts.LockPath != "" {
		abs, err := filepath.Abs(opts.LockPath)
		if err != nil {
			return nil, fmt.Errorf("resolve lock path: %w", err)
		}
		lock = abs
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	scope := "host:" + hostnameOr("")
	if opts.InContainer {
		if ins, err := cli.ContainerInspect(pctx, hostnameOr(opts.SelfContainer)); err == nil {
			scope = "container:" + ins.ID
		}
	}
	live := opts.Liveness
	if live == nil {
		live = noLiveness{}
	}
	return &Provider{cli: cli, opts: opts, lock: lock, scope: scope, owner: live.Owner(), live: live, log: log, builds: map[string]*buildOnce{}}, nil
}

// Client is the provider's Docker client.
func (p *Provider) Client() *client.Client { return p.cli }

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "docker" }

// labels are the labels of a resource of this run.
func (p *Provider) labels(task, role string, extra map[string]string) map[string]string {
	l := map[string]string{}
	for k, v := range p.opts.Labels {
		l[k] = v
	}
	for k, v := range extra {
		l[k] = v
	}
	l[sandbox.LabelManaged] = "true"
	l[sandbox.LabelRun] = p.opts.RunID
	if task != "" {
		l[sandbox.LabelTask] = task
	}
	l[LabelLock] = p.lock
	l[LabelLockScope] = p.scope
	l[LabelOwner] = p.owner
	if role != "" {
		l[labelRole] = role
	}
	return l
}

var nameBad = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

func dockerName(parts ...string) string {
	s := nameBad.ReplaceAllString(strings.Join(parts, "-"), "_")
	s = strings.Trim(s, "_.-")
	if len(s) > 120 {
		s = s[:120]
	}
	return "steward-" + s
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func networkMode(s string) string {
	if s == "" {
		return NetworkGateway
	}
	return s
}

// RunsSampleEnvironments implements sandbox.SampleEnvironments: a spec per
// sample (image or build, limits, network, a writable root), and sandboxes
// that resume for Harbor's shared verifier.
func (p *Provider) RunsSampleEnvironments() bool { return true }

var _ sandbox.SampleEnvironments = (*Provider)(nil)

// Prepare checks or builds the specs' images and creates the run's networks.
// Specs with the same build directory content are built once (by hash).
func (p *Provider) Prepare(ctx context.Context, specs []*sandbox.Spec) error {
	var wantBridge bool
	for _, s := range specs {
		switch networkMode(s.Network) {
		case NetworkGateway, NetworkIsolated:
		case NetworkBridge:
			wantBridge = true
		case NetworkAllowlist:
			if err := checkAllowedHosts(s); err != nil {
				return fmt.Errorf("prepare %w", err)
			}
			if _, err := p.egressImage(ctx); err != nil {
				return fmt.Errorf("prepare task %s: %w", s.Task, err)
			}
			wantBridge = wantBridge || p.opts.EgressNetwork == ""
		default:
			return fmt.Errorf("prepare task %s: unknown network %q (want gateway, bridge, isolated or allowlist)", s.Task, s.Network)
		}
		if s.Build != "" {
			bctx, cancel := ctx, context.CancelFunc(func() {})
			if s.BuildTimeout > 0 {
				bctx, cancel = context.WithTimeout(ctx, s.BuildTimeout)
			}
			ref, err := p.buildImageFile(bctx, s.Build, s.Dockerfile, s.Task, s.BuildNetwork)
			if err == nil {
				err = p.prepareServices(bctx, s)
			}
			timedOut := bctx.Err() != nil && ctx.Err() == nil
			cancel()
			if err != nil {
				if timedOut {
					return fmt.Errorf("prepare task %s: build image from %s: not built within its build timeout %s: %w", s.Task, s.Build, s.BuildTimeout, err)
				}
				return fmt.Errorf("prepare task %s: %w", s.Task, err)
			}
			s.Image = ref
			continue
		}
		if err := p.checkImage(ctx, s.Image); err != nil {
			return fmt.Errorf("prepare task %s: %w", s.Task, err)
		}
		if len(s.Services) > 0 {
			bctx, cancel := ctx, context.CancelFunc(func() {})
			if s.BuildTimeout > 0 {
				bctx, cancel = context.WithTimeout(ctx, s.BuildTimeout)
			}
			err := p.prepareServices(bctx, s)
			cancel()
			if err != nil {
				return fmt.Errorf("prepare task %s: %w", s.Task, err)
			}
		}
	}
	p.warnUnboundedRoots(ctx, specs)
	if _, err := p.ensureNet(ctx, false); err != nil {
		return err
	}
	if wantBridge {
		if _, err := p.ensureNet(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) checkImage(ctx context.Context, ref string) error {
	if ref == "" {
		return errors.New("no image (set image: or build:)")
	}
	_, err := p.cli.ImageInspect(ctx, ref)
	if err == nil {
		return nil
	}
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("image %q is not present on the Docker daemon: build it (docker build -t %s DIR) or pull it (docker pull %s), or use build: with a Dockerfile directory", ref, ref, ref)
	}
	return sandbox.InfraError(fmt.Errorf("inspect image %s: %w", ref, err))
}

// ensureNet creates (once) the run's gateway-only network or its bridge-mode network.
// Both are bridges with inter-container communication disabled, so sandboxes on
// them cannot reach each other; the gateway-only one is internal (no route out).
func (p *Provider) ensureNet(ctx context.Context, outbound bool) (*runNet, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slot := &p.netGW
	kind := "gw"
	if outbound {
		slot, kind = &p.netOut, "out"
	}
	if *slot != nil {
		return *slot, nil
	}
	// One provider per run makes the networks (the supervisor's); worker
	// processes adopt them (AdoptShared). A random part keeps names unique.
	n, err := p.createNetwork(ctx, dockerName(p.opts.RunID, kind, randomID(3)), !outbound, false, "", "network-"+kind)
	if err != nil {
		return nil, err
	}
	*slot = n
	fmt.Fprintf(p.log, "docker: created network %s (%s, gateway %s)\n", n.Name, map[bool]string{true: "internal", false: "outbound"}[!outbound], n.Gateway)
	return n, nil
}

func (p *Provider) createNetwork(ctx context.Context, name string, internal, icc bool, task, role string) (*runNet, error) {
	opts := map[string]string{"com.docker.network.bridge.enable_icc": fmt.Sprint(icc)}
	resp, err := p.cli.NetworkCreate(ctx, name, network.CreateOptions{
		Driver:   "bridge",
		Internal: internal,
		Options:  opts,
		Labels:   p.labels(task, role, nil),
	})
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("create network %s: %w", name, err))
	}
	ins, err := p.cli.NetworkInspect(ctx, resp.ID, network.InspectOptions{})
	if err != nil {
		_ = p.cli.NetworkRemove(context.WithoutCancel(ctx), resp.ID)
		return nil, sandbox.InfraError(fmt.Errorf("inspect network %s: %w", name, err))
	}
	n := &runNet{ID: resp.ID, Name: name}
	for _, c := range ins.IPAM.Config {
		if a, err := netip.ParseAddr(c.Gateway); err == nil && a.Is4() {
			n.Gateway = a
		}
	}
	if !n.Gateway.IsValid() {
		_ = p.cli.NetworkRemove(context.WithoutCancel(ctx), resp.ID)
		return nil, sandbox.InfraError(fmt.Errorf("create network %s: no IPv4 gateway", name))
	}
	return n, nil
}

// Gateway says where the model gateway must listen. On the host it is the
// host side of the run's gateway network; sandboxes dial that address, which
// the kernel delivers locally (INPUT), past the bridge isolation rules. When
// Steward runs in a container, a relay on the host network listens on that
// address and forwards to Steward's own container (see docs/docker.md).
func (p *Provider) Gateway(ctx context.Context) (sandbox.GatewayAddr, error) {
	p.mu.Lock()
	if p.gateway != nil {
		g := *p.gateway
		p.mu.Unlock()
		return g, nil
	}
	p.mu.Unlock()
	n, err := p.ensureNet(ctx, false)
	if err != nil {
		return sandbox.GatewayAddr{}, err
	}
	var g sandbox.GatewayAddr
	if !p.opts.InContainer {
		g = sandbox.GatewayAddr{Listen: net.JoinHostPort(n.Gateway.String(), "0"), Host: n.Gateway.String()}
	} else {
		g, err = p.startRelay(ctx, n)
		if err != nil {
			return sandbox.GatewayAddr{}, err
		}
	}
	p.mu.Lock()
	p.gateway = &g
	p.mu.Unlock()
	return g, nil
}

// SupervisorGone tells a worker's provider that the supervisor, which made
// the run's shared networks and would remove them, is gone: Finalize removes
// them too (every worker of the run is cleaning up by then; whichever gets
// there first removes them, the others find them gone).
func (p *Provider) SupervisorGone() {
	p.mu.Lock()
	p.orphaned = true
	p.mu.Unlock()
}

// Finalize removes the run's networks and relay. Sandboxes must be closed first;
// any still attached to a run network are removed with it. It works with a
// cancelled ctx.
func (p *Provider) Finalize(ctx context.Context) error {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	var errs []error
	p.mu.Lock()
	relay := p.relayID
	p.relayID = ""
	nets := []*runNet{p.netGW, p.netOut}
	if p.adopted && !p.orphaned {
		nets = nil // the supervisor's provider made them and removes them
	}
	p.netGW, p.netOut, p.gateway, p.adopted, p.orphaned = nil, nil, nil, false, false
	abandoned := p.abandoned
	p.abandoned = nil
	p.mu.Unlock()
	for _, name := range abandoned {
		if err := p.removeContainer(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	if relay != "" {
		if err := p.removeContainer(ctx, relay); err != nil {
			errs = append(errs, err)
		}
	}
	// Sandboxes never closed (e.g. a create interrupted after the daemon made
	// the container) cannot outlive the run.
	f := runFilter(p.opts.RunID)
	f.Add("label", LabelLock+"="+p.lock)
	if left, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range left {
			if err := p.removeContainer(ctx, c.ID); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		errs = append(errs, fmt.Errorf("list leftover sandboxes: %w", err))
	}
	for _, role := range []string{roleComposeNet, roleEgressNet} {
		if err := p.removeLeftoverNets(ctx, role); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range nets {
		if n == nil {
			continue
		}
		if err := p.removeNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finalize docker provider: %w", err)
	}
	return nil
}

// removeNetwork disconnects whatever is still attached and removes the network.
func (p *Provider) removeNetwork(ctx context.Context, id string) error {
	ins, err := p.cli.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("inspect network %s: %w", id, err)
	}
	for cid := range ins.Containers {
		if err := p.cli.NetworkDisconnect(ctx, id, cid, true); err != nil && !cerrdefs.IsNotFound(err) {
			// A sandbox of this run still attached: remove it, it cannot outlive the run.
			_ = p.removeContainer(ctx, cid)
		}
	}
	if err := p.cli.NetworkRemove(ctx, id); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove network %s: %w", ins.Name, err)
	}
	return nil
}

// cleanupCtx detaches from a possibly cancelled parent and bounds the cleanup.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
}

func runFilter(runID string) filters.Args {
	return filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"),
		filters.Arg("label", sandbox.LabelRun+"="+runID),
	)
}

func hostnameOr(s string) string {
	if s != "" {
		return s
	}
	h, _ := os.Hostname()
	return h
}
