package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Compose environments (sandbox.Spec.Services; a Harbor task's
// environment/docker-compose.yaml, docs/harbor.md): the sandbox is the
// project's service main; every other service is a container of its own
// on a network of the attempt's own (inter-container traffic allowed,
// internal unless the spec's network is bridge), where each is reached by
// its service name (a network alias) and main by "main". Main is on the
// run's gateway network too, as every sandbox is, so it reaches the model
// gateway and its token stays bound to its address there. The services are
// hardened as sandboxes are (all capabilities dropped unless cap_add names
// some, no-new-privileges, CPU, memory and PID limits, no mounts, no
// published ports) and labelled as they are, so Close, Finalize and the
// sweepers remove them with the network.

// roleService labels a compose service's container; roleComposeNet its network.
const (
	roleService    = "service"
	roleComposeNet = "network-compose"
	// LabelService names the compose service a container runs.
	LabelService = "dev.steward.service"
)

// DefaultServiceStart bounds a compose project's start (services up and
// healthy) when the spec has no BuildTimeout.
const DefaultServiceStart = 10 * time.Minute

// serviceImage is the image a service runs: its own, or the one Prepare
// built from its context (tagged by content hash, so a worker process that
// did not build it finds it too).
func (p *Provider) serviceImage(ctx context.Context, task string, svc sandbox.Service) (string, error) {
	ref := svc.Image
	if svc.Build != "" && ref == "" {
		sum, err := BuildSum(svc.Build, svc.Dockerfile)
		if err != nil {
			return "", err
		}
		ref = BuildRef(sum)
	}
	if err := p.checkImage(ctx, ref); err != nil {
		return "", fmt.Errorf("service %s of task %s: %w", svc.Name, task, err)
	}
	return ref, nil
}

// prepareServices builds (or checks) the images of a spec's services.
func (p *Provider) prepareServices(ctx context.Context, s *sandbox.Spec) error {
	for i := range s.Services {
		svc := &s.Services[i]
		if svc.Build != "" {
			ref, err := p.buildImageFile(ctx, svc.Build, svc.Dockerfile, s.Task, s.BuildNetwork)
			if err != nil {
				return fmt.Errorf("service %s: %w", svc.Name, err)
			}
			svc.Image = ref
			continue
		}
		if err := p.checkImage(ctx, svc.Image); err != nil {
			return fmt.Errorf("service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// serviceOrder is the services in start order: each after those it
// depends on, otherwise by name. A cycle or an unknown service is an error.
func serviceOrder(svcs []sandbox.Service) ([]sandbox.Service, error) {
	byName := map[string]sandbox.Service{}
	for _, s := range svcs {
		byName[s.Name] = s
	}
	var out []sandbox.Service
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("compose services depend on each other in a cycle: %s", strings.Join(append(path, n), " -> "))
		case 2:
			return nil
		}
		s, ok := byName[n]
		if !ok {
			return fmt.Errorf("compose service %s depends on %s, which is not a service", path[len(path)-1], n)
		}
		state[n] = 1
		for _, d := range slices.Sorted(maps.Keys(s.DependsOn)) {
			if err := visit(d, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		out = append(out, s)
		return nil
	}
	names := make([]string, 0, len(svcs))
	for _, s := range svcs {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// composeUp makes the attempt's compose network, puts main (created, not
// yet started) on it as "main", and starts the other services in order,
// each once those it depends on are started (or healthy, as it says), then
// waits until every service with a health check is healthy, bounded by the
// spec's BuildTimeout. What it made is in sb (Close removes it).
func (p *Provider) composeUp(ctx context.Context, spec sandbox.Spec, id string, sb *Sandbox) error {
	order, err := serviceOrder(spec.Services)
	if err != nil {
		return fmt.Errorf("start compose environment of task %s: %w", spec.Task, err)
	}
	bound := spec.BuildTimeout
	if bound <= 0 {
		bound = DefaultServiceStart
	}
	uctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	internal := networkMode(spec.Network) != NetworkBridge
	n, err := p.createNetwork(uctx, dockerName(p.opts.RunID, spec.Task, id, "compose"), internal, true, spec.Task, roleComposeNet)
	if err != nil {
		return fmt.Errorf("start compose environment of task %s: %w", spec.Task, err)
	}
	sb.mu.Lock()
	sb.compose = n
	sb.mu.Unlock()
	if err := p.cli.NetworkConnect(uctx, n.ID, sb.id, &network.EndpointSettings{Aliases: []string{"main"}}); err != nil {
		return sandbox.InfraError(fmt.Errorf("connect sandbox %s to its compose network: %w", sb.name, err))
	}
	ids := map[string]string{}
	for _, svc := range order {
		for _, d := range slices.Sorted(maps.Keys(svc.DependsOn)) {
			if svc.DependsOn[d] == "service_healthy" {
				if err := p.waitHealthy(uctx, ctx, spec, d, ids[d], bound, true); err != nil {
					return err
				}
			}
		}
		cid, err := p.startService(uctx, spec, id, n, svc)
		if cid != "" {
			ids[svc.Name] = cid
			sb.mu.Lock()
			sb.services = append(sb.services, cid)
			sb.mu.Unlock()
		}
		if err != nil {
			if uctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("compose service %s of task %s: not started within %s (the task's build timeout bounds its environment's start): %w", svc.Name, spec.Task, bound, err)
			}
			return err
		}
	}
	for _, svc := range order {
		if err := p.waitHealthy(uctx, ctx, spec, svc.Name, ids[svc.Name], bound, false); err != nil {
			return err
		}
	}
	return nil
}

// startService creates and starts one service's container.
func (p *Provider) startService(ctx context.Context, spec sandbox.Spec, id string, n *runNet, svc sandbox.Service) (string, error) {
	ref, err := p.serviceImage(ctx, spec.Task, svc)
	if err != nil {
		return "", err
	}
	cpus, mem, pids := limitsOr(svc.CPUs, svc.Memory, spec.PIDs)
	env := make([]string, 0, len(svc.Env))
	for _, k := range slices.Sorted(maps.Keys(svc.Env)) {
		env = append(env, k+"="+svc.Env[k])
	}
	labels := p.labels(spec.Task, roleService, spec.Labels)
	labels[LabelService] = svc.Name
	cfg := &container.Config{
		Image:      ref,
		Env:        env,
		WorkingDir: svc.Workdir,
		User:       svc.User,
		Labels:     labels,
		Hostname:   svc.Name,
	}
	if svc.Entrypoint != nil {
		cfg.Entrypoint = svc.Entrypoint
	}
	if svc.Command != nil {
		cfg.Cmd = svc.Command
	}
	if h := svc.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, StartInterval: h.StartInterval, Retries: h.Retries}
	}
	init := true
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(n.Name),
		Init:        &init,
		CapDrop:     []string{"ALL"},
		CapAdd:      append([]string(nil), svc.CapAdd...),
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			NanoCPUs:   int64(cpus * 1e9),
			Memory:     mem,
			MemorySwap: mem,
			PidsLimit:  &pids,
		},
		// A bounded log, for the error when the service fails to come up.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
	}
	if atomic.LoadInt32(&p.diskMode) == diskStorageOpt {
		// Where the engine bounds a writable layer, a service's is bounded by the sandbox's disk.
		disk := spec.Disk
		if disk <= 0 {
			disk = DefaultDisk
		}
		hc.StorageOpt = map[string]string{"size": fmt.Sprint(disk)}
	}
	nc := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{n.Name: {Aliases: []string{svc.Name}}}}
	name := dockerName(p.opts.RunID, spec.Task, id, svc.Name)
	resp, err := p.cli.ContainerCreate(ctx, cfg, hc, nc, nil, name)
	if err != nil {
		if ctx.Err() != nil {
			p.abandon(ctx, name)
		}
		return "", sandbox.InfraError(fmt.Errorf("create compose service %s of task %s: %w", svc.Name, spec.Task, err))
	}
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return resp.ID, fmt.Errorf("start compose service %s of task %s: %w", svc.Name, spec.Task, err)
	}
	return resp.ID, nil
}

