package kuberelay

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/proxyproto"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// readyLog is the relay's log: ready closes at its first line ("relay:
// sandboxes on ..."), which the relay writes once it listens.
type readyLog struct {
	once  sync.Once
	ready chan struct{}
}

func (l *readyLog) Write(p []byte) (int, error) {
	l.once.Do(func() { close(l.ready) })
	return len(p), nil
}

// get does an HTTP GET over a fresh connection to addr and returns the body.
func get(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Sandbox connections reach the gateway only through control connections the
// supervisor opened (the relay dials nothing); many at once, each paired with
// its own control connection; without a supervisor they are refused after
// PairTimeout rather than held forever.
func TestRelayPairsSandboxesWithControlConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gateway:"+r.URL.Path) })}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gw.Serve(proxyproto.Listener{Listener: gl})
	defer gw.Close()

	sandboxAddr, controlAddr := freeAddr(t), freeAddr(t)
	relayDone := make(chan error, 1)
	rlog := &readyLog{ready: make(chan struct{})}
	go func() { relayDone <- run(ctx, sandboxAddr, controlAddr, rlog, 3*time.Second) }()
	// The relay prints its first line once both listeners are open.
	select {
	case <-rlog.ready:
	case err := <-relayDone:
		t.Fatalf("relay ended before it listened: %v", err)
	}

	// No supervisor yet: a sandbox connection is not served.
	if _, err := get(t, sandboxAddr); err == nil {
		t.Fatal("a sandbox connection was served with no supervisor")
	}

	fctx, fcancel := context.WithCancel(ctx)
	dials := make(chan struct{}, 1000)
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		Feed(fctx, 4, func(ctx context.Context) (net.Conn, error) {
			dials <- struct{}{}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", controlAddr)
		}, gl.Addr().String(), io.Discard)
	}()
	const n = 20
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			body, err := get(t, sandboxAddr)
			if err == nil && body != "gateway:/x" {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("sandbox request through the relay: %v", err)
		}
	}
	if len(dials) < n {
		t.Fatalf("%d control connections for %d sandbox connections: each needs its own", len(dials), n)
	}
	fcancel()
	<-feedDone
	// The supervisor is gone: its idle control connections are dropped, and
	// new sandbox connections are refused after the pairing timeout.
	if _, err := get(t, sandboxAddr); err == nil {
		t.Fatal("served after the supervisor left")
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// getFrom does a GET of path with a bearer token over a fresh connection
// from the local address from (a loopback address of its own: a "pod"),
// after first writing pre, and returns the status.
func getFrom(t *testing.T, from, addr, pre, token string) (int, string) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, pre+"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+token+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The relay names each sandbox connection's own source address to the
// gateway (a PROXY line written before any byte of the sandbox, checked and
// passed on by the supervisor's feed), so the real gateway binds a token to
// its sandbox's address: a token used from another "pod" (another loopback
// address) is refused, its own works, and a PROXY line the sandbox sends
// itself gains nothing (it arrives after the relay's, as a bad request).
func TestRelayNamesEachSandbox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const key = "sk-real-relay-key-0123456789"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	up, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	gw, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: up + "/v1", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gw.ServeProxied(ctx, gl)
	sandboxAddr, controlAddr := freeAddr(t), freeAddr(t)
	sandboxAddr = strings.Replace(sandboxAddr, "127.0.0.1", "0.0.0.0", 1)
	relayDone := make(chan error, 1)
	rlog := &readyLog{ready: make(chan struct{})}
	go func() { relayDone <- run(ctx, sandboxAddr, controlAddr, rlog, 10*time.Second) }()
	go Feed(ctx, 4, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", controlAddr)
	}, gl.Addr().String(), io.Discard)
	_, port, _ := net.SplitHostPort(sandboxAddr)
	relay := net.JoinHostPort("127.0.0.1", port)

	tokA, tokB := gw.Issue("attempt-a", nil), gw.Issue("attempt-b", nil)
	if err := gw.Bind(tokA, netip.MustParseAddr("127.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if err := gw.Bind(tokB, netip.MustParseAddr("127.0.0.3")); err != nil {
		t.Fatal(err)
	}
	select { // the relay's first line: both listeners are open (a sandbox waits for a control connection)
	case <-rlog.ready:
	case err := <-relayDone:
		t.Fatalf("relay ended before it listened: %v", err)
	}
	if st, body := getFrom(t, "127.0.0.2", relay, "", tokA); st != 200 {
		t.Fatalf("pod A with its own token: %d %s", st, body)
	}
	if st, body := getFrom(t, "127.0.0.3", relay, "", tokB); st != 200 {
		t.Fatalf("pod B with its own token: %d %s", st, body)
	}
	if st, body := getFrom(t, "127.0.0.3", relay, "", tokA); st != 401 || !strings.Contains(body, "another sandbox") {
		t.Fatalf("pod B with pod A's token: %d %s, want 401", st, body)
	}
	forged := "PROXY TCP4 127.0.0.2 127.0.0.1 40000 " + port + "\r\n"
	if st, body := getFrom(t, "127.0.0.3", relay, forged, tokA); st != 400 {
		t.Fatalf("pod B with its own PROXY line naming pod A, and A's token: %d %s", st, body)
	}
	if u, _ := gw.Usage(tokA); u.Requests != 1 {
		t.Fatalf("pod A's token served %d requests, want 1 (its own)", u.Requests)
	}
}

