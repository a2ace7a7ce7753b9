package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config's bounds.
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultDialTimeout    = 10 * time.Second
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultMaxConns       = 128
	DefaultMaxHeaderBytes = 32 << 10
)

// Resolver looks a host name up (net.DefaultResolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is one proxy's rule and bounds.
type Config struct {
	Hosts []Pattern
	// Ports a destination may have; nil = DefaultPorts.
	Ports []int
	Addrs AddrPolicy
	// Resolver resolves names (nil = net.DefaultResolver); Dial dials the
	// addresses it gave that the rule let through (nil = a net.Dialer).
	Resolver Resolver
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	// HeaderTimeout bounds reading a request's head; DialTimeout a dial;
	// IdleTimeout how long a connection may carry nothing either way (a
	// half-closed one included). 0 = the defaults.
	HeaderTimeout, DialTimeout, IdleTimeout time.Duration
	// MaxConns bounds the connections served at once; one more is answered
	// 503 and closed. 0 = DefaultMaxConns.
	MaxConns int
	// MaxHeaderBytes bounds a request's head. 0 = DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Log gets one line per decision (nil = none).
	Log io.Writer
}

// Proxy is an HTTP proxy that applies Config's rule: CONNECT tunnels and
// plain http:// requests (one per connection) to allowed hosts only.
type Proxy struct {
	cfg   Config
	slots chan struct{}
	logMu sync.Mutex
}

// New makes a proxy, filling Config's defaults.
func New(cfg Config) *Proxy {
	if cfg.Ports == nil {
		cfg.Ports = DefaultPorts
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.Dial == nil {
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
	}
	return &Proxy{cfg: cfg, slots: make(chan struct{}, cfg.MaxConns)}
}

// Refusal is why the proxy refused a destination or a request, with the
// HTTP status it answered.
type Refusal struct {
	Status int
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

func refuse(status int, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// Decide applies the rule to a destination: the host's name and port are
// allowed, and the addresses it resolves to that may be dialled (at least
// one). Anything else is a *Refusal.
func (p *Proxy) Decide(ctx context.Context, host string, port int) ([]netip.Addr, error) {
	name, err := NormalizeHost(host)
	if err != nil {
		return nil, refuse(http.StatusForbidden, "%q: %v", host, err)
	}
	if !Matches(p.cfg.Hosts, name) {
		return nil, refuse(http.StatusForbidden, "%s is not in allowed_hosts", name)
	}
	okPort := false
	for _, q := range p.cfg.Ports {
		okPort = okPort || q == port
	}
	if !okPort {
		return nil, refuse(http.StatusForbidden, "%s: port %d is not allowed (allowed: %v)", name, port, p.cfg.Ports)
	}
	lctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	addrs, err := p.cfg.Resolver.LookupNetIP(lctx, "ip", name+".")
	if err != nil {
		return nil, refuse(http.StatusBadGateway, "resolve %s: %v", name, err)
	}
	var ok []netip.Addr
	var why error
	for _, a := range addrs {
		if err := p.cfg.Addrs.Check(a); err != nil {
			why = err
			continue
		}
		ok = append(ok, a.Unmap())
	}
	if len(ok) == 0 {
		if why == nil {
			why = errors.New("no address")
		}
		return nil, refuse(http.StatusForbidden, "%s resolves to no address the proxy may dial: %v", name, why)
	}
	return ok, nil
}

// Serve serves connections from ln until ctx ends or ln fails; it returns
// once every connection it served is closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
			return fmt.Errorf("egress proxy accept: %w", err)
		}
		select {
		case p.slots <- struct{}{}:
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.logf("refused %s: %d connections already open", c.RemoteAddr(), p.cfg.MaxConns)
				_ = c.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
				writeRefusal(c, refuse(http.StatusServiceUnavailable, "too many connections (at most %d)", p.cfg.MaxConns))
				c.Close()
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-p.slots }()
			cctx, ccancel := context.WithCancel(ctx)
			defer ccancel()
			stop := context.AfterFunc(cctx, func() { c.Close() })
			defer stop()
			p.handle(cctx, c)
			c.Close()
		}()
	}
}

func (p *Proxy) logf(format string, args ...any) {
	if p.cfg.Log == nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	fmt.Fprintf(p.cfg.Log, "egress: "+format+"\n", args...)
}

