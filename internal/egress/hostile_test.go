package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// An agent's attacks on its proxy (issue 24 item 7): requests smuggled
// behind an allowed one, spellings of names and addresses the rule must
// see through, and a second destination on one connection. Each case
// checks what reached the upstream (every request head it read) and what
// was dialled, not only the proxy's answer.

// heads is an upstream that reads every request on a connection until it
// ends, records each as "Host uri body", and answers each.
type heads struct {
	mu  sync.Mutex
	got []string
}

func (h *heads) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		h.mu.Lock()
		h.got = append(h.got, fmt.Sprintf("%s %s %q", req.Host, req.RequestURI, body))
		h.mu.Unlock()
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

func (h *heads) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func TestProxyHostileRequests(t *testing.T) {
	cases := []struct {
		name, req string
		status    int
		why       string   // in the proxy's answer
		upstream  []string // the request heads the upstream read, in order
	}{
		// A second request behind the first on one connection never
		// reaches anyone: the proxy forwards one request and closes.
		{"pipelined to another host", "GET http://good.test/a HTTP/1.1\r\nHost: good.test\r\n\r\nGET http://bad.test/b HTTP/1.1\r\nHost: bad.test\r\n\r\n",
			200, "ok", []string{`good.test /a ""`}},
		{"pipelined origin form", "GET http://good.test/a HTTP/1.1\r\nHost: good.test\r\n\r\nGET /b HTTP/1.1\r\nHost: good.test\r\n\r\n",
			200, "ok", []string{`good.test /a ""`}},
		{"pipelined behind a refusal", "GET http://bad.test/ HTTP/1.1\r\n\r\nGET http://good.test/b HTTP/1.1\r\n\r\n",
			403, "not in allowed_hosts", nil},
		{"CONNECT behind a refusal", "CONNECT bad.test:443 HTTP/1.1\r\n\r\nCONNECT good.test:443 HTTP/1.1\r\n\r\n",
			403, "not in allowed_hosts", nil},
		// Request smuggling: the upstream reads the request as the proxy
		// re-wrote it (one message, its framing unambiguous), never the
		// client's bytes; chunked wins over Content-Length, and what
		// follows the last chunk is a pipelined request (dropped).
		{"Content-Length and chunked", "POST http://good.test/a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 60\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://bad.test/b HTTP/1.1\r\nHost: bad.test\r\n\r\n",
			200, "ok", []string{`good.test /a ""`}},
		{"two Content-Lengths", "POST http://good.test/a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: bad.test\r\n\r\n",
			400, "bad request", nil},
		{"body holding a request", "POST http://good.test/a HTTP/1.1\r\nHost: good.test\r\nContent-Length: 35\r\n\r\nGET /b HTTP/1.1\r\nHost: bad.test\r\n\r\n",
			200, "ok", []string{`good.test /a "GET /b HTTP/1.1\r\nHost: bad.test\r\n\r\n"`}},
		// Spellings of the allowed name: normalized, forwarded under it.
		{"upper case and a trailing dot", "GET http://GOOD.Test./a HTTP/1.1\r\nHost: good.TEST.\r\n\r\n",
			200, "ok", []string{`GOOD.Test. /a ""`}},
		{"HTTP/1.0 without Host", "GET http://good.test/a HTTP/1.0\r\n\r\n",
			200, "ok", []string{`good.test /a ""`}},
		// Spellings of other names and addresses.
		{"two trailing dots", "CONNECT good.test..:443 HTTP/1.1\r\n\r\n", 403, "not a host name", nil},
		{"percent-encoded dot", "GET http://good%2etest/ HTTP/1.1\r\n\r\n", 400, "bad request", nil},
		{"percent-encoded name", "GET http://%62ad.test/ HTTP/1.1\r\n\r\n", 400, "bad request", nil},
		{"non-ASCII name", "GET http://göod.test/ HTTP/1.1\r\n\r\n", 403, "xn--", nil},
		{"IPv6 with a zone", "CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", 403, "IP address", nil},
		{"IPv4-mapped IPv6", "CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n", 403, "IP address", nil},
		{"IPv4-compatible IPv6", "GET http://[::7f00:1]/ HTTP/1.1\r\n\r\n", 403, "IP address", nil},
		{"IPvFuture", "CONNECT [v1.fe80::1]:443 HTTP/1.1\r\n\r\n", 403, "not a host name", nil},
		{"allowed name as userinfo", "CONNECT good.test@bad.test:443 HTTP/1.1\r\n\r\n", 403, "not a host name", nil},
		{"Host with userinfo", "GET http://good.test/ HTTP/1.1\r\nHost: bad.test@good.test\r\n\r\n", 400, "does not name", nil},
		{"folded Host", "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\n bad.test\r\n\r\n", 400, "", nil},
		{"tab in the request line", "CONNECT good.test:443\tHTTP/1.1\r\n\r\n", 400, "bad request line", nil},
		{"lower-case connect", "connect good.test:443 HTTP/1.1\r\n\r\n", 400, "", nil},
		{"absolute-form CONNECT", "CONNECT http://good.test:443 HTTP/1.1\r\n\r\n", 400, "host:port", nil},
		{"port as another spelling", "CONNECT good.test:0x1bb HTTP/1.1\r\n\r\n", 400, "host:port", nil},
		{"port 022 is 22", "CONNECT good.test:022 HTTP/1.1\r\n\r\n", 403, "port 22", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := &heads{}
			addr := upstream(t, up.serve)
			p := startProxy(t, Config{}, map[string]string{"10.9.0.1:80": addr, "10.9.0.1:443": addr})
			c := p.conn(t)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			// The proxy answers once and closes: read to the end.
			all, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			{
				resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(all))), nil)
				if err != nil {
					t.Fatalf("answer %q: %v", all, err)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.why) {
					t.Fatalf("%s %q, want %d %q", resp.Status, b, tc.status, tc.why)
				}
			}
			if n := strings.Count(string(all), "HTTP/1.1 "); n > 1 {
				t.Fatalf("%d answers on one connection: %q", n, all)
			}
			// The upstream has read everything it was sent once the proxy
			// closed (the proxy closes its side before the client's).
			got := up.all()
			if strings.Join(got, "|") != strings.Join(tc.upstream, "|") {
				t.Fatalf("the upstream read %q, want %q", got, tc.upstream)
			}
			if d := p.d.calls(); len(tc.upstream) == 0 && len(d) != 0 {
				t.Fatalf("a refused request dialled %v", d)
			}
		})
	}
}
