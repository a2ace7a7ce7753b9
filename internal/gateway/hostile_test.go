package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
)

// otherSecret is a value from the configurable secret list.
const otherSecret = "ghp_OTHERsecretVALUE0123456789"

// TestHostileUpstreamKeyNeverReturns plays an upstream (or a proxy in front
// of it) that echoes the key and a listed secret everywhere it can: a 200
// body, headers, a redirect, an SSE line split across chunks, an error after
// retries, and a body in an encoding the gateway did not ask for. Nothing the
// sandbox receives holds either value.
func TestHostileUpstreamKeyNeverReturns(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		fl := w.(http.Flusher)
		switch r.URL.Query().Get("after") { // a parameter the gateway forwards steers the case
		case "body200":
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the key is %s and the token %s"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, realKey, otherSecret)
		case "header":
			w.Header().Set("X-Echo-Key", realKey)
			w.Header().Add("X-Echo-Other", "Bearer "+otherSecret)
			w.Header().Set("X-"+realKey, "1")
			w.Header()["x-upper-"+strings.ToUpper(otherSecret)] = []string{"1"} // sent as is, not canonicalised
			w.Header().Set("Set-Cookie", "k="+realKey)
			io.WriteString(w, chatOK)
		case "redirect":
			w.Header().Set("Location", "https://evil.invalid/steal?k="+realKey)
			w.WriteHeader(http.StatusFound)
			fmt.Fprintf(w, "moved: %s", realKey)
		case "redirect307":
			w.Header().Set("Location", "/v1/chat/completions?k="+realKey)
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			// The key split across chunks inside one data line, and the
			// secret split across three chunks.
			half := len(realKey) / 2
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"`+realKey[:half])
			fl.Flush()
			io.WriteString(w, realKey[half:]+` and `+otherSecret[:5])
			fl.Flush()
			io.WriteString(w, otherSecret[5:12])
			fl.Flush()
			io.WriteString(w, otherSecret[12:]+`"}}]}`+"\n\n")
			fl.Flush()
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
		case "sse-tail":
			// The stream ends in the middle of a key prefix: held bytes must
			// still come out at the end.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"usage\":{\"prompt_tokens\":1}}\n\ndata: tail "+realKey[:6])
		case "error500":
			w.Header().Set("X-Debug", "key="+realKey)
			w.WriteHeader(500)
			fmt.Fprintf(w, `{"error":{"message":"bad key %s"}}`, realKey)
		case "encoded":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "\x1b"+realKey)
		case "404":
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":{"message":"no model for %s"}}`, otherSecret)
		}
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Secrets: []string{otherSecret}, Clock: clock.NewInstant(testEpoch), RetryLimit: 1})
	tok := h.g.Issue("att-hostile", nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		name   string
		status int
		want   string
	}{
		{"body200", 200, "the key is [redacted] and the token [redacted]"},
		{"header", 200, `"hi"`},
		{"redirect", 502, "redirect (302)"},
		{"redirect307", 502, "redirect (307)"},
		{"sse", 200, `[redacted] and [redacted]"}}]}`},
		{"sse-tail", 200, "data: tail " + realKey[:6]},
		{"error500", 500, "bad key [redacted]"},
		{"encoded", 502, "content encoding (br)"},
		{"404", 404, "no model for [redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions?after="+c.name, strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var seen strings.Builder
			for k, vs := range resp.Header {
				fmt.Fprintf(&seen, "%s: %s\n", k, strings.Join(vs, ","))
			}
			seen.Write(b)
			all := seen.String()
			// Header names arrive case-folded (canonicalised by Go, folded on
			// the wire by HTTP/2): a secret in a name is caught in any case.
			if low := strings.ToLower(all); strings.Contains(low, strings.ToLower(realKey)) || strings.Contains(low, strings.ToLower(otherSecret)) {
				t.Fatalf("a secret reached the sandbox:\n%s", all)
			}
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
				t.Fatalf("got %d, want %d with %q:\n%s", resp.StatusCode, c.status, c.want, all)
			}
			if resp.Header.Get("Location") != "" || resp.Header.Get("Set-Cookie") != "" {
				t.Fatalf("Location or Set-Cookie passed on:\n%s", all)
			}
		})
	}
	if strings.Contains(h.log.String(), realKey) || strings.Contains(h.log.String(), otherSecret) {
		t.Fatalf("a secret is in the log:\n%s", h.log.String())
	}
}