// waitHealthy waits until the service's container is healthy (a container
// without a health check: started, or, with mustCheck, an error). It
// fails, naming the service, when the container exits or is unhealthy, or
// when ctx (bounded by bound) ends first.
func (p *Provider) waitHealthy(ctx, parent context.Context, spec sandbox.Spec, name, cid string, bound time.Duration, mustCheck bool) error {
	for {
		ins, err := p.cli.ContainerInspect(ctx, cid)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return sandbox.InfraError(fmt.Errorf("inspect compose service %s of task %s: %w", name, spec.Task, err))
		}
		st := ins.State
		if st == nil {
			return sandbox.InfraError(fmt.Errorf("inspect compose service %s of task %s: no state", name, spec.Task))
		}
		if st.Health == nil {
			if mustCheck {
				return fmt.Errorf("compose service %s of task %s: a service depends on it being healthy, but it has no health check", name, spec.Task)
			}
			return nil
		}
		if !st.Running {
			return fmt.Errorf("compose service %s of task %s exited (status %d) before it was healthy%s", name, spec.Task, st.ExitCode, p.logTail(parent, cid))
		}
		switch st.Health.Status {
		case container.Healthy:
			return nil
		case container.Unhealthy:
			return fmt.Errorf("compose service %s of task %s is unhealthy: its health check failed %d times%s%s", name, spec.Task, st.Health.FailingStreak, lastProbe(st.Health), p.logTail(parent, cid))
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	if parent.Err() != nil {
		return fmt.Errorf("compose service %s of task %s: %w", name, spec.Task, parent.Err())
	}
	msg := ""
	if ins, err := p.cli.ContainerInspect(parent, cid); err == nil && ins.State != nil && ins.State.Health != nil {
		msg = lastProbe(ins.State.Health)
	}
	return fmt.Errorf("compose service %s of task %s did not become healthy within %s (the task's build timeout bounds its environment's start)%s", name, spec.Task, bound, msg)
}

func lastProbe(h *container.Health) string {
	if h == nil || len(h.Log) == 0 {
		return ""
	}
	l := h.Log[len(h.Log)-1]
	return fmt.Sprintf("; its last check exited %d: %q", l.ExitCode, strings.TrimSpace(truncate(l.Output, 300)))
}

// logTail is the end of a service's output, for an error.
func (p *Provider) logTail(ctx context.Context, cid string) string {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	rc, err := p.cli.ContainerLogs(ctx, cid, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var b bytes.Buffer
	_, _ = stdcopy.StdCopy(&b, &b, io.LimitReader(rc, 64<<10))
	if s := strings.TrimSpace(b.String()); s != "" {
		return "; its last output:\n" + truncate(s, 2000)
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// composeDown removes a sandbox's services and its compose network.
func (p *Provider) composeDown(ctx context.Context, services []string, n *runNet) error {
	var errs []error
	for _, cid := range services {
		if err := p.removeContainer(ctx, cid); err != nil {
			errs = append(errs, err)
		}
	}
	if n != nil {
		if err := p.removeNetwork(ctx, n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLeftoverNets removes this run's networks of one role (a compose
// project's, an egress proxy's) that no Close removed (Finalize; their
// containers went with the run's).
func (p *Provider) removeLeftoverNets(ctx context.Context, role string) error {
	f := runFilter(p.opts.RunID)
	f.Add("label", LabelLock+"="+p.lock)
	f.Add("label", labelRole+"="+role)
	nets, err := p.cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list leftover %s networks: %w", strings.TrimPrefix(role, "network-"), err)
	}
	var errs []error
	for _, n := range nets {
		if err := p.removeNetwork(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