// One pod cannot queue unbounded connections in the relay: past
// ConnsPerSandbox held at once (waiting for a control connection or
// relayed), its next one is answered 429 and closed at once, without taking
// a control connection, while another pod's connection is still taken and
// served. Before the cap, a pod's flood waited in the pairing queue ahead of
// every other pod's (which then waited out PairTimeout) and grew the relay's
// memory without bound.
func TestRelayCapsConnectionsPerSandbox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "from "+r.RemoteAddr) })}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gw.Serve(proxyproto.Listener{Listener: gl})
	defer gw.Close()
	sandboxAddr, controlAddr := freeAddr(t), freeAddr(t)
	sandboxAddr = strings.Replace(sandboxAddr, "127.0.0.1", "0.0.0.0", 1)
	_, port, _ := net.SplitHostPort(sandboxAddr)
	relay := net.JoinHostPort("127.0.0.1", port)
	relayDone := make(chan error, 1)
	rlog := &readyLog{ready: make(chan struct{})}
	// A pairing timeout far longer than the test: nothing is refused for want of a supervisor.
	go func() { relayDone <- run(ctx, sandboxAddr, controlAddr, rlog, time.Hour) }()
	select {
	case <-rlog.ready:
	case err := <-relayDone:
		t.Fatalf("relay ended before it listened: %v", err)
	}

	// Pod A (127.0.0.2) fills its share with connections that send nothing;
	// no supervisor yet, so they all wait for a control connection.
	dialFrom := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", relay)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < ConnsPerSandbox; i++ {
		held = append(held, dialFrom("127.0.0.2"))
	}
	// Its next one is refused by the relay itself (the deadline only bounds
	// a failing run: before the cap, this connection waited for pairing).
	over := dialFrom("127.0.0.2")
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("pod A's connection over the cap: %v, want a 429 answer from the relay", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(b), "too many open connections") {
		t.Fatalf("pod A's connection over the cap: %d %s, want 429", resp.StatusCode, b)
	}

	// Pod B (127.0.0.3) is not refused: once the supervisor feeds the
	// relay, its request is served and named as its own.
	go Feed(ctx, 4, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", controlAddr)
	}, gl.Addr().String(), io.Discard)
	if st, body := getFrom(t, "127.0.0.3", relay, "", "x"); st != 200 || !strings.HasPrefix(body, "from 127.0.0.3:") {
		t.Fatalf("pod B beside pod A's full share: %d %s", st, body)
	}
}
