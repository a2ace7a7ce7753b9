package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/proxyproto"
)

// Limits bound what sandboxes can hold in the gateway, so that one hostile
// sandbox cannot exhaust the supervisor's memory, file descriptors or
// goroutines, nor slow other sandboxes' calls. Zero fields take the
// defaults in brackets; a negative count means unlimited.
type Limits struct {
	// ConnsPerAddr is the most open connections from one remote address (one
	// sandbox) [64]. Each HTTP/1.1 connection carries one request at a time,
	// so it also bounds a sandbox's concurrent requests. It does not apply to
	// 127.0.0.1 and ::1, where every local sandbox (and nothing else) comes
	// from: there only the global cap and the per-token caps hold.
	ConnsPerAddr int
	// Conns is the most open connections in all [4096].
	Conns int
	// RequestsPerToken is the most requests one token may have in the
	// gateway at once, queued or in flight [16].
	RequestsPerToken int
	// BodyBytesPerToken is the most request-body bytes one token may have
	// buffered at once [3 × MaxBodyBytes].
	BodyBytesPerToken int64
	// BodyBytes is the most request-body bytes buffered at once, all tokens
	// together [256 MiB].
	BodyBytes int64
	// BodyRate is how many request-body bytes per second the gateway reads
	// from one sandbox address, after a burst of one body cap [32 MiB/s]: a
	// sandbox looping oversized bodies costs the gateway little CPU.
	BodyRate int64
	// ReadHeaderTimeout bounds reading a request's headers [10s].
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body [60s].
	ReadTimeout time.Duration
	// WriteStall bounds each write to a client: a client that stops reading
	// its answer for this long is disconnected [60s].
	WriteStall time.Duration
	// IdleTimeout closes a keep-alive connection idle this long [120s].
	IdleTimeout time.Duration
}

func (l Limits) withDefaults(maxBody int64) Limits {
	if l.ConnsPerAddr == 0 {
		l.ConnsPerAddr = 64
	}
	if l.Conns == 0 {
		l.Conns = 4096
	}
	if l.RequestsPerToken == 0 {
		l.RequestsPerToken = 16
	}
	if l.BodyBytesPerToken == 0 {
		l.BodyBytesPerToken = 3 * maxBody
	}
	if l.BodyBytes == 0 {
		l.BodyBytes = 256 << 20
	}
	if l.BodyRate == 0 {
		l.BodyRate = 32 << 20
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = time.Minute
	}
	if l.WriteStall <= 0 {
		l.WriteStall = time.Minute
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 2 * time.Minute
	}
	return l
}

// connLimiter counts open connections per remote address and in all, across
// every listener the gateway serves.
type connLimiter struct {
	perAddr, total int
	mu             sync.Mutex
	open           map[netip.Addr]int
	n              int
	refusing       chan struct{} // bounds goroutines that answer refused connections
}

func newConnLimiter(perAddr, total int) *connLimiter {
	return &connLimiter{perAddr: perAddr, total: total, open: map[netip.Addr]int{}, refusing: make(chan struct{}, 64)}
}

// take counts a connection from ip in; it says why not when a cap is full.
func (c *connLimiter) take(ip netip.Addr) (ok bool, global bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > 0 && c.n >= c.total {
		return false, true
	}
	if c.perAddr > 0 && c.open[ip] >= c.perAddr && !sharedAddr(ip) {
		return false, false
	}
	c.n++
	c.open[ip]++
	return true, false
}

// takeGlobal counts a connection whose address is not known yet.
func (c *connLimiter) takeGlobal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > 0 && c.n >= c.total {
		return false
	}
	c.n++
	return true
}

// takeAddr counts, for a connection already counted globally, its address.
func (c *connLimiter) takeAddr(ip netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perAddr > 0 && c.open[ip] >= c.perAddr && !sharedAddr(ip) {
		return false
	}
	c.open[ip]++
	return true
}

func (c *connLimiter) putGlobal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
}

// sharedAddr: the address every local sandbox connects from.
func sharedAddr(ip netip.Addr) bool {
	return ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || ip == netip.IPv6Loopback()
}

func (c *connLimiter) put(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
	}
}

// Open returns the connections open now, in all.
func (c *connLimiter) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *connLimiter) wrap(ln net.Listener, grace time.Duration, proxied bool) net.Listener {
	return &limitListener{Listener: ln, c: c, grace: grace, proxied: proxied}
}

type limitListener struct {
	net.Listener
	c       *connLimiter
	grace   time.Duration
	proxied bool // connections start with a PROXY protocol v1 line (the relay)
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.proxied {
			if !l.c.takeGlobal() {
				l.refuse(conn, true)
				continue
			}
			return &proxyConn{Conn: conn, l: l}, nil
		}
		ip := remoteIP(conn.RemoteAddr())
		ok, global := l.c.take(ip)
		if ok {
			return &limitConn{Conn: conn, c: l.c, ip: ip}, nil
		}
		l.refuse(conn, global)
	}
}

