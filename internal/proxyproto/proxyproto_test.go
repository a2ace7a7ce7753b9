package proxyproto

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestLineRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		src, dst net.Addr
		want     string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.88.0.7"), Port: 40000}, &net.TCPAddr{IP: net.ParseIP("10.88.0.2"), Port: 7070}, "PROXY TCP4 10.88.0.7 10.88.0.2 40000 7070\r\n"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:172.17.0.3"), Port: 1}, &net.TCPAddr{IP: net.ParseIP("172.17.0.1"), Port: 2}, "PROXY TCP4 172.17.0.3 172.17.0.1 1 2\r\n"},
		{&net.TCPAddr{IP: net.ParseIP("fd00::5"), Port: 9}, &net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 80}, "PROXY TCP6 fd00::5 fd00::1 9 80\r\n"},
	} {
		line := Line(tc.src, tc.dst)
		if line != tc.want {
			t.Fatalf("Line = %q, want %q", line, tc.want)
		}
		r := strings.NewReader(line + "GET / HTTP/1.1\r\n")
		got, src, err := Read(r)
		if err != nil || got != line {
			t.Fatalf("Read(%q) = %q, %v", line, got, err)
		}
		if want := tc.src.(*net.TCPAddr).AddrPort(); src.Addr() != want.Addr().Unmap() || src.Port() != want.Port() {
			t.Fatalf("Read(%q) source %v, want %v", line, src, want)
		}
		rest, _ := io.ReadAll(r)
		if string(rest) != "GET / HTTP/1.1\r\n" {
			t.Fatalf("Read consumed past the line: rest %q", rest)
		}
	}
}

func TestReadRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"http":         "GET / HTTP/1.1\r\n",
		"no CRLF":      "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
		"UNKNOWN":      "PROXY UNKNOWN\r\n",
		"bad source":   "PROXY TCP4 1.2.3.x 5.6.7.8 1 2\r\n",
		"bad dest":     "PROXY TCP4 1.2.3.4 nope 1 2\r\n",
		"bad port":     "PROXY TCP4 1.2.3.4 5.6.7.8 70000 2\r\n",
		"bad dst port": "PROXY TCP4 1.2.3.4 5.6.7.8 1 x\r\n",
		"too long":     "PROXY TCP4 " + strings.Repeat("1", 200) + "\r\n",
		"cut short":    "PROXY TCP4 1.2.3.4",
		"extra field":  "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
	} {
		if line, _, err := Read(strings.NewReader(in)); err == nil {
			t.Errorf("%s: Read(%q) accepted %q", name, in, line)
		}
	}
}

// Listener hands on only connections that open with a PROXY line, with the
// address the line names as their peer; others are closed, and a connection
// that never sends its line does not hold Accept past the timeout.
func TestListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listener{Listener: inner, Timeout: 200 * time.Millisecond}
	defer l.Close()
	dial := func(first string) net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if first != "" {
			if _, err := io.WriteString(c, first); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	silent := dial("")                    // never sends a line: dropped at the timeout
	bad := dial("GET / HTTP/1.1\r\n\r\n") // not a PROXY line: closed
	dial("PROXY TCP4 10.88.0.9 10.88.0.2 4242 7070\r\nhello")
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.RemoteAddr().String(); got != "10.88.0.9:4242" {
		t.Fatalf("RemoteAddr %s, want the PROXY line's 10.88.0.9:4242", got)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("after the line: %q %v", buf, err)
	}
	for name, d := range map[string]net.Conn{"silent": silent, "bad": bad} {
		_ = d.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := d.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s connection was not closed (read %d)", name, n)
		}
	}
}
