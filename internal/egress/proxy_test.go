package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// The proxy's network edges are injected here: names resolve from a table
// (lookups), and a dial of a test address reaches a listener the test
// started on loopback (dialer). Every dial is recorded, so a refusal is
// shown to have dialled nothing. The Docker test in internal/sandbox/docker
// (TestEgressAllowlist) runs the same proxy with the real resolver and
// dialer.

type lookups map[string][]netip.Addr

func (l lookups) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := l[strings.TrimSuffix(host, ".")]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

type dialer struct {
	mu     sync.Mutex
	routes map[string]string // "10.9.0.1:443" -> a loopback listener's address
	dialed []string
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	to, ok := d.routes[addr]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test: %s is no address this test started", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

func (d *dialer) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// upstream is a loopback listener serving each connection with serve.
func upstream(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// echoLine answers the first line it reads, prefixed.
func echoLine(c net.Conn) {
	l, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	fmt.Fprintf(c, "echo: %s", l)
}

// httpEcho answers one HTTP request with what it saw.
func httpEcho(c net.Conn) {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	body, _ := io.ReadAll(req.Body)
	msg := fmt.Sprintf("host=%s uri=%s body=%s proxy-auth=%q conn=%q", req.Host, req.RequestURI, body, req.Header.Get("Proxy-Authorization"), req.Header.Get("X-Hop"))
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nKeep-Alive: timeout=5\r\n\r\n%s", len(msg), msg)
}

type testProxy struct {
	addr string
	d    *dialer
	log  *strings.Builder
}

var (
	goodAddr  = netip.MustParseAddr("10.9.0.1")
	opened    = []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}
	testNames = lookups{
		"good.test":    {goodAddr},
		"bad.test":     {goodAddr}, // reachable, but not allowed
		"private.test": {netip.MustParseAddr("192.168.1.5")},
		"loop.test":    {netip.MustParseAddr("127.0.0.1")},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":  {netip.MustParseAddr("::ffff:127.0.0.1")},
		"mixed.test":   {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254"), goodAddr},
	}
)

func startProxy(t *testing.T, cfg Config, routes map[string]string) *testProxy {
	t.Helper()
	for _, h := range []string{"good.test", "private.test", "loop.test", "meta.test", "mapped.test", "mixed.test"} {
		p, err := ParseHost(h)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Hosts = append(cfg.Hosts, p)
	}
	cfg.Addrs.Allow = opened
	cfg.Resolver = testNames
	d := &dialer{routes: routes}
	cfg.Dial = d.dial
	log := &strings.Builder{}
	cfg.Log = &lockedWriter{w: log}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(cfg).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testProxy{addr: ln.Addr().String(), d: d, log: log}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *testProxy) conn(t *testing.T) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// connect sends a CONNECT and returns the reader after a 200.
func (p *testProxy) connect(t *testing.T, c net.Conn, target string) *bufio.Reader {
	t.Helper()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("CONNECT %s: %s %s", target, resp.Status, b)
	}
	return br
}

func TestProxyConnectToAllowedHost(t *testing.T) {
	up := upstream(t, echoLine)
	p := startProxy(t, Config{}, map[string]string{"10.9.0.1:443": up})
	c := p.conn(t)
	br := p.connect(t, c, "good.test:443")
	fmt.Fprintf(c, "hello\n")
	got, err := br.ReadString('\n')
	if err != nil || got != "echo: hello\n" {
		t.Fatalf("through the tunnel: %q, %v", got, err)
	}
	if d := p.d.calls(); len(d) != 1 || d[0] != "10.9.0.1:443" {
		t.Fatalf("dialled %v", d)
	}
}

// A name that resolves to refused and allowed addresses is dialled only at
// the allowed one.
func TestProxyDialsOnlyCheckedAddresses(t *testing.T) {
	up := upstream(t, echoLine)
	p := startProxy(t, Config{}, map[string]string{"10.9.0.1:443": up, "127.0.0.1:443": up, "169.254.169.254:443": up})
	c := p.conn(t)
	br := p.connect(t, c, "mixed.test:443")
	fmt.Fprintf(c, "x\n")
	if got, _ := br.ReadString('\n'); got != "echo: x\n" {
		t.Fatalf("got %q", got)
	}
	if d := p.d.calls(); len(d) != 1 || d[0] != "10.9.0.1:443" {
		t.Fatalf("dialled %v, want only 10.9.0.1:443", d)
	}
}

func TestProxyPlainHTTP(t *testing.T) {
	up := upstream(t, httpEcho)
	p := startProxy(t, Config{}, map[string]string{"10.9.0.1:80": up})
	c := p.conn(t)
	fmt.Fprintf(c, "POST http://good.test/simple/?q=1 HTTP/1.1\r\nHost: good.test\r\nProxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nContent-Length: 4\r\n\r\nbody")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	want := `host=good.test uri=/simple/?q=1 body=body proxy-auth="" conn=""`
	if resp.StatusCode != 200 || string(b) != want {
		t.Fatalf("%s %q, want %q", resp.Status, b, want)
	}
	if !resp.Close || resp.Header.Get("Keep-Alive") != "" {
		t.Fatalf("the response keeps the connection: close=%v %v", resp.Close, resp.Header)
	}
}

// TestProxyRefusals: every request the rule refuses is answered with its
// status and reason, and dials nothing.
func TestProxyRefusals(t *testing.T) {
	up := upstream(t, echoLine)
	p := startProxy(t, Config{MaxHeaderBytes: 2048}, map[string]string{"10.9.0.1:443": up, "10.9.0.1:80": up, "127.0.0.1:443": up, "169.254.169.254:443": up, "192.168.1.5:443": up})
	cases := []struct {
		name, req string
		status    int
		why       string
	}{
		{"not allowed", "CONNECT bad.test:443 HTTP/1.1\r\nHost: bad.test:443\r\n\r\n", 403, "not in allowed_hosts"},
		{"not allowed, plain", "GET http://bad.test/ HTTP/1.1\r\nHost: bad.test\r\n\r\n", 403, "not in allowed_hosts"},
		{"suffix of an allowed name", "CONNECT xgood.test:443 HTTP/1.1\r\n\r\n", 403, "not in allowed_hosts"},
		{"port", "CONNECT good.test:22 HTTP/1.1\r\n\r\n", 403, "port 22"},
		{"IPv4 literal", "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"decimal", "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"hex", "CONNECT 0x7f.1:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"short", "CONNECT 127.1:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"octal", "CONNECT 0177.0.0.1:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"IPv6", "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"plain literal", "GET http://127.1/ HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"metadata literal", "GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n", 403, "IP address"},
		{"resolves private", "CONNECT private.test:443 HTTP/1.1\r\n\r\n", 403, "private"},
		{"resolves loopback", "CONNECT loop.test:443 HTTP/1.1\r\n\r\n", 403, "loopback"},
		{"resolves IPv4-mapped loopback", "CONNECT mapped.test:443 HTTP/1.1\r\n\r\n", 403, "loopback"},
		{"resolves metadata", "CONNECT meta.test:443 HTTP/1.1\r\n\r\n", 403, "link-local"},
		{"Host mismatch, CONNECT", "CONNECT good.test:443 HTTP/1.1\r\nHost: bad.test:443\r\n\r\n", 400, "does not name the CONNECT target"},
		{"Host port mismatch, CONNECT", "CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:80\r\n\r\n", 400, "does not name"},
		{"Host mismatch, plain", "GET http://good.test/ HTTP/1.1\r\nHost: bad.test\r\n\r\n", 400, "does not name the request's host"},
		{"two Host headers", "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\nHost: bad.test\r\n\r\n", 400, "more than one Host"},
		{"origin form", "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n", 400, "names its URL in full"},
		{"https scheme", "GET https://good.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n", 400, "use CONNECT"},
		{"CONNECT without port", "CONNECT good.test HTTP/1.1\r\n\r\n", 400, "host:port"},
		{"CONNECT bad port", "CONNECT good.test:99999 HTTP/1.1\r\n\r\n", 400, "host:port"},
		{"userinfo", "GET http://good.test@bad.test/ HTTP/1.1\r\n\r\n", 403, "bad.test is not in allowed_hosts"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "bad request line"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "bad request line"},
		{"head too large", "CONNECT good.test:443 HTTP/1.1\r\nX: " + strings.Repeat("a", 4096) + "\r\n\r\n", 431, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(p.d.calls())
			c := p.conn(t)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.why) {
				t.Fatalf("%s %q, want %d %q", resp.Status, b, tc.status, tc.why)
			}
			if d := p.d.calls(); len(d) != before {
				t.Fatalf("a refused request dialled %v", d[before:])
			}
		})
	}
}