// refuse answers a connection over a cap with a JSON error both SDK
// families read, then closes it. It never blocks Accept: the answer fits in
// an empty socket buffer, and the short linger that lets the client read it
// runs in a bounded number of goroutines (beyond that, the close is at once).
func (l *limitListener) refuse(conn net.Conn, global bool) {
	status, line, msg := 429, "429 Too Many Requests", "steward gateway: this sandbox has too many open connections to the gateway; close some (reuse keep-alive connections) and retry"
	if global {
		status, line, msg = 503, "503 Service Unavailable", "steward gateway: the gateway holds as many connections as it allows; retry shortly"
	}
	_ = status
	body := fmt.Sprintf(`{"type":"error","error":{"type":"rate_limit_error","code":"too_many_connections","param":null,"message":%q}}`, msg)
	resp := fmt.Sprintf("HTTP/1.1 %s\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", line, len(body), body)
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = conn.Write([]byte(resp))
	select {
	case l.c.refusing <- struct{}{}:
		go func() {
			defer func() { <-l.c.refusing }()
			// Half-close, then read what the client sent (briefly) so that
			// closing does not reset the connection before it read the answer.
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			_ = conn.SetReadDeadline(time.Now().Add(l.grace))
			buf := make([]byte, 4096)
			for n := 0; n < 1<<20; {
				k, err := conn.Read(buf)
				n += k
				if err != nil {
					break
				}
			}
			conn.Close()
		}()
	default:
		conn.Close()
	}
}

// proxyConn is a connection from the relay: its first line names the
// sandbox it carries (PROXY protocol v1), read on the connection's own
// goroutine when the server first asks for its remote address. The
// sandbox's address then counts against the per-address cap.
type proxyConn struct {
	net.Conn
	l      *limitListener
	once   sync.Once
	remote net.Addr
	ip     netip.Addr
	bad    bool
	closed sync.Once
}

func (c *proxyConn) RemoteAddr() net.Addr {
	c.once.Do(func() {
		c.remote = c.Conn.RemoteAddr()
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.l.grace))
		_, ap, err := proxyproto.Read(c.Conn)
		_ = c.Conn.SetReadDeadline(time.Time{})
		if err != nil {
			c.bad = true
			c.Conn.Close()
			return
		}
		if !c.l.c.takeAddr(ap.Addr()) {
			c.bad = true
			c.l.refuse(c.Conn, false)
			return
		}
		c.ip = ap.Addr()
		c.remote = net.TCPAddrFromAddrPort(ap)
	})
	return c.remote
}

func (c *proxyConn) Read(b []byte) (int, error) {
	c.RemoteAddr()
	if c.bad {
		return 0, net.ErrClosed
	}
	return c.Conn.Read(b)
}

func (c *proxyConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() {
		c.RemoteAddr() // settles ip; a no-op after the first call
		if c.ip.IsValid() {
			c.l.c.put(c.ip)
		} else {
			c.l.c.putGlobal()
		}
	})
	return err
}

type limitConn struct {
	net.Conn
	c    *connLimiter
	ip   netip.Addr
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.c.put(c.ip) })
	return err
}

// holdBody counts n more request-body bytes against the attempt's and the
// gateway's memory budgets; on refusal it names the status and the reason.
func (g *Gateway) holdBody(a *attempt, n int64) (int, string) {
	a.mu.Lock()
	if lim := g.limits.BodyBytesPerToken; lim > 0 && a.bodyMem+n > lim {
		held := a.bodyMem // read under the lock: other requests of the attempt change it
		a.mu.Unlock()
		return http.StatusTooManyRequests, fmt.Sprintf("steward gateway: this attempt's requests in the gateway already hold %d bytes of request bodies (at most %d at once); wait for one to finish", held, lim)
	}
	a.bodyMem += n
	a.mu.Unlock()
	g.mu.Lock()
	if lim := g.limits.BodyBytes; lim > 0 && g.bodyMem+n > lim {
		g.mu.Unlock()
		a.mu.Lock()
		a.bodyMem -= n
		a.mu.Unlock()
		return http.StatusServiceUnavailable, "steward gateway: the gateway holds as many request bytes as it allows; retry shortly"
	}
	g.bodyMem += n
	g.mu.Unlock()
	return 0, ""
}

func (g *Gateway) releaseBody(a *attempt, n int64) {
	if n == 0 {
		return
	}
	a.mu.Lock()
	a.bodyMem -= n
	a.mu.Unlock()
	g.mu.Lock()
	g.bodyMem -= n
	g.mu.Unlock()
}

