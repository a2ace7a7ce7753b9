// Package kuberelay is the gateway relay that runs in a pod of its own, one
// per run, in the cluster where the sandboxes are. It holds no secret and
// dials nothing: sandboxes connect to its pod address; the supervisor, which
// may sit anywhere the API server is reachable from, keeps idle "control"
// connections open to it through a port-forward; each sandbox connection is
// paired with one control connection and the bytes flow between them. The
// supervisor carries them on to the model gateway on its own loopback.
//
// The protocol on a control connection: the relay writes Call ('C') when it
// pairs the connection with a sandbox connection; the supervisor answers Ack
// ('A'); the relay then writes a PROXY protocol v1 line naming the sandbox
// connection's source address (the sandbox pod's IP, as the relay's own
// socket sees it) before any byte of the sandbox, and from then on both ends
// copy bytes. The supervisor checks the line and passes it on to the
// gateway, which binds each attempt's token to its pod's address: a sandbox
// cannot forge it, since whatever it sends comes after the relay's line (a
// PROXY line of its own is then only a malformed request). An idle control
// connection that ends (EOF) is dropped; the supervisor keeps opening new ones.
//
// Only the standard library is used, so the relay binary is small and the
// image is FROM scratch.
package kuberelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/proxyproto"
)

// Arg is the argument that makes a binary (steward, or a test binary) run the relay:
// ARG SANDBOX-LISTEN CONTROL-LISTEN.
const Arg = "__kuberelay"

// ReadyArg is the internal command the relay pod's startup probe runs
// (`steward __kuberelay-ready ADDR`): it exits 0 once the relay's control
// port at ADDR accepts a connection.
const ReadyArg = "__kuberelay-ready"

// Ready dials the control port once: nil when the relay listens there. The
// connection is closed at once; the relay takes it for an idle control
// connection that went away.
func Ready(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("relay not listening on %s: %w", addr, err)
	}
	return c.Close()
}

// Protocol bytes on a control connection.
const (
	Call = 'C'
	Ack  = 'A'
)

// ControlPort is the relay's control port inside its pod, on the pod's
// loopback only (the supervisor's port-forward reaches it there; a sandbox
// on it would be handed other sandboxes' connections).
const ControlPort = 7070

// ProxyLineTimeout bounds how long the supervisor waits for the relay's
// PROXY line after its Ack (the relay sends it at once).
const ProxyLineTimeout = 10 * time.Second

// PairTimeout bounds how long a sandbox connection waits for a control connection.
const PairTimeout = 30 * time.Second

// ConnsPerSandbox is the most connections one source address (one pod) may
// hold in the relay at once, waiting for a control connection or relayed.
// Twice the gateway's own per-address cap, so that a pod over that cap
// normally hears the gateway's answer; without it one pod could queue
// thousands of connections ahead of every other pod's (which then wait out
// PairTimeout) and run the relay out of memory.
const ConnsPerSandbox = 128