// TestStreamScrubberEverySplit writes a stream holding secrets in two pieces
// at every possible split point: the output is always the scrubbed whole.
func TestStreamScrubberEverySplit(t *testing.T) {
	s := newScrubber(realKey, otherSecret, "short")
	in := "data: x" + realKey + "y" + realKey[:5] + "z" + otherSecret + realKey + "\n\ntail" + realKey[:9]
	want := strings.ReplaceAll(strings.ReplaceAll(in, realKey, redacted), otherSecret, redacted)
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j += 7 {
			z := streamScrubber{s: s}
			var out []byte
			out = append(out, z.write([]byte(in[:i]))...)
			out = append(out, z.write([]byte(in[i:j]))...)
			out = append(out, z.write([]byte(in[j:]))...)
			out = append(out, z.flush()...)
			if string(out) != want {
				t.Fatalf("split at %d,%d:\n got %q\nwant %q", i, j, out, want)
			}
		}
	}
	// An event's end is never held back.
	z := streamScrubber{s: s}
	if got := string(z.write([]byte("data: a\n\n"))); got != "data: a\n\n" {
		t.Fatalf("held back %q", got)
	}
}

// rawRequest sends an exact request line, so no client cleans the path.
func rawRequest(t *testing.T, base, method, target, tok string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", method, target, tok)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestDotSegmentsAndEncodedSeparatorsRefused sends paths that a naive route
// check accepts but the upstream may resolve elsewhere (with the real key):
// dot segments, percent-encoded dots, slashes and backslashes, double
// encoding, encoded query and fragment characters. None reaches the upstream.
func TestDotSegmentsAndEncodedSeparatorsRefused(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, `{"object":"list","data":[]}`)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-path", nil)
	for _, target := range []string{
		"/v1/models/..",
		"/v1/models/.",
		"/v1/models/%2e%2e",
		"/v1/models/%2E%2E",
		"/v1/models/.%2e",
		"/v1/models/%252e%252e",
		"/v1/models/..%2f..%2forganization",
		"/v1/models/x%2f..%2f..%2fadmin",
		"/v1/models/..%5c..%5cadmin",
		"/v1/models/x%3Fa=1",
		"/v1/models/x%23frag",
		"/v1/models/x\\..\\admin",
		"/v1/./models",
		"/v1//models",
		"/v1/models/../models",
		"/v1/chat/completions/..",
		"/v1/chat/%2e%2e/completions",
	} {
		method := "GET"
		if strings.Contains(target, "chat") {
			method = "POST"
		}
		status, body := rawRequest(t, h.url, method, target, tok)
		if status != 400 && status != 404 {
			t.Errorf("%s %s: got %d %s, want a refusal", method, target, status, body)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("refused paths reached the upstream %d times", n)
	}
	// The routes themselves still work.
	if status, body := rawRequest(t, h.url, "GET", "/v1/models/ft:gpt-4o-mini:org:name:abc.1", tok); status != 200 {
		t.Fatalf("a model id with colons and dots: %d %s", status, body)
	}
}

var spaces = []byte(strings.Repeat(" ", 4096))

// zeros is an endless body that costs its sender no memory.
type zeros struct{ n, max int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n >= z.max {
		return 0, io.EOF
	}
	if int64(len(p)) > z.max-z.n {
		p = p[:z.max-z.n]
	}
	copy(p, spaces)
	for i := len(spaces); i < len(p); i += copy(p[i:], p[:i]) {
	}
	if z.n == 0 {
		p[0] = '{'
	}
	z.n += int64(len(p))
	return len(p), nil
}

// dialFrom connects to the gateway from a given loopback address (one
// "sandbox" per address).
func dialFrom(src, gw string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", strings.TrimPrefix(gw, "http://"))
}

func clientFrom(src string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// heapPeak samples the heap until stop is closed and returns its peak.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// TestHostileSandboxIsBounded plays a sandbox (127.0.0.2) that opens
// thousands of connections trickling their headers, sends huge bodies
// (declared and chunked), trickles a body forever and floods its token with
// concurrent requests, while a polite sandbox (127.0.0.1) keeps calling. The
// hostile one gets clear JSON refusals, the supervisor's heap stays bounded,
// and every polite call succeeds.
func TestHostileSandboxIsBounded(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"hold":true`) {
			<-release
		}
		io.WriteString(w, chatOK)
	})
	defer releaseOnce.Do(func() { close(release) })
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, MaxConnections: 200,
		Limits: Limits{ReadTimeout: 3 * time.Second, ReadHeaderTimeout: 2 * time.Second}})
	hostile := h.g.Issue("att-hostile", nil)
	polite := h.g.Issue("att-polite", nil)

	stop := make(chan struct{})
	peak := heapPeak(stop)

	// 1. Thousands of connections that never finish their headers.
	var conns []net.Conn
	refused := 0
	for i := 0; i < 2000; i++ {
		c, err := dialFrom("127.0.0.2", h.url)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// The refused ones got a JSON 429 and were closed; read a few.
	for _, c := range conns[len(conns)-20:] {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 429 && strings.Contains(string(b), "too many open connections") {
			refused++
		}
	}
	if refused != 20 {
		t.Fatalf("connections over the per-sandbox cap: %d of the last 20 got a 429", refused)
	}
	if open := h.g.conns.Open(); open > 64 {
		t.Fatalf("%d connections open, want at most 64 (the per-sandbox cap)", open)
	}
	// The polite sandbox still gets through.
	pc := clientFrom("127.0.0.1", 4)
	politeCall := func() {
		t.Helper()
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Authorization", "Bearer "+polite)
		resp, err := pc.Do(req)
		if err != nil {
			t.Fatalf("polite call: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("polite call: %d %s", resp.StatusCode, b)
		}
	}
	politeCall()
	for _, c := range conns {
		c.Close()
	}
	conns = nil

	hc := clientFrom("127.0.0.2", 64)
	send := func(body io.Reader, cl int64, hdr string) (int, string) {
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", body)
		req.ContentLength = cl
		req.Header.Set("Authorization", "Bearer "+hostile)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	// 2. A declared 1 GiB body is refused before a byte of it is read.
	if st, b := send(&zeros{max: 1 << 30}, 1<<30, ""); st != 413 || !strings.Contains(b, "larger than") {
		t.Fatalf("declared huge body: %d %s", st, b)
	}
	// 3. 24 concurrent chunked 40 MiB bodies: each stops at the cap, and the
	// token's body memory is capped too.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := send(&zeros{max: 40 << 20}, -1, "")
			mu.Lock()
			codes[st]++
			mu.Unlock()
			politeCall()
		}()
	}
	wg.Wait()
	for st := range codes {
		if st != 413 && st != 429 && st != 400 && st != 0 {
			t.Fatalf("huge chunked bodies: statuses %v", codes)
		}
	}
	if codes[413] == 0 {
		t.Fatalf("huge chunked bodies: statuses %v, want 413s", codes)
	}
	// 4. A body trickled a byte at a time cannot extend its deadline.
	c, err := dialFrom("127.0.0.2", h.url)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n{", hostile)
	trickleDone := make(chan struct{})
	go func() {
		defer close(trickleDone)
		for {
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the attacker's pace, not synchronisation
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "did not arrive within") {
			t.Fatalf("trickled body: %d %s", resp.StatusCode, b)
		}
	}
	c.Close()
	<-trickleDone
	politeCall()
	// 5. Flooding one token with concurrent requests: at most 16 get in, the
	// rest are told to wait, and the polite token is untouched.
	codes = map[int]int{}
	refusedCh := make(chan struct{}, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := send(strings.NewReader(`{"hold":true}`), -1, "")
			mu.Lock()
			codes[st]++
			mu.Unlock()
			if st == 429 {
				refusedCh <- struct{}{}
			}
			if st == 429 && !strings.Contains(b, "requests in the gateway") {
				t.Errorf("flood refusal: %s", b)
			}
		}()
	}
	for i := 0; i < 24; i++ { // the 24 beyond the 16 admitted are refused at once
		<-refusedCh
	}
	politeCall()
	releaseOnce.Do(func() { close(release) })
	wg.Wait()
	if codes[200] != 16 || codes[429] != 24 {
		t.Fatalf("flood: statuses %v, want 16 × 200 and 24 × 429", codes)
	}
	close(stop)
	if p := <-peak; p > 160<<20 {
		t.Fatalf("heap peaked at %d MiB under the hostile sandbox, want ≤ 160 MiB", p>>20)
	}
}

// TestTokenBoundToAddress: a bound token works only from its addresses
// (127.0.0.3 here); from another it gets 401 saying so; unbound tokens work
// from anywhere; binding a revoked token fails.
func TestTokenBoundToAddress(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	bound, free := h.g.Issue("bound", nil), h.g.Issue("free", nil)
	if err := h.g.Bind(bound, netip.MustParseAddr("127.0.0.3")); err != nil {
		t.Fatal(err)
	}
	call := func(src, tok string) (int, string) {
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := clientFrom(src, 1).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if st, b := call("127.0.0.3", bound); st != 200 {
		t.Fatalf("bound token from its address: %d %s", st, b)
	}
	if st, b := call("127.0.0.4", bound); st != 401 || !strings.Contains(b, "belongs to another sandbox") {
		t.Fatalf("bound token from another address: %d %s", st, b)
	}
	if st, b := call("127.0.0.4", free); st != 200 {
		t.Fatalf("unbound token: %d %s", st, b)
	}
	h.g.Revoke(bound)
	if err := h.g.Bind(bound, netip.MustParseAddr("127.0.0.3")); err == nil {
		t.Fatal("bound a revoked token")
	}
}

// TestProxiedListenerBindsTheRelayedSandbox: behind the in-container relay,
// every connection names its sandbox in a PROXY line; token binding and the
// per-sandbox connection cap use that address, and a connection without the
// line gets nothing.
func TestProxiedListenerBindsTheRelayedSandbox(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, chatOK)
	})
	g, err := New(Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Limits: Limits{ConnsPerAddr: 2, ReadHeaderTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.ServeProxied(ctx, ln) }()
	tok := g.Issue("relayed", nil)
	if err := g.Bind(tok, netip.MustParseAddr("172.30.0.5")); err != nil {
		t.Fatal(err)
	}
	open := func(proxy string) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, proxy)
		return c
	}
	ask := func(c net.Conn) (int, string) {
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", tok)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if st, b := ask(open("PROXY TCP4 172.30.0.5 172.30.0.1 40000 8750\r\n")); st != 200 {
		t.Fatalf("from the bound sandbox: %d %s", st, b)
	}
	if st, b := ask(open("PROXY TCP4 172.30.0.6 172.30.0.1 40001 8750\r\n")); st != 401 || !strings.Contains(b, "another sandbox") {
		t.Fatalf("from another sandbox: %d %s", st, b)
	}
	if st, _ := ask(open("")); st != 0 {
		t.Fatalf("a connection without a PROXY line was answered: %d", st)
	}
	// The per-sandbox cap counts the relayed address: two held, the third
	// refused. An answer on each held connection shows the server read its
	// line and counted it; keep-alive holds it open afterwards.
	tok7 := g.Issue("relayed-7", nil)
	if err := g.Bind(tok7, netip.MustParseAddr("172.30.0.7")); err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{1, 2} {
		c := open(fmt.Sprintf("PROXY TCP4 172.30.0.7 172.30.0.1 %d 8750\r\n", port))
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", tok7)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("held connection %d: %v", port, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("held connection %d: %s", port, resp.Status)
		}
	}
	c := open("PROXY TCP4 172.30.0.7 172.30.0.1 3 8750\r\n")
	if st, b := ask(c); st != 429 || !strings.Contains(b, "too many open connections") {
		t.Fatalf("third connection of one relayed sandbox: %d %s", st, b)
	}
}

// TestBodyRatePerSandbox: one body cap passes at once, then a sandbox's
// bodies are read at the rate; another sandbox has its own bucket.
func TestBodyRatePerSandbox(t *testing.T) {
	r := newRateBuckets(1<<20, 8<<20) // 1 MiB/s after an 8 MiB burst
	t0 := time.Unix(1000, 0)
	a, b := netip.MustParseAddr("172.30.0.2"), netip.MustParseAddr("172.30.0.3")
	if d := r.take(a, 8<<20, t0); d != 0 {
		t.Fatalf("the burst waited %v", d)
	}
	if d := r.take(a, 1<<20, t0); d != time.Second {
		t.Fatalf("1 MiB past the burst: wait %v, want 1s", d)
	}
	if d := r.take(b, 4<<20, t0); d != 0 {
		t.Fatalf("another sandbox waited %v", d)
	}
	if d := r.take(a, 1<<20, t0.Add(3*time.Second)); d != 0 {
		t.Fatalf("after refilling: wait %v", d)
	}
}

// TestSandboxCannotRedirectTheKey plays an agent that keeps to the allowed
// routes but asks the upstream, through headers, to do something else with
// the real key: another method (DELETE a fine-tuned model through a method
// override a framework may honour), another organization or project the
// key can reach. The upstream sees none of those headers; the request's own
// headers (content type, the SDK's) still pass.
func TestSandboxCannotRedirectTheKey(t *testing.T) {
	seen := make(chan http.Header, 1)
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		seen <- r.Header.Clone()
		io.WriteString(w, `{"id":"ft:gpt-4o-mini:org:name:abc","object":"model"}`)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-hdr", nil)
	req, err := http.NewRequest("GET", h.url+"/v1/models/ft:gpt-4o-mini:org:name:abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for _, k := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		req.Header.Set(k, "DELETE")
	}
	req.Header.Set("OpenAI-Organization", "org-someone-else")
	req.Header.Set("OpenAI-Project", "proj_someone_else")
	req.Header.Set("X-Stainless-Lang", "python")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := <-seen
	for _, k := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "OpenAI-Organization", "OpenAI-Project"} {
		if v := got.Get(k); v != "" {
			t.Errorf("the upstream got %s: %s from the sandbox", k, v)
		}
	}
	if got.Get("X-Stainless-Lang") != "python" {
		t.Error("an SDK's own header was dropped")
	}
}

// TestGatewayForwardsAllowlistOnly plays a sandbox that sends, with its
// token, the headers a proxy or framework in front of the upstream trusts
// (X-Forwarded-*, Forwarded, X-Original-URL, X-Rewrite-URL, X-Real-IP),
// headers of its own invention, and query parameters the SDKs never send.
// None reaches the upstream with the real key; what the SDKs send does.
func TestGatewayForwardsAllowlistOnly(t *testing.T) {
	type seenReq struct {
		h http.Header
		q url.Values
	}
	seen := make(chan seenReq, 1)
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		seen <- seenReq{r.Header.Clone(), r.URL.Query()}
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-allow", nil)
	req, err := http.NewRequest("POST", h.url+"/v1/chat/completions?beta=true&api-version=2024-06-01&admin=1&redirect_uri=https://evil.invalid&key="+tok,
		strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	dropped := []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Prefix", "Forwarded",
		"X-Original-URL", "X-Rewrite-URL", "X-Real-IP", "X-Envoy-Original-Path", "X-Anything-Else", "Api-Key", "Cookie"}
	for _, k := range dropped {
		req.Header.Set(k, "evil.invalid")
	}
	kept := map[string]string{"X-Stainless-Lang": "python", "X-Stainless-Retry-Count": "0", "User-Agent": "OpenAI/Python 1.0",
		"Openai-Beta": "assistants=v2", "Idempotency-Key": "stainless-retry-1", "Anthropic-Beta": "tools-2024"}
	for k, v := range kept {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := <-seen
	for _, k := range dropped {
		if v := got.h.Get(k); v != "" {
			t.Errorf("the upstream got %s: %s from the sandbox", k, v)
		}
	}
	for k, v := range kept {
		if got.h.Get(k) != v {
			t.Errorf("the SDKs' %s was not passed on: %q", k, got.h.Get(k))
		}
	}
	if got.h.Get("Authorization") != "Bearer "+realKey {
		t.Errorf("the upstream's Authorization is %q", got.h.Get("Authorization"))
	}
	want := url.Values{"beta": {"true"}, "api-version": {"2024-06-01"}}
	if got.q.Encode() != want.Encode() {
		t.Errorf("the upstream's query is %q, want %q", got.q.Encode(), want.Encode())
	}
}

// TestHostileAgentRequestTooLargeIsNotCongestion: an agent whose request
// asks for more tokens than the key allows in a minute (a huge max_tokens,
// or a context grown past it) gets OpenAI's 429 "Request too large … on
// tokens per min (TPM)", which no wait ever lets through. It is not
// congestion: the agent gets that 429 at once, with X-Should-Retry: false,
// after one try, and the gateway's pace is not cut. Before, it was retried
// (8 tries, each a 429 to the key), and each was a rate-limit episode that
// cut the pace factor by a tenth for every sample on the gateway: on a
// simulated key (1 200 RPM, 10 s calls) an agent sending one such request in
// twenty took the lone gateway from 0.995 of the key to 0.196.
func TestHostileAgentRequestTooLargeIsNotCongestion(t *testing.T) {
	const tooLarge = `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 1000011. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "1200")
		h.Set("x-ratelimit-remaining-requests", "1190")
		h.Set("x-ratelimit-reset-requests", "500ms")
		h.Set("x-ratelimit-limit-tokens", "30000")
		h.Set("x-ratelimit-remaining-tokens", "29000")
		h.Set("x-ratelimit-reset-tokens", "2s")
		if strings.Contains(string(body), "max_tokens") {
			h.Set("retry-after-ms", "2000")
			w.WriteHeader(429)
			io.WriteString(w, tooLarge)
			return
		}
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
	tok := h.g.Issue("att-big", nil)
	if resp, body := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil); resp.StatusCode != 200 {
		t.Fatalf("setup: %d %s", resp.StatusCode, body)
	}
	h.window(t)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"max_tokens":1000000}`, nil)
	if resp.StatusCode != 429 || !strings.Contains(body, "Request too large") {
		t.Fatalf("the agent got %d %s; want the upstream's 429", resp.StatusCode, body)
	}
	if n := up.calls.Load(); n != 2 || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("a request larger than the key's tokens a minute went upstream %d times (want once), X-Should-Retry %q", n-1, resp.Header.Get("X-Should-Retry"))
	}
	notCongestion(t, h)
}

// notCongestion fails t when the window since h's last one counted a
// rate-limit episode, a 429 or pushback, or the controller cut its pace
// factor or held every request: a request too large for the key is not
// congestion.
func notCongestion(t *testing.T, h *harness) {
	t.Helper()
	if s := h.window(t); s.Episodes != 0 || s.RateLimited != 0 || s.Pushback {
		t.Fatalf("a request too large for the key counted as congestion: %+v", s)
	}
	h.g.ctl.mu.Lock()
	pf, want, hold := h.g.ctl.paceFactor, h.g.ctl.p.PaceFactor, h.g.ctl.holdUntil
	h.g.ctl.mu.Unlock()
	if pf != want || !hold.IsZero() {
		t.Fatalf("a request too large for the key cut the pace factor to %v or held every request until %v", pf, hold)
	}
}

// TestHostileAgentAnthropicRequestTooLargeIsNotCongestion: Anthropic has
// no "Request too large": a prompt larger than the key's input tokens a
// minute gets the same 429 as congestion ("This request would exceed the
// rate limit for your organization … of N input tokens per minute"),
// Retry-After and all, although no wait lets it through. The 429's headers
// tell it apart: the request's input floor (Anthropic's InputFloor, its
// text at most 8 characters a token) is over the whole limit the answer
// names (anthropic-ratelimit-input-tokens-limit), not just over what is
// left. Through the real gateway in front of the fake provider speaking
// Anthropic: such a request goes upstream once, the agent gets the 429 at
// once with X-Should-Retry: false, and the gateway's pace is not cut.
// Before, it was retried (9 tries, each a 429 to the key and a rate-limit
// episode). The control: a normal request meeting the bucket emptied is
// still congestion, retried to success and counted.
func TestHostileAgentAnthropicRequestTooLargeIsNotCongestion(t *testing.T) {
	const limit = 3000
	hdr := map[string]string{"anthropic-version": "2023-06-01"}
	msg := func(prompt string) string {
		b, _ := json.Marshal(map[string]any{"model": "claude", "max_tokens": 50, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
		return string(b)
	}
	normal := msg("echo: " + strings.Repeat("word ", 300))
	huge := msg(strings.Repeat("lorem ipsum ", 4000)) // 48 000 characters: a floor of 6 000 tokens against a limit of 3 000
	start := func(t *testing.T) (*fakeprovider.Server, string, *harness, string) {
		clk := clock.NewInstant(testEpoch)
		fp, fu := startFake(t, fakeprovider.Config{TPM: limit, Clock: clk})
		h := startGateway(t, Config{Upstream: "anthropic", BaseURL: fu, APIKey: realKey, Clock: clk, RetryLimit: 2})
		return fp, fu, h, h.g.Issue("att-big", nil)
	}

	t.Run("over the limit", func(t *testing.T) {
		fp, _, h, tok := start(t)
		if resp, body := post(t, h.url, "/v1/messages", tok, normal, hdr); resp.StatusCode != 200 {
			t.Fatalf("setup: %d %s", resp.StatusCode, body)
		}
		h.window(t)
		before := fp.Stats()
		resp, body := post(t, h.url, "/v1/messages", tok, huge, hdr)
		if resp.StatusCode != 429 || !strings.Contains(body, "would exceed the rate limit") {
			t.Fatalf("the agent got %d %s; want the upstream's 429", resp.StatusCode, body)
		}
		if n := fp.Stats().Requests - before.Requests; n != 1 || resp.Header.Get("X-Should-Retry") != "false" {
			t.Fatalf("a prompt larger than the key's input tokens a minute went upstream %d times (want once), X-Should-Retry %q", n, resp.Header.Get("X-Should-Retry"))
		}
		if resp.Header.Get("anthropic-ratelimit-input-tokens-limit") != fmt.Sprint(limit) {
			t.Errorf("the upstream's headers were not passed on: %v", resp.Header)
		}
		notCongestion(t, h)
		if !strings.Contains(h.log.String(), "anthropic-ratelimit-input-tokens-limit") {
			t.Errorf("the log does not say which limit the request is over:\n%s", h.log.String())
		}
	})

	t.Run("control", func(t *testing.T) {
		// Another client of the key empties its bucket; the gateway's
		// first request meets it, worded as the huge one's: congestion.
		fp, fu, h, tok := start(t)
		direct := map[string]string{"anthropic-version": "2023-06-01", "x-api-key": realKey}
		for i := 0; ; i++ {
			r, b := post(t, fu, "/v1/messages", "", normal, direct)
			if r.StatusCode == 429 {
				break
			}
			if r.StatusCode != 200 || i > 20 {
				t.Fatalf("emptying the bucket: %d %s after %d", r.StatusCode, b, i)
			}
		}
		before := fp.Stats()
		resp, body := post(t, h.url, "/v1/messages", tok, normal, hdr)
		if resp.StatusCode != 200 {
			t.Fatalf("a normal request meeting an empty bucket got %d %s; want it retried to success", resp.StatusCode, body)
		}
		if st := fp.Stats(); st.RateLimited-before.RateLimited < 1 || st.Succeeded-before.Succeeded != 1 {
			t.Fatalf("the control met no 429 (provider %+v)", st)
		}
		if s := h.window(t); s.RateLimited < 1 || s.Episodes < 1 || s.Retries < 1 {
			t.Fatalf("a normal request's 429 was not congestion: %+v", s)
		}
	})

	t.Run("cache breakpoint", func(t *testing.T) {
		// A prompt cache's reads do not count against the input tokens a
		// minute, so a request marking a breakpoint has no floor: however
		// large, its 429 is congestion (retried), never passed on as
		// final for a wait that may have cured it.
		fp, _, h, tok := start(t)
		b, _ := json.Marshal(map[string]any{"model": "claude", "max_tokens": 50, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": strings.Repeat("lorem ipsum ", 4000), "cache_control": map[string]any{"type": "ephemeral"}}}}}})
		cached := string(b)
		resp, body := post(t, h.url, "/v1/messages", tok, cached, hdr)
		if resp.StatusCode != 429 {
			t.Fatalf("got %d %s", resp.StatusCode, body)
		}
		if st, s := fp.Stats(), h.window(t); st.Requests != 3 || s.RateLimited != 3 || s.Retries != 2 {
			t.Fatalf("a request with a cache breakpoint was not retried as congestion: provider %+v, signals %+v", st, s)
		}
	})
}
