// Package proxyproto writes and reads PROXY protocol v1 lines, the one line a
// trusted relay (the action's Docker relay, the kubernetes relay pod) writes
// before any byte of the sandbox it carries, naming the sandbox's address, so
// that the gateway can bind each per-attempt token to its sandbox.
package proxyproto

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// MaxLine is the longest PROXY protocol v1 line, CRLF included.
const MaxLine = 107

// Line is the PROXY protocol v1 line for a connection from src to dst.
func Line(src, dst net.Addr) string {
	s, _ := netip.ParseAddrPort(src.String())
	d, _ := netip.ParseAddrPort(dst.String())
	fam := "TCP4"
	if !s.Addr().Unmap().Is4() {
		fam = "TCP6"
	}
	return fmt.Sprintf("PROXY %s %s %s %d %d\r\n", fam, s.Addr().Unmap(), d.Addr().Unmap(), s.Port(), d.Port())
}

// Read reads one PROXY protocol v1 line ("PROXY TCP4 SRC DST SPORT
// DPORT\r\n") a byte at a time, so nothing after it is consumed, and
// returns the line and the source address it names. Anything else (too
// long, no CRLF, another protocol, a bad address or port) is an error.
func Read(r io.Reader) (string, netip.AddrPort, error) {
	var line []byte
	var b [1]byte
	for len(line) < MaxLine && (len(line) == 0 || line[len(line)-1] != '\n') {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", netip.AddrPort{}, fmt.Errorf("read PROXY line: %w", err)
		}
		line = append(line, b[0])
	}
	f := strings.Fields(strings.TrimRight(string(line), "\r\n"))
	if len(f) != 6 || f[0] != "PROXY" || (f[1] != "TCP4" && f[1] != "TCP6") || !strings.HasSuffix(string(line), "\r\n") {
		return "", netip.AddrPort{}, fmt.Errorf("not a PROXY v1 line: %q", line)
	}
	ip, err := netip.ParseAddr(f[2])
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("PROXY line %q: %w", line, err)
	}
	if _, err := netip.ParseAddr(f[3]); err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("PROXY line %q: %w", line, err)
	}
	port, err := strconv.ParseUint(f[4], 10, 16)
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("PROXY line %q: %w", line, err)
	}
	if _, err := strconv.ParseUint(f[5], 10, 16); err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("PROXY line %q: %w", line, err)
	}
	return string(line), netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// Listener wraps a listener whose every connection starts with a PROXY line
// (a relay's): Accept reads the line, within Timeout (10 s when zero), and
// returns a connection whose RemoteAddr is the address the line names; a
// connection without a valid line is closed and skipped. Lines are read one
// connection at a time: this is for probes and tests (`steward doctor`'s
// stand-in gateway); the gateway reads them per connection, under its limits.
type Listener struct {
	net.Listener
	Timeout time.Duration
}

// Conn is an accepted connection with the address its PROXY line named.
type Conn struct {
	net.Conn
	Source net.Addr
}

// RemoteAddr is the address the connection's PROXY line named.
func (c Conn) RemoteAddr() net.Addr { return c.Source }

// Accept returns the next connection that opened with a valid PROXY line.
func (l Listener) Accept() (net.Conn, error) {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		_, ap, err := Read(c)
		_ = c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close()
			continue
		}
		return Conn{Conn: c, Source: net.TCPAddrFromAddrPort(ap)}, nil
	}
}