// overCap is the answer to a connection over ConnsPerSandbox, in the
// gateway's words, before the relay closes it.
var overCap = func() string {
	body := `{"type":"error","error":{"type":"rate_limit_error","code":"too_many_connections","param":null,"message":"steward relay: this sandbox has too many open connections to the gateway; close some (reuse keep-alive connections) and retry"}}`
	return fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

type idle struct {
	c   net.Conn
	ack chan error // the one byte read from c: nil = Ack, else why it died
}

// Run serves until ctx ends: sandboxes connect to sandboxListen, the
// supervisor's port-forward to controlListen.
func Run(ctx context.Context, sandboxListen, controlListen string, log io.Writer) error {
	return run(ctx, sandboxListen, controlListen, log, PairTimeout)
}

func run(ctx context.Context, sandboxListen, controlListen string, log io.Writer, pairTimeout time.Duration) error {
	var lc net.ListenConfig
	sl, err := lc.Listen(ctx, "tcp", sandboxListen)
	if err != nil {
		return fmt.Errorf("relay listen %s: %w", sandboxListen, err)
	}
	cl, err := lc.Listen(ctx, "tcp", controlListen)
	if err != nil {
		sl.Close()
		return fmt.Errorf("relay listen %s: %w", controlListen, err)
	}
	fmt.Fprintf(log, "relay: sandboxes on %s, control on %s\n", sl.Addr(), cl.Addr())
	go func() { <-ctx.Done(); sl.Close(); cl.Close() }()
	pool := make(chan idle, 1024)
	var perMu sync.Mutex
	per := map[netip.Addr]int{}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := cl.Accept()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			it := idle{c: c, ack: make(chan error, 1)}
			go func() {
				var b [1]byte
				_, err := io.ReadFull(c, b[:])
				if err == nil && b[0] != Ack {
					err = fmt.Errorf("bad control byte %q", b[0])
				}
				it.ack <- err
			}()
			select {
			case pool <- it:
			default:
				c.Close() // more idle connections than anyone needs
			}
		}
	}()
	for {
		c, err := sl.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("relay accept: %w", err)
		}
		// Counted here, in accept order, so that one source's flood
		// cannot crowd out the others.
		src := sourceAddr(c.RemoteAddr())
		perMu.Lock()
		full := per[src] >= ConnsPerSandbox
		if !full {
			per[src]++
		}
		perMu.Unlock()
		if full {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, overCap)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				perMu.Lock()
				if per[src]--; per[src] <= 0 {
					delete(per, src)
				}
				perMu.Unlock()
			}()
			defer c.Close()
			u, err := pair(ctx, pool, pairTimeout)
			if err != nil {
				fmt.Fprintf(log, "relay: %v\n", err)
				return
			}
			defer u.Close()
			// The sandbox's address, written before any byte of the sandbox.
			if _, err := io.WriteString(u, proxyproto.Line(c.RemoteAddr(), c.LocalAddr())); err != nil {
				return
			}
			Pipe(c, u)
		}()
	}
}

func sourceAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// pair takes idle control connections until one acknowledges a call.
func pair(ctx context.Context, pool chan idle, timeout time.Duration) (net.Conn, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		var it idle
		select {
		case it = <-pool:
		case <-deadline.C:
			return nil, errors.New("no control connection from the supervisor")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case err := <-it.ack:
			// It ended (or misbehaved) while idle.
			it.c.Close()
			_ = err
			continue
		default:
		}
		if _, err := it.c.Write([]byte{Call}); err != nil {
			it.c.Close()
			continue
		}
		select {
		case err := <-it.ack:
			if err != nil {
				it.c.Close()
				continue
			}
			return it.c, nil
		case <-time.After(10 * time.Second):
			it.c.Close()
			continue
		}
	}
}

// Pipe copies both ways until both directions end.
func Pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, a); closeWrite(b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a, b); closeWrite(a); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// Feed keeps n idle control connections open through dial (the supervisor's
// side): each, once called, is acknowledged, and the PROXY line the relay
// then sends is checked and passed on to a fresh connection to target (the
// gateway, which must serve it as a proxied listener), which is joined to it.
// It returns when ctx ends.
func Feed(ctx context.Context, n int, dial func(ctx context.Context) (net.Conn, error), target string, log io.Writer) {
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 50 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := dial(ctx)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(log, "relay feed: %v\n", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			if backoff < 2*time.Second {
				backoff *= 2
			}
			continue
		}
		backoff = 50 * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			defer c.Close()
			var b [1]byte
			_, err := io.ReadFull(c, b[:])
			if err != nil || b[0] != Call {
				// The stream died idle (relay gone, port-forward lost):
				// wait a little before the slot opens another one.
				select {
				case <-time.After(200 * time.Millisecond):
				case <-ctx.Done():
				}
				<-slots
				return
			}
			<-slots // called: open another idle one
			var d net.Dialer
			u, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				fmt.Fprintf(log, "relay feed: dial gateway %s: %v\n", target, err)
				return
			}
			defer u.Close()
			if _, err := c.Write([]byte{Ack}); err != nil {
				return
			}
			// The relay names the sandbox at once, before any of its bytes.
			_ = c.SetReadDeadline(time.Now().Add(ProxyLineTimeout))
			line, _, err := proxyproto.Read(c)
			_ = c.SetReadDeadline(time.Time{})
			if err != nil {
				fmt.Fprintf(log, "relay feed: the relay did not name the sandbox (is the relay image the same steward version?): %v\n", err)
				return
			}
			if _, err := io.WriteString(u, line); err != nil {
				return
			}
			Pipe(c, u)
		}()
	}
}