func writeRefusal(w io.Writer, r *Refusal) {
	body := "steward egress proxy: " + r.Reason + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		r.Status, http.StatusText(r.Status), len(body), body)
}

// head is a request's head as sent, read before net/http parses it: the
// Host headers as written (net/http drops them).
type head struct {
	raw    []byte
	method string
	target string
	hosts  []string
}

// readHead reads the request line and header fields, at most max bytes.
func readHead(br *bufio.Reader, max int) (*head, *Refusal) {
	var raw bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		raw.Write(line)
		if raw.Len() > max {
			return nil, refuse(http.StatusRequestHeaderFieldsTooLarge, "request head larger than %d bytes", max)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "incomplete request head: %v", err)
		}
		if (len(line) == 2 && line[0] == '\r') || len(line) == 1 {
			if raw.Len() == len(line) {
				raw.Reset() // a blank line before the request line (RFC 9112 2.2)
				continue
			}
			break
		}
	}
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw.Bytes())))
	line, err := tp.ReadLine()
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "bad request line")
	}
	parts := strings.Split(line, " ")
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") {
		return nil, refuse(http.StatusBadRequest, "bad request line %q", trunc(line))
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "bad header: %v", err)
	}
	return &head{raw: raw.Bytes(), method: parts[0], target: parts[1], hosts: hdr.Values("Host")}, nil
}

func trunc(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// sameAuthority: the Host header names the target's host (and its port,
// when it gives one; def is the target's default port).
func sameAuthority(hostHeader, host string, port, def int) bool {
	h, ps, err := net.SplitHostPort(hostHeader)
	if err != nil {
		h, ps = hostHeader, ""
	}
	if !strings.EqualFold(strings.TrimSuffix(h, "."), strings.TrimSuffix(host, ".")) {
		return false
	}
	if ps == "" {
		return port == def
	}
	n, err := strconv.Atoi(ps)
	return err == nil && n == port
}

// handle serves one client connection: one CONNECT tunnel or one plain
// HTTP request.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	br := bufio.NewReaderSize(c, 4096)
	h, r := readHead(br, p.cfg.MaxHeaderBytes)
	if r != nil {
		p.logf("refused %s: %s", c.RemoteAddr(), r.Reason)
		_ = c.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
		writeRefusal(c, r)
		return
	}
	if len(h.hosts) > 1 {
		p.refuseConn(c, refuse(http.StatusBadRequest, "more than one Host header"))
		return
	}
	if h.method == http.MethodConnect {
		p.connect(ctx, c, br, h)
		return
	}
	p.plain(ctx, c, br, h)
}

func (p *Proxy) refuseConn(c net.Conn, r *Refusal) {
	p.logf("refused %s: %s", c.RemoteAddr(), r.Reason)
	_ = c.SetWriteDeadline(time.Now().Add(p.cfg.HeaderTimeout))
	writeRefusal(c, r)
}

// dial decides host:port and dials the first checked address that answers.
func (p *Proxy) dial(ctx context.Context, host string, port int) (net.Conn, *Refusal) {
	addrs, err := p.Decide(ctx, host, port)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return nil, r
		}
		return nil, refuse(http.StatusForbidden, "%v", err)
	}
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		u, err := p.cfg.Dial(dctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return u, nil
		}
		last = err
	}
	return nil, refuse(http.StatusBadGateway, "dial %s:%d: %v", host, port, last)
}

func (p *Proxy) connect(ctx context.Context, c net.Conn, br *bufio.Reader, h *head) {
	host, ps, err := net.SplitHostPort(h.target)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 1 || port > 65535 || host == "" {
		p.refuseConn(c, refuse(http.StatusBadRequest, "CONNECT wants host:port, got %q", trunc(h.target)))
		return
	}
	if len(h.hosts) == 1 && !sameAuthority(h.hosts[0], host, port, port) {
		p.refuseConn(c, refuse(http.StatusBadRequest, "Host header %q does not name the CONNECT target %q", trunc(h.hosts[0]), trunc(h.target)))
		return
	}
	u, r := p.dial(ctx, host, port)
	if r != nil {
		p.refuseConn(c, r)
		return
	}
	defer u.Close()
	p.logf("tunnel %s -> %s:%d (%s)", c.RemoteAddr(), host, port, u.RemoteAddr())
	_ = c.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	p.pipe(c, br, u, u)
}

