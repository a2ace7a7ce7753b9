package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/steward-evals/steward/internal/sandbox"
)

// idleScript keeps a sandbox alive with nothing but /bin/sh: it waits on the
// container's stdin, which the daemon keeps open (OpenStdin) and never writes.
const idleScript = "while read -r _; do :; done"

// Create makes and starts a sandbox for spec (after Prepare).
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return p.create(ctx, spec, true)
}

// create makes and starts a sandbox; seed copies what the image holds at
// the workdir into a tmpfs workdir (disk.go), as Docker does for a volume
// (a grader gets the agent's workdir instead).
func (p *Provider) create(ctx context.Context, spec sandbox.Spec, seed bool) (sandbox.Sandbox, error) {
	if spec.Image == "" {
		return nil, fmt.Errorf("create sandbox for task %s: no image (was Prepare called?)", spec.Task)
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = DefaultWorkdir
	}
	if !path.IsAbs(workdir) {
		return nil, fmt.Errorf("create sandbox for task %s: workdir %q is not absolute", spec.Task, workdir)
	}
	cpus, mem, pids := limitsOr(spec.CPUs, spec.Memory, spec.PIDs)
	id := randomID(4)
	name := dockerName(p.opts.RunID, spec.Task, id)
	labels := p.labels(spec.Task, "sandbox", spec.Labels)

	var netName string
	var ownNet *runNet
	var eg *egressProxy // network: allowlist (egress.go)
	var proxyEnv []string
	switch networkMode(spec.Network) {
	case NetworkGateway:
		n, err := p.ensureNet(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		netName = n.Name
	case NetworkAllowlist:
		n, err := p.ensureNet(ctx, false)
		if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		netName = n.Name
		if eg, err = p.startEgress(ctx, spec, name); err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		proxyEnv = p.proxyEnv(eg, n, spec)
	case NetworkBridge:
		n, err := p.ensureNet(ctx, true)
		if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		netName = n.Name
	case NetworkIsolated:
		n, err := p.createNetwork(ctx, name, true, true, spec.Task, "network-isolated")
		if err != nil {
			return nil, fmt.Errorf("create sandbox: %w", err)
		}
		ownNet, netName = n, n.Name
	default:
		return nil, fmt.Errorf("create sandbox for task %s: unknown network %q", spec.Task, spec.Network)
	}

	env := make([]string, 0, len(spec.Env)+len(proxyEnv))
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if proxyEnv != nil && isProxyVar(k) {
			continue // the egress proxy's own win
		}
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, proxyEnv...)
	caps := append([]string(nil), spec.CapAdd...)
	init := true
	cfg := &container.Config{
		Image:      spec.Image,
		Cmd:        []string{"/bin/sh", "-c", idleScript},
		Entrypoint: []string{},
		Env:        env,
		WorkingDir: workdir,
		Labels:     labels,
		OpenStdin:  true,
		Hostname:   "sandbox",
	}
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		Init:        &init,
		CapDrop:     []string{"ALL"},
		CapAdd:      caps,
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			NanoCPUs:   int64(cpus * 1e9),
			Memory:     mem,
			MemorySwap: mem, // no swap beyond the limit
			PidsLimit:  &pids,
		},
		LogConfig: container.LogConfig{Type: "none"},
	}
	nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {}}}
	fail := func(err error) (sandbox.Sandbox, error) {
		if ownNet != nil || eg != nil {
			cctx, cancel := cleanupCtx(ctx)
			if ownNet != nil {
				_ = p.removeNetwork(cctx, ownNet.ID)
			}
			_ = p.stopEgress(cctx, eg)
			cancel()
		}
		return nil, err
	}
	disk := spec.Disk
	if disk <= 0 {
		disk = DefaultDisk
	}
	resp, roots, err := p.createWithDisk(ctx, cfg, hc, nc, name, disk, workdir, labels, spec.WritableRoot)
	if err != nil && ctx.Err() != nil {
		// Given up while the daemon worked (an abort, a supervisor gone):
		// the daemon may have made the container, or make it yet. Nothing
		// holds its id, so it goes by name, now and at Finalize.
		p.abandon(ctx, name)
		return fail(fmt.Errorf("create sandbox for task %s: %w", spec.Task, ctx.Err()))
	}
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fail(fmt.Errorf("create sandbox for task %s: %w", spec.Task, p.checkImage(ctx, spec.Image)))
		}
		return fail(sandbox.InfraError(fmt.Errorf("create sandbox for task %s: %w", spec.Task, err)))
	}
	sb := &Sandbox{p: p, id: resp.ID, name: name, workdir: workdir, net: ownNet, egress: eg, memory: mem, spec: spec, disk: disk, roots: roots, writableRoot: spec.WritableRoot && roots != nil}
	if eg != nil {
		// The proxy's network: the sandbox's only way to it.
		if err := p.cli.NetworkConnect(ctx, eg.net.ID, sb.id, &network.EndpointSettings{}); err != nil {
			_ = sb.Close(ctx)
			return nil, sandbox.InfraError(fmt.Errorf("connect sandbox %s to its egress proxy's network: %w", name, err))
		}
	}
	if len(spec.Services) > 0 {
		// A compose environment: the other services are up (and healthy) before main starts.
		if err := p.composeUp(ctx, spec, id, sb); err != nil {
			_ = sb.Close(ctx)
			return nil, err
		}
	}
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = sb.Close(ctx)
		return nil, sandbox.InfraError(fmt.Errorf("start sandbox %s: %w", name, err))
	}
	ins, err := p.cli.ContainerInspect(ctx, resp.ID)
	if err != nil {
		_ = sb.Close(ctx)
		return nil, sandbox.InfraError(fmt.Errorf("inspect sandbox %s: %w", name, err))
	}
	if ins.NetworkSettings != nil {
		if ep := ins.NetworkSettings.Networks[netName]; ep != nil {
			sb.ip, _ = netip.ParseAddr(ep.IPAddress)
		}
	}
	if seed && roots != nil {
		if err := p.seedWorkdir(ctx, spec.Image, sb); err != nil {
			_ = sb.Close(ctx)
			return nil, err
		}
	}
	return sb, nil
}

