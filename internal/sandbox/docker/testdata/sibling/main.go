// Command sibling plays Steward inside a container with the host's Docker
// socket mounted (TestSiblingSandboxes builds it static and runs it FROM
// scratch). "__relay LISTEN TARGET" is the gateway relay, as cmd/steward would
// dispatch it; "sibling IMAGE" runs one sandbox that must reach a gateway
// served by this process.
package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(os.Args) == 4 && os.Args[1] == docker.RelayArg {
		if err := docker.RunRelay(ctx, os.Args[2], os.Args[3], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 3 || os.Args[1] != "sibling" {
		fmt.Fprintln(os.Stderr, "usage: sibling IMAGE | __relay LISTEN TARGET")
		os.Exit(2)
	}
	if err := sibling(ctx, os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("SIBLING OK")
}

func sibling(ctx context.Context, image string) error {
	lock, err := runlock.Acquire("/tmp/steward/run.lock")
	if err != nil {
		return err
	}
	defer lock.Release()
	p, err := docker.New(ctx, docker.Options{
		RunID: os.Getenv("RUN_ID"), LockPath: lock.Path(), Log: os.Stdout, InContainer: true,
		Labels: map[string]string{"dev.steward.test": "true"}, Liveness: runlock.Liveness{},
	})
	if err != nil {
		return err
	}
	defer p.Finalize(context.Background())
	spec := sandbox.Spec{Task: "sibling", Image: image, Memory: 64 << 20}
	if err := p.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		return err
	}
	g, err := p.Gateway(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("gateway listen %s host %s\n", g.Listen, g.Host)
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	// The relay starts every connection with a PROXY line naming the sandbox.
	from := make(chan string, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			select {
			case from <- strings.TrimSpace(line):
			default:
			}
			fmt.Fprintln(c, "hello-from-steward-in-a-container")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	sb, err := p.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer sb.Close(context.Background())
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "nc -w 5 " + g.Host + " " + port + " </dev/null", Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	got := strings.TrimSpace(string(res.Stdout))
	fmt.Printf("sandbox read %q (exit %d, stderr %q)\n", got, res.ExitCode, res.Stderr)
	if got != "hello-from-steward-in-a-container" {
		return fmt.Errorf("sandbox did not reach the gateway")
	}
	ip, _ := sb.(interface{ GatewayPeer() (netip.Addr, bool) }).GatewayPeer()
	line := <-from
	fmt.Printf("relay announced %q; sandbox address %s\n", line, ip)
	if !strings.HasPrefix(line, "PROXY TCP4 "+ip.String()+" ") {
		return fmt.Errorf("the relay did not name the sandbox's address %s: %q", ip, line)
	}
	return nil
}