// bodyChunk is the piece a body of unknown length is read in; pieces are
// pooled, so bodies refused for their size (a hostile sandbox's loop) cost
// no garbage.
const bodyChunk = 256 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, bodyChunk); return &b }}

// readBody reads a request body under the size cap and the memory budgets.
// held is what it counted against the budgets (release it when the request
// is done); status is 0 on success, else the answer's status and message.
func (g *Gateway) readBody(r *http.Request, a *attempt) (b []byte, held int64, status int, msg string) {
	max := g.cfg.MaxBodyBytes
	tooLarge := fmt.Sprintf("steward gateway: request body is larger than %d bytes, the most the gateway takes", max)
	if r.ContentLength > max {
		return nil, 0, http.StatusRequestEntityTooLarge, tooLarge
	}
	fail := func(err error) (int, string) {
		return http.StatusBadRequest, "steward gateway: read request body: " + readErr(err, g.limits.ReadTimeout)
	}
	ip := remoteIP(addrString(r.RemoteAddr))
	// pace spends n bytes of the sandbox's body rate, waiting when it is spent.
	pace := func(n int) error {
		return clock.Sleep(r.Context(), g.clock, g.rates.take(ip, n, g.clock.Now()))
	}
	if r.ContentLength >= 0 {
		// Declared length: one exact buffer.
		if st, m := g.holdBody(a, r.ContentLength); st != 0 {
			return nil, 0, st, m
		}
		held = r.ContentLength
		buf := make([]byte, r.ContentLength)
		for off := 0; off < len(buf); {
			end := off + bodyChunk
			if end > len(buf) {
				end = len(buf)
			}
			n, err := io.ReadFull(r.Body, buf[off:end])
			off += n
			if err == nil {
				err = pace(n)
			}
			if err != nil {
				st, m := fail(err)
				return nil, held, st, m
			}
		}
		return buf, held, 0, ""
	}
	// Unknown length (chunked): pooled pieces, joined at the end.
	var chunks []*[]byte
	defer func() {
		for _, c := range chunks {
			chunkPool.Put(c)
		}
	}()
	var total int64
	for {
		if st, m := g.holdBody(a, bodyChunk); st != 0 {
			return nil, held, st, m
		}
		held += bodyChunk
		c := chunkPool.Get().(*[]byte)
		chunks = append(chunks, c)
		n, err := io.ReadFull(r.Body, *c)
		total += int64(n)
		if total > max {
			return nil, held, http.StatusRequestEntityTooLarge, tooLarge
		}
		if perr := pace(n); perr != nil {
			st, m := fail(perr)
			return nil, held, st, m
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			st, m := fail(err)
			return nil, held, st, m
		}
	}
	buf := make([]byte, 0, total)
	for _, c := range chunks {
		k := int64(bodyChunk)
		if rest := total - int64(len(buf)); rest < k {
			k = rest
		}
		buf = append(buf, (*c)[:k]...)
	}
	return buf, held, 0, ""
}

// addrString wraps a "host:port" string as a net.Addr for remoteIP.
type addrString string

func (a addrString) Network() string { return "tcp" }
func (a addrString) String() string  { return string(a) }

func readErr(err error, limit time.Duration) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("the request did not arrive within %s", limit)
	}
	return err.Error()
}

// rateBuckets meter request-body bytes per sandbox address: a token bucket
// holding up to burst bytes, refilled at rate bytes per second.
type rateBuckets struct {
	rate, burst float64
	mu          sync.Mutex
	b           map[netip.Addr]*bucket
}

type bucket struct {
	level float64
	at    time.Time
}

func newRateBuckets(rate, burst int64) *rateBuckets {
	return &rateBuckets{rate: float64(rate), burst: float64(burst), b: map[netip.Addr]*bucket{}}
}

// take spends n bytes for ip and returns how long to wait before reading on.
func (r *rateBuckets) take(ip netip.Addr, n int, now time.Time) time.Duration {
	if r == nil || r.rate <= 0 || n <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bk := r.b[ip]
	if bk == nil {
		if len(r.b) > 100000 {
			r.b = map[netip.Addr]*bucket{} // forget idle addresses rather than grow without bound
		}
		bk = &bucket{level: r.burst, at: now}
		r.b[ip] = bk
	}
	bk.level += now.Sub(bk.at).Seconds() * r.rate
	if bk.level > r.burst {
		bk.level = r.burst
	}
	bk.at = now
	bk.level -= float64(n)
	if bk.level >= 0 {
		return 0
	}
	return time.Duration(-bk.level / r.rate * float64(time.Second))
}