// GatewayPeer is the address the gateway sees this sandbox's connections
// come from (its IP on its network; through the in-container relay, the
// address its PROXY line names), so that its token can be bound to it.
func (s *Sandbox) GatewayPeer() (netip.Addr, bool) {
	return s.ip, s.ip.IsValid()
}

// Sandbox is one Docker container.
type Sandbox struct {
	p       *Provider
	id      string
	name    string
	workdir string
	net     *runNet // own network (network: isolated)
	// egress is a network: allowlist sandbox's proxy (egress.go), removed by Close.
	egress *egressProxy
	// compose and services are a compose environment's network and its
	// other services' containers (compose.go), removed by Close.
	compose  *runNet
	services []string
	memory   int64
	ip       netip.Addr   // its address on its network: where its gateway connections come from
	spec     sandbox.Spec // what Grader makes a fresh container of
	disk     int64
	// roots are the writable mounts of a read-only-root sandbox (disk.go);
	// nil when the whole filesystem is writable.
	roots []string
	// writableRoot: roots are the bounded paths of a tmpfs-mode sandbox
	// whose root is writable too (sandbox.Spec.WritableRoot): the archive
	// API writes elsewhere at "/".
	writableRoot bool

	mu       sync.Mutex
	state    runState // running, frozen (settled) or stopped
	ooms     int64    // oom_kill count last seen
	closed   bool
	closeErr error
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID is the container id.
func (s *Sandbox) ID() string { return s.id }

// Name is the container name.
func (s *Sandbox) Name() string { return s.name }

// Workdir implements sandbox.Sandbox.
func (s *Sandbox) Workdir() string { return s.workdir }

// StewardDir implements sandbox.Sandbox: BinDir, a tmpfs volume of its own
// under a read-only root, else on the writable root (applyDisk).
func (s *Sandbox) StewardDir() string { return BinDir }

func (s *Sandbox) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.workdir, p)
}