// pipe copies both ways until both have ended, or until neither carried a
// byte for IdleTimeout, or a side fails. An end of one direction (a
// half-close) is passed on as a half-close.
func (p *Proxy) pipe(a net.Conn, ar io.Reader, b net.Conn, brd io.Reader) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var once sync.Once
	abort := func() { once.Do(func() { a.Close(); b.Close() }) }
	var wg sync.WaitGroup
	copyDir := func(dst net.Conn, src net.Conn, r io.Reader) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			_ = src.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
			n, err := r.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				_ = dst.SetWriteDeadline(time.Now().Add(p.cfg.IdleTimeout))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					abort()
					return
				}
				last.Store(time.Now().UnixNano())
			}
			if err == nil {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < p.cfg.IdleTimeout {
				continue // the other direction is busy
			}
			if errors.Is(err, io.EOF) {
				closeWrite(dst)
				// The other direction may go on (a half-closed
				// connection); it is bounded by the idle timeout.
				return
			}
			abort()
			return
		}
	}
	wg.Add(2)
	go copyDir(b, a, ar)
	go copyDir(a, b, brd)
	wg.Wait()
	abort()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// hopHeaders are removed from forwarded requests and responses.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, k := range strings.Split(f, ",") {
			if k = textproto.TrimString(k); k != "" {
				h.Del(k)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// idleConn extends its deadline before every read and write.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}

// plain forwards one absolute-form http:// request and its response, then
// closes (the response says Connection: close).
func (p *Proxy) plain(ctx context.Context, c net.Conn, br *bufio.Reader, h *head) {
	ic := idleConn{Conn: c, idle: p.cfg.IdleTimeout}
	rest := bufio.NewReader(io.MultiReader(bytes.NewReader(h.raw), readerFunc(func(b []byte) (int, error) {
		_ = c.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
		return br.Read(b)
	})))
	req, err := http.ReadRequest(rest)
	if err != nil {
		p.refuseConn(c, refuse(http.StatusBadRequest, "bad request: %v", err))
		return
	}
	if !req.URL.IsAbs() || req.URL.Host == "" {
		p.refuseConn(c, refuse(http.StatusBadRequest, "a proxy request names its URL in full (http://host/path); set HTTP_PROXY"))
		return
	}
	if req.URL.Scheme != "http" {
		p.refuseConn(c, refuse(http.StatusBadRequest, "scheme %q: use CONNECT for https (HTTPS_PROXY)", req.URL.Scheme))
		return
	}
	host, port := req.URL.Hostname(), 80
	if ps := req.URL.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			p.refuseConn(c, refuse(http.StatusBadRequest, "bad port %q", ps))
			return
		}
		port = n
	}
	if len(h.hosts) == 1 && !sameAuthority(h.hosts[0], host, port, 80) {
		p.refuseConn(c, refuse(http.StatusBadRequest, "Host header %q does not name the request's host %q", trunc(h.hosts[0]), trunc(req.URL.Host)))
		return
	}
	u, r := p.dial(ctx, host, port)
	if r != nil {
		p.refuseConn(c, r)
		return
	}
	defer u.Close()
	p.logf("http %s -> %s %s:%d (%s)", c.RemoteAddr(), req.Method, host, port, u.RemoteAddr())
	iu := idleConn{Conn: u, idle: p.cfg.IdleTimeout}
	stripHop(req.Header)
	req.Header.Del("Expect") // no 100-continue dance: the body follows the head
	req.Host = req.URL.Host
	req.Close = true
	req.RequestURI = ""
	if err := req.Write(iu); err != nil {
		p.refuseConn(c, refuse(http.StatusBadGateway, "send request to %s: %v", host, err))
		return
	}
	ur := bufio.NewReader(iu)
	resp, err := http.ReadResponse(ur, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 {
		resp.Body.Close()
		resp, err = http.ReadResponse(ur, req)
	}
	if err != nil {
		p.refuseConn(c, refuse(http.StatusBadGateway, "read response from %s: %v", host, err))
		return
	}
	defer resp.Body.Close()
	stripHop(resp.Header)
	resp.Close = true
	_ = resp.Write(ic)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }
