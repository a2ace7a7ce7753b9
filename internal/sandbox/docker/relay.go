package docker

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/steward-evals/steward/internal/proxyproto"
	"github.com/steward-evals/steward/internal/sandbox"
)

// RelayArg is the argument that makes the steward binary act as the gateway
// relay (cmd/steward dispatches it to RunRelay).
const RelayArg = "__relay"

// RunRelay listens on listen and copies every connection to and from target,
// until ctx ends. It is what the relay container runs when Steward itself is in
// a container: the relay sits on the host's network, on the run network's
// gateway address, and forwards to Steward's container. Each forwarded
// connection starts with a PROXY protocol v1 line naming the sandbox's
// address, so the gateway can bind tokens and count connections per sandbox.
func RunRelay(ctx context.Context, listen, target string, log io.Writer) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("relay listen %s: %w", listen, err)
	}
	fmt.Fprintf(log, "relay %s -> %s\n", ln.Addr(), target)
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("relay accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			d := net.Dialer{Timeout: 10 * time.Second}
			u, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				fmt.Fprintf(log, "relay dial %s: %v\n", target, err)
				return
			}
			defer u.Close()
			if _, err := io.WriteString(u, proxyproto.Line(c.RemoteAddr(), c.LocalAddr())); err != nil {
				return
			}
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); closeWrite(u); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// selfAddr is an IPv4 address of Steward's own container that the host can reach.
func (p *Provider) selfAddr(ctx context.Context) (string, netip.Addr, error) {
	self := hostnameOr(p.opts.SelfContainer)
	ins, err := p.cli.ContainerInspect(ctx, self)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("find Steward's own container %q (set the self container when the hostname is not the container id): %w", self, err)
	}
	if ins.NetworkSettings != nil {
		for _, ep := range ins.NetworkSettings.Networks {
			if a, err := netip.ParseAddr(ep.IPAddress); err == nil && a.Is4() {
				return ins.ID, a, nil
			}
		}
	}
	return "", netip.Addr{}, fmt.Errorf("the container Steward runs in (%s) has no IPv4 address on a bridge network (host networking needs no relay: run without the in-container option)", self)
}

// startRelay runs the relay container on the host network: it listens on the
// run network's gateway address and forwards to Steward's container.
func (p *Provider) startRelay(ctx context.Context, n *runNet) (sandbox.GatewayAddr, error) {
	_, selfIP, err := p.selfAddr(ctx)
	if err != nil {
		return sandbox.GatewayAddr{}, fmt.Errorf("start gateway relay: %w", err)
	}
	bin := p.opts.RelayBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return sandbox.GatewayAddr{}, fmt.Errorf("start gateway relay: %w", err)
		}
	}
	img, err := p.relayImage(ctx, bin)
	if err != nil {
		return sandbox.GatewayAddr{}, fmt.Errorf("start gateway relay: %w", err)
	}
	cmd := p.opts.RelayCommand
	if len(cmd) == 0 {
		cmd = []string{"/steward", RelayArg}
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return sandbox.GatewayAddr{}, fmt.Errorf("start gateway relay: %w", err)
		}
		ps := strconv.Itoa(port)
		listen := net.JoinHostPort(n.Gateway.String(), ps)
		target := net.JoinHostPort(selfIP.String(), ps)
		id, err := p.runRelay(ctx, img, append(append([]string(nil), cmd...), listen, target))
		if err != nil {
			lastErr = err
			continue
		}
		p.mu.Lock()
		p.relayID = id
		p.mu.Unlock()
		return sandbox.GatewayAddr{Listen: net.JoinHostPort(selfIP.String(), ps), Host: n.Gateway.String(), Proxied: true}, nil
	}
	return sandbox.GatewayAddr{}, fmt.Errorf("start gateway relay: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// relayImage builds (once per binary content) an image FROM scratch holding bin as /steward.
func (p *Provider) relayImage(ctx context.Context, bin string) (string, error) {
	dir, err := os.MkdirTemp("", "steward-relay-")
	if err != nil {
		return "", fmt.Errorf("build relay image: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := staticBinary(bin); err != nil {
		return "", fmt.Errorf("build relay image: %w", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("build relay image: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "steward"), data, 0o755); err != nil {
		return "", fmt.Errorf("build relay image: %w", err)
	}
	df := "FROM scratch\nCOPY steward /steward\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", fmt.Errorf("build relay image: %w", err)
	}
	return p.buildImage(ctx, dir, "", BuildNetworkNone)
}

func (p *Provider) runRelay(ctx context.Context, img string, cmd []string) (string, error) {
	init := true
	pids := int64(256)
	resp, err := p.cli.ContainerCreate(ctx, &container.Config{
		Image: img, Cmd: cmd, Entrypoint: []string{}, Labels: p.labels("", "relay", nil),
	}, &container.HostConfig{
		NetworkMode: "host",
		Init:        &init,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   container.Resources{NanoCPUs: 1e9, Memory: 256 << 20, PidsLimit: &pids},
	}, nil, nil, dockerName(p.opts.RunID, "relay", randomID(3)))
	if err != nil {
		return "", sandbox.InfraError(fmt.Errorf("create relay container: %w", err))
	}
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		_ = p.removeContainer(context.WithoutCancel(ctx), resp.ID)
		return "", sandbox.InfraError(fmt.Errorf("start relay container: %w", err))
	}
	// Wait until it listens (it logs its first line) or exits (port taken).
	if err := p.waitLogLine(ctx, resp.ID, "relay ", 15*time.Second); err != nil {
		_ = p.removeContainer(context.WithoutCancel(ctx), resp.ID)
		return "", fmt.Errorf("relay: %w", err)
	}
	return resp.ID, nil
}

// waitLogLine waits, up to within, until a helper container (the relay,
// an egress proxy) has logged what (its first line says it listens) or
// has exited.
func (p *Provider) waitLogLine(ctx context.Context, id, what string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for wait := 20 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 300*time.Millisecond) {
		ins, err := p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return sandbox.InfraError(err)
		}
		logs := p.containerLogs(ctx, id)
		if ins.State != nil && !ins.State.Running {
			return fmt.Errorf("exited %d: %s", ins.State.ExitCode, strings.TrimSpace(logs))
		}
		if strings.Contains(logs, what) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return sandbox.InfraError(errors.New("did not start listening"))
}

func (p *Provider) containerLogs(ctx context.Context, id string) string {
	rc, err := p.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return ""
	}
	defer rc.Close()
	out, errb := sandbox.NewCapped(4096), sandbox.NewCapped(4096)
	_, _ = stdcopyDemux(out, errb, rc)
	return out.String() + errb.String()
}

// staticBinary refuses an ELF executable that names a program interpreter
// (a dynamically linked one, as `go build` makes with cgo on): in an image
// FROM scratch it cannot start, and Docker reports only "exec /steward
// failed: No such file or directory". A file that is not ELF is left to
// the build and the container to judge.
func staticBinary(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: its helper containers (the egress proxy of a network allowlist, the gateway relay) run it in an image FROM scratch; build steward with CGO_ENABLED=0 (make build, or CGO_ENABLED=0 go build ./cmd/steward)", bin)
		}
	}
	return nil
}