// CopyIn writes files through the archive API, creating parent directories.
// A read-only-root sandbox takes one archive per writable mount.
func (s *Sandbox) CopyIn(ctx context.Context, files []sandbox.File) error {
	if len(files) == 0 {
		return nil
	}
	type archive struct {
		buf  bytes.Buffer
		tw   *tar.Writer
		dirs map[string]bool
	}
	byRoot := map[string]*archive{}
	var order []string
	now := time.Now()
	for _, f := range files {
		full := s.abs(f.Path)
		if full == "/" {
			return fmt.Errorf("copy into sandbox: bad path %q", f.Path)
		}
		root, err := s.rootFor(full)
		if err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
		if full == root {
			return fmt.Errorf("copy into sandbox: bad path %q", f.Path)
		}
		a := byRoot[root]
		if a == nil {
			a = &archive{dirs: map[string]bool{}}
			a.tw = tar.NewWriter(&a.buf)
			byRoot[root] = a
			order = append(order, root)
		}
		var parents []string
		for d := path.Dir(full); d != root && d != "/" && !a.dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			a.dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: relTo(root, parents[i]) + "/", Mode: 0o755, ModTime: now}); err != nil {
				return fmt.Errorf("copy into sandbox: %w", err)
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: relTo(root, full), Mode: mode, Size: int64(len(f.Data)), ModTime: now}); err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
		if _, err := a.tw.Write(f.Data); err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
	}
	for _, root := range order {
		a := byRoot[root]
		if err := a.tw.Close(); err != nil {
			return fmt.Errorf("copy into sandbox: %w", err)
		}
		if err := s.p.cli.CopyToContainer(ctx, s.id, root, &a.buf, container.CopyToContainerOptions{}); err != nil {
			return sandbox.InfraError(fmt.Errorf("copy into sandbox %s: %w", s.name, err))
		}
	}
	return nil
}

// MaxCopyOut bounds what CopyOut reads from one file.
const MaxCopyOut = sandbox.MaxCopyOut

// CopyOut reads one regular file through the archive API.
func (s *Sandbox) CopyOut(ctx context.Context, p string) ([]byte, error) {
	full := s.abs(p)
	rc, st, err := s.p.cli.CopyFromContainer(ctx, s.id, full)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("copy %s out of sandbox: no such file", full)
		}
		return nil, sandbox.InfraError(fmt.Errorf("copy %s out of sandbox %s: %w", full, s.name, err))
	}
	defer rc.Close()
	if st.Mode.IsDir() {
		return nil, fmt.Errorf("copy %s out of sandbox: is a directory", full)
	}
	return sandbox.ReadTarFile(rc, full, false)
}