// TestProxyHalfClose: the client's end of its stream reaches the upstream
// as a half-close, and the upstream's answer still comes back.
func TestProxyHalfClose(t *testing.T) {
	up := upstream(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c) // until the client's half-close
		fmt.Fprintf(c, "got %d bytes\n", n)
	})
	p := startProxy(t, Config{}, map[string]string{"10.9.0.1:443": up})
	c := p.conn(t)
	br := p.connect(t, c, "good.test:443")
	io.WriteString(c, strings.Repeat("z", 100000))
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "got 100000 bytes\n" {
		t.Fatalf("after the half-close: %q, %v", got, err)
	}
}

// TestProxyBoundsIdleConnections: a tunnel that carries nothing, a
// half-closed one whose upstream never answers, and a client that never
// finishes its request head are all closed by the proxy (each read below
// would block forever otherwise; the test's timeout is the bound).
func TestProxyBoundsIdleConnections(t *testing.T) {
	upClosed := make(chan struct{}, 4)
	up := upstream(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // never writes; returns when the proxy closes
		upClosed <- struct{}{}
	})
	p := startProxy(t, Config{IdleTimeout: 200 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond}, map[string]string{"10.9.0.1:443": up})

	c := p.conn(t)
	br := p.connect(t, c, "good.test:443")
	if n, err := io.Copy(io.Discard, br); err != nil || n != 0 {
		t.Fatalf("idle tunnel: read %d bytes, %v", n, err)
	}
	<-upClosed

	c2 := p.conn(t)
	br2 := p.connect(t, c2, "good.test:443")
	if err := c2.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, br2); err != nil || n != 0 {
		t.Fatalf("half-closed tunnel: read %d bytes, %v", n, err)
	}
	<-upClosed

	before := len(p.d.calls())
	c3 := p.conn(t)
	io.WriteString(c3, "CONNECT good.test:443 HTTP/1.1\r\nHost: goo") // and nothing more
	resp, err := http.ReadResponse(bufio.NewReader(c3), nil)
	if err != nil {
		t.Fatalf("slow head: %v", err)
	}
	if resp.StatusCode != 400 {
		t.Fatalf("slow head: %s", resp.Status)
	}
	if len(p.d.calls()) != before {
		t.Fatal("a slow head was dialled")
	}
}

// TestProxyCapsConnections: one connection more than MaxConns is answered
// 503 and closed while the others are open.
func TestProxyCapsConnections(t *testing.T) {
	up := upstream(t, echoLine)
	p := startProxy(t, Config{MaxConns: 2}, map[string]string{"10.9.0.1:443": up})
	for i := 0; i < 2; i++ {
		c := p.conn(t)
		br := p.connect(t, c, "good.test:443")
		_ = br
	}
	c := p.conn(t)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), "too many connections") {
		t.Fatalf("%s %q", resp.Status, b)
	}
}