// Exec runs spec.Shell with /bin/sh -c in the workdir.
func (s *Sandbox) Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.ExecResult, error) {
	start := time.Now()
	env := make([]string, 0, len(spec.Env)+1)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env, "STEWARD_SHELL="+spec.Shell)
	// The wrapper reports its pid (a process group leader: docker exec starts a
	// new group) on stderr, then replaces itself with the command's shell.
	wrapper := `printf '\000steward-pid:%s\n' "$$" >&2; c=$STEWARD_SHELL; unset STEWARD_SHELL; exec /bin/sh -c "$c"`
	ec, err := s.p.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd:          []string{"/bin/sh", "-c", wrapper},
		Env:          env,
		WorkingDir:   s.workdir,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return sandbox.ExecResult{}, s.execErr("create exec", err)
	}
	// The daemon must start the command within its timeout; a daemon that
	// does not answer is the infrastructure's fault, not the agent's.
	waitCtx := ctx
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	hj, err := s.attach(ctx, waitCtx, ec.ID)
	if err != nil && ctx.Err() == nil && waitCtx.Err() != nil {
		return sandbox.ExecResult{}, sandbox.InfraError(fmt.Errorf("the docker daemon did not start the command within its timeout %s: %w", spec.Timeout, err))
	}
	if err != nil {
		if res, ok := s.atPIDLimit(ctx, err, start); ok {
			return res, nil
		}
		return sandbox.ExecResult{}, s.execErr("attach exec", err)
	}
	defer hj.Close()
	go func() {
		if len(spec.Stdin) > 0 {
			_, _ = hj.Conn.Write(spec.Stdin)
		}
		_ = hj.CloseWrite()
	}()

	out := sandbox.NewExecOutput(spec.MaxOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out.Stdout, out.Stderr, hj.Reader)
		copied <- err
	}()
	term := func(pid int) {
		// The deadline: SIGTERM to the command's group; it has spec.Grace to end.
		kctx, cancel := cleanupCtx(ctx)
		_, _ = s.run(kctx, fmt.Sprintf("kill -TERM -- -%d 2>/dev/null || kill -TERM %d 2>/dev/null; true", pid, pid))
		cancel()
	}
	err, finished, timedOut := sandbox.WaitExecGrace(ctx, spec.Timeout, spec.Grace, copied, func(err error) bool { return err == nil }, out.Stderr.PID(), term, func(pid int) {
		kctx, cancel := cleanupCtx(ctx)
		s.killGroup(kctx, pid)
		cancel()
		hj.Close()
	})
	res := sandbox.ExecResult{TimedOut: timedOut}
	if finished {
		if err != nil {
			return sandbox.ExecResult{}, s.execErr("read exec output", err)
		}
		ctx = context.WithoutCancel(ctx) // it ended: not interrupted, whatever ctx did since
	}
	out.Fill(&res)
	res.Duration = time.Since(start)
	if ctx.Err() != nil && !res.TimedOut {
		return res, fmt.Errorf("exec in sandbox %s: %w", s.name, ctx.Err())
	}
	ictx, cancel := cleanupCtx(ctx)
	defer cancel()
	ins, err := s.p.cli.ContainerExecInspect(ictx, ec.ID)
	for i := 0; err == nil && ins.Running && i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		ins, err = s.p.cli.ContainerExecInspect(ictx, ec.ID)
	}
	if err != nil {
		return res, s.execErr("inspect exec", err)
	}
	res.ExitCode = ins.ExitCode
	if res.TimedOut && !out.Stderr.Wrote() {
		// Not a word from the wrapper, which speaks first: the daemon's
		// stream stalled (or never started), so the deadline says nothing
		// of the command, which must not be judged on it.
		return res, sandbox.InfraError(fmt.Errorf("the docker daemon sent none of the command's output within its timeout %s (its exec stream stalled)", spec.Timeout))
	}
	oci := []byte("OCI runtime exec failed")
	if ins.ExitCode == 126 && (bytes.Contains(res.Stdout, oci) || bytes.Contains(res.Stderr, oci)) || ins.ExitCode != 0 && !out.Stderr.Started() {
		// The process never started (the runtime said so, or the wrapper
		// never told its pid: runc's init, refused a thread, crashed with
		// exit 2 and its Go dump as the stderr): the sandbox may be at its
		// PID limit.
		cause := bytes.TrimSpace(append(append([]byte(nil), res.Stdout...), res.Stderr...))
		if r2, ok := s.atPIDLimit(ictx, fmt.Errorf("%s", cause), start); ok {
			return r2, nil
		}
	}
	if res.TimedOut && res.ExitCode == 0 {
		res.ExitCode = 137
	}
	if !res.TimedOut && (res.ExitCode == 137 || res.ExitCode == 128+9) {
		res.OOMKilled = s.oomSince(ictx)
	}
	if !res.OOMKilled && !res.TimedOut && res.ExitCode != 0 {
		res.DiskFull = s.diskFull(ictx)
	}
	return res, nil
}

// atPIDLimit turns an exec that could not start because the sandbox is at its
// PID limit into a failed command (exit 126): the task exhausted its own
// limit, which is not the infrastructure's fault.
func (s *Sandbox) atPIDLimit(ctx context.Context, cause error, start time.Time) (sandbox.ExecResult, bool) {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	st, err := s.p.cli.ContainerStatsOneShot(ctx, s.id)
	if err != nil {
		return sandbox.ExecResult{}, false
	}
	defer st.Body.Close()
	var stats container.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&stats); err != nil {
		return sandbox.ExecResult{}, false
	}
	cur, lim := stats.PidsStats.Current, stats.PidsStats.Limit
	if lim == 0 || cur+2 < lim {
		return sandbox.ExecResult{}, false
	}
	msg := fmt.Sprintf("steward: the command could not start: the sandbox is at its PID limit (%d of %d processes): %v\n", cur, lim, cause)
	return sandbox.ExecResult{ExitCode: 126, Stderr: []byte(msg), Duration: time.Since(start)}, true
}

func (s *Sandbox) execErr(what string, err error) error {
	if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
		// The container is gone or stopped: maybe its init was OOM-killed.
		return sandbox.InfraError(fmt.Errorf("%s in sandbox %s (container not running): %w", what, s.name, err))
	}
	return sandbox.InfraError(fmt.Errorf("%s in sandbox %s: %w", what, s.name, err))
}

// killGroup kills the process group of a timed-out command from a second exec.
// Without a pid (the wrapper had not reported yet) it kills every process but
// the sandbox's init and idle shell.
func (s *Sandbox) killGroup(ctx context.Context, pid int) {
	script := killAllScript
	if pid > 1 {
		script = fmt.Sprintf("kill -KILL -- -%d 2>/dev/null || kill -KILL %d 2>/dev/null; true", pid, pid)
	}
	_, _ = s.run(ctx, script)
}

// killAllScript kills every process except init (1), the idle shell (the
// oldest child of init) and itself, in a few rounds so forking loops die too.
const killAllScript = `me=$$; idle=0
for d in /proc/[0-9]*; do read -r p c s pp r < $d/stat 2>/dev/null || continue; if [ "$pp" = 1 ] && { [ $idle = 0 ] || [ $p -lt $idle ]; }; then idle=$p; fi; done
for round in 1 2 3 4 5; do left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; case $p in 1|$me|$idle) continue;; esac; kill -KILL $p 2>/dev/null && left=1; done; [ $left = 0 ] && break; done; true`

// run executes a short internal script and returns its stdout.
func (s *Sandbox) run(ctx context.Context, script string, args ...string) (string, error) {
	ec, err := s.p.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd: append([]string{"/bin/sh", "-c", script}, args...), AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return "", s.execErr("create exec", err)
	}
	hj, err := s.attach(ctx, ctx, ec.ID)
	if err != nil {
		return "", s.execErr("attach exec", err)
	}
	defer hj.Close()
	out, errb := sandbox.NewCapped(1<<20), sandbox.NewCapped(1<<20)
	if _, err := stdcopy.StdCopy(out, errb, hj.Reader); err != nil {
		return "", s.execErr("read exec output", err)
	}
	ins, err := s.p.cli.ContainerExecInspect(ctx, ec.ID)
	if err != nil {
		return "", s.execErr("inspect exec", err)
	}
	if ins.ExitCode != 0 {
		return out.String(), fmt.Errorf("sandbox %s: internal command exited %d: %s", s.name, ins.ExitCode, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// oomScript prints the memory cgroup's oom_kill counter (cgroup v1 or v2).
const oomScript = `for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do [ -r $f ] || continue; while read -r k v; do [ "$k" = oom_kill ] && echo $v; done < $f; exit 0; done; echo -1`

// oomSince reports whether the memory limit killed a process since the last check.
func (s *Sandbox) oomSince(ctx context.Context) bool {
	out, err := s.run(ctx, oomScript)
	n, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || perr != nil || n < 0 {
		// No counter readable: fall back on the container's state.
		ins, ierr := s.p.cli.ContainerInspect(ctx, s.id)
		return ierr == nil && ins.State != nil && ins.State.OOMKilled
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := n > s.ooms
	s.ooms = n
	return grew
}

// Reset kills whatever the last attempt left running and empties the workdir.
// A sandbox at its PID limit (a fork bomb still churning) may refuse the first
// exec, so it is tried a few times.
func (s *Sandbox) Reset(ctx context.Context) error {
	var err error
	for try := 0; try < 4; try++ {
		if err = s.reset(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try+1) * 250 * time.Millisecond):
		}
	}
	return err
}

func (s *Sandbox) reset(ctx context.Context) error {
	if err := s.quiesce(ctx); err != nil {
		return fmt.Errorf("reset sandbox: %w", err)
	}
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state == stopped {
		// Something the last attempt left could only be ended by stopping
		// the container, which emptied its tmpfs paths: not reused.
		return sandbox.InfraError(fmt.Errorf("reset sandbox %s: a process of the last attempt survived the kill; the sandbox was stopped and is not reused", s.name))
	}
	// The workdir may be a mount point (disk.go): it stays, emptied.
	script := `cd / && { rm -rf -- "$STEWARD_WD" 2>/dev/null; mkdir -p -- "$STEWARD_WD" && cd -- "$STEWARD_WD" && [ -z "$(ls -A)" ]; }`
	ec, err := s.p.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", script}, Env: []string{"STEWARD_WD=" + s.workdir},
		AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return fmt.Errorf("reset sandbox: %w", s.execErr("create exec", err))
	}
	hj, err := s.attach(ctx, ctx, ec.ID)
	if err != nil {
		return fmt.Errorf("reset sandbox: %w", s.execErr("attach exec", err))
	}
	defer hj.Close()
	errb := sandbox.NewCapped(64 << 10)
	if _, err := stdcopy.StdCopy(io.Discard, errb, hj.Reader); err != nil {
		return fmt.Errorf("reset sandbox: %w", s.execErr("read exec output", err))
	}
	ins, err := s.p.cli.ContainerExecInspect(ctx, ec.ID)
	if err != nil {
		return fmt.Errorf("reset sandbox: %w", s.execErr("inspect exec", err))
	}
	if ins.ExitCode != 0 {
		return sandbox.InfraError(fmt.Errorf("reset sandbox %s: exit %d: %s (the image needs /bin/sh, rm and mkdir)", s.name, ins.ExitCode, strings.TrimSpace(errb.String())))
	}
	return nil
}

// Close force-removes the container with its volumes (and its own network).
// It works with a cancelled ctx and is safe to call twice.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.closeErr
	}
	s.closed = true
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	var errs []error
	if err := s.p.removeContainer(cctx, s.id); err != nil {
		errs = append(errs, err)
	}
	if s.net != nil {
		if err := s.p.removeNetwork(cctx, s.net.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.p.composeDown(cctx, s.services, s.compose); err != nil {
		errs = append(errs, err)
	}
	if err := s.p.stopEgress(cctx, s.egress); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		s.closeErr = fmt.Errorf("close sandbox %s: %w", s.name, err)
	}
	return s.closeErr
}

// abandon removes the container a create that was given up on may have
// made, and notes its name for Finalize (the daemon may finish it later).
// The daemon goes on making a container whose request was abandoned, and
// lists it before it can be removed (a remove meanwhile answers "no such
// container"), so the container is looked for by name until it is gone:
// for at most abandonWait once seen, or abandonLook if it never shows.
func (p *Provider) abandon(ctx context.Context, name string) {
	p.mu.Lock()
	p.abandoned = append(p.abandoned, name)
	p.mu.Unlock()
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	byName := container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", "^/"+name+"$"))}
	start, seen := time.Now(), false
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		found, err := p.cli.ContainerList(cctx, byName)
		if err != nil {
			return // Finalize looks again
		}
		if len(found) == 0 && (seen || time.Since(start) > abandonLook) {
			return
		}
		for _, c := range found {
			seen = true
			_ = p.cli.ContainerRemove(cctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		if seen && time.Since(start) > abandonWait {
			return
		}
		select {
		case <-cctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// How long abandon looks for a given-up create's container.
const (
	abandonLook = 2 * time.Second  // before it shows in the daemon's list
	abandonWait = 10 * time.Second // once it has
)

func (p *Provider) removeContainer(ctx context.Context, id string) error {
	var err error
	for i := 0; i < 3; i++ {
		err = p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		// "removal already in progress" and transient daemon errors: try again.
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove container %s: %w", id, err)
		case <-time.After(time.Duration(i+1) * 200 * time.Millisecond):
		}
	}
	return fmt.Errorf("remove container %s: %w", id, err)
}

// capped keeps the first max bytes written and notes whether more came.
func stdcopyDemux(out, errw io.Writer, r io.Reader) (int64, error) {
	return stdcopy.StdCopy(out, errw, r)
}

// attach starts an exec and hijacks its stream. The client reads the
// daemon's answer to the hijack without watching ctx, so a daemon that never
// answers would hang the caller: the wait is bounded by ctx here instead.
func (s *Sandbox) attach(ctx, waitCtx context.Context, execID string) (types.HijackedResponse, error) {
	type result struct {
		hj  types.HijackedResponse
		err error
	}
	ch := make(chan result, 1)
	go func() {
		hj, err := s.p.cli.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{})
		ch <- result{hj, err}
	}()
	select {
	case r := <-ch:
		return r.hj, r.err
	case <-waitCtx.Done():
		go func() {
			// Close the connection if the daemon answers after all.
			if r := <-ch; r.err == nil {
				r.hj.Close()
			}
		}()
		return types.HijackedResponse{}, fmt.Errorf("the daemon did not answer the exec start: %w", waitCtx.Err())
	}
}

// limitsOr is a container's CPU, memory and PID limits, each its default when unset.
func limitsOr(cpus float64, mem, pids int64) (float64, int64, int64) {
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	if mem <= 0 {
		mem = DefaultMemory
	}
	if pids <= 0 {
		pids = DefaultPIDs
	}
	return cpus, mem, pids
}
