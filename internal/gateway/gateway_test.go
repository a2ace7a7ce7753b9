package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/gateway/gatewaytest"
)

const realKey = gatewaytest.RealKey

type harness struct {
	g   *Gateway
	url string
	log *gatewaytest.SyncBuffer
}

// startGateway serves a gateway on loopback until the test ends.
func startGateway(t *testing.T, cfg Config) *harness {
	t.Helper()
	g, url, log := gatewaytest.Start(t, func(log io.Writer) (*Gateway, error) {
		if cfg.Logger == nil {
			cfg.Logger = log
		}
		return New(cfg)
	})
	return &harness{g: g, url: url, log: log}
}

// upstream is a test provider that checks what the gateway sends it.
type upstream struct {
	t      *testing.T
	kind   string // openai | anthropic
	calls  atomic.Int64
	handle func(n int64, w http.ResponseWriter, r *http.Request, body []byte)
	srv    *httptest.Server
	bodies chan []byte
}

func newUpstream(t *testing.T, kind string, handle func(n int64, w http.ResponseWriter, r *http.Request, body []byte)) *upstream {
	u := &upstream{t: t, kind: kind, handle: handle, bodies: make(chan []byte, 100)}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		switch kind {
		case "openai":
			if got := r.Header.Get("Authorization"); got != "Bearer "+realKey {
				t.Errorf("upstream got Authorization %q, want the real key", got)
			}
			if r.Header.Get("x-api-key") != "" {
				t.Errorf("upstream got an x-api-key header: %q", r.Header.Get("x-api-key"))
			}
		case "anthropic":
			if got := r.Header.Get("x-api-key"); got != realKey {
				t.Errorf("upstream got x-api-key %q, want the real key", got)
			}
			if r.Header.Get("Authorization") != "" {
				t.Errorf("upstream got an Authorization header: %q", r.Header.Get("Authorization"))
			}
			if r.Header.Get("anthropic-version") == "" {
				t.Error("upstream got no anthropic-version")
			}
		}
		select {
		case u.bodies <- body:
		default:
		}
		handle(n, w, r, body)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) baseURL() string {
	if u.kind == "openai" {
		return u.srv.URL + "/v1"
	}
	return u.srv.URL
}

type hookLog struct {
	mu     sync.Mutex
	events []string
	in     int64
	out    int64
	cost   float64
}

func (h *hookLog) BackoffStart() { h.add("start") }
func (h *hookLog) BackoffEnd(ctx context.Context) error {
	h.add("end")
	return nil
}
func (h *hookLog) Usage(in, out int64, cost float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.in += in
	h.out += out
	h.cost += cost
}
func (h *hookLog) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, s)
}
func (h *hookLog) Events() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.events, ",")
}

func post(t *testing.T, url, path, token, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const chatOK = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`

func TestProxyOpenAIKeySwapAndUsage(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/chat/completions" || r.URL.RawQuery != "beta=true" { // x is not a parameter the SDKs send
			t.Errorf("upstream path %s?%s", r.URL.Path, r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req-9")
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey,
		Prices: Prices{InputPerMTok: 1e6, OutputPerMTok: 2e6}})
	hooks := &hookLog{}
	tok := h.g.Issue("att-1", hooks)
	if strings.Contains(tok, realKey) {
		t.Fatal("token contains the key")
	}
	resp, body := post(t, h.url, "/v1/chat/completions?beta=true&x=1", tok, `{"model":"m","messages":[]}`, nil)
	if resp.StatusCode != 200 || body != chatOK || resp.Header.Get("x-request-id") != "req-9" {
		t.Fatalf("status %d body %s headers %v", resp.StatusCode, body, resp.Header)
	}
	u, ok := h.usage(t, tok)
	u2, ok2 := h.usage(t, "att-1")
	if !ok || !ok2 || u != u2 || u.InputTokens != 11 || u.OutputTokens != 7 || u.CostUSD != 11+14 || u.Requests != 1 {
		t.Fatalf("usage by token %+v, by id %+v", u, u2)
	}
	if hooks.in != 11 || hooks.out != 7 || hooks.cost != 25 {
		t.Fatalf("hooks saw %+v", hooks)
	}
	if tot := h.g.Totals(); tot.InputTokens != 11 || h.g.Spent() != 25 {
		t.Fatalf("totals %+v spent %v", tot, h.g.Spent())
	}
	// x-api-key works as well as Bearer.
	resp, _ = post(t, h.url, "/v1/chat/completions?beta=true&x=1", "", `{"model":"m"}`, map[string]string{"x-api-key": tok})
	if resp.StatusCode != 200 {
		t.Fatalf("x-api-key auth: %d", resp.StatusCode)
	}
	s := h.window(t)
	if s.Requests != 2 || s.Retries != 0 || s.Errors != 0 || s.Limit != 20 {
		t.Fatalf("signals %+v", s)
	}
}

func TestProxyAnthropicKeySwapAndStreamedUsage(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := newUpstream(t, "anthropic", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" {
			t.Errorf("path %s", r.URL.Path)
		}
		if r.Header.Get("anthropic-version") != "2023-06-01" || r.Header.Get("anthropic-beta") != "b1" {
			t.Errorf("anthropic headers not passed through: %v", r.Header)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range strings.SplitAfter(stream, "\n\n") {
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
	})
	h := startGateway(t, Config{Upstream: "anthropic", BaseURL: up.baseURL(), APIKey: realKey,
		Prices: Prices{InputPerMTok: 3, OutputPerMTok: 15}})
	tok := h.g.Issue("att-a", nil)
	resp, body := post(t, h.url, "/v1/messages", "", `{"model":"claude","max_tokens":5,"stream":true,"messages":[]}`,
		map[string]string{"x-api-key": tok, "anthropic-version": "2023-06-01", "anthropic-beta": "b1"})
	if resp.StatusCode != 200 || body != stream {
		t.Fatalf("stream not byte-faithful: %d\n%q", resp.StatusCode, body)
	}
	u, _ := h.usage(t, "att-a")
	if u.InputTokens != 25 || u.OutputTokens != 15 {
		t.Fatalf("usage %+v, want 25 in / 15 out", u)
	}
	if want := (25*3 + 15*15) / 1e6; u.CostUSD != want {
		t.Fatalf("cost %v want %v", u.CostUSD, want)
	}
}

func TestProxyOpenAIStreamUsageInjected(t *testing.T) {
	chunks := []string{
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"he"}}]}` + "\n\n",
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":"stop"}]}` + "\n\n",
	}
	usageChunk := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n"
	done := "data: [DONE]\n\n"
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
			Model string `json:"model"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model != "m" {
			t.Errorf("body %s: %v", body, err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			io.WriteString(w, usageChunk)
		}
		io.WriteString(w, done)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
	tok := h.g.Issue("att-s", nil)
	// The client did not ask for usage: the gateway asks, charges, and leaves the chunk out.
	_, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","stream":true,"messages":[]}`, nil)
	if want := strings.Join(chunks, "") + done; body != want {
		t.Fatalf("client saw\n%q\nwant\n%q", body, want)
	}
	if u, _ := h.usage(t, tok); u.InputTokens != 9 || u.OutputTokens != 2 {
		t.Fatalf("usage %+v", u)
	}
	// The client asked for usage: it gets the chunk, unchanged.
	_, body = post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, nil)
	if want := strings.Join(chunks, "") + usageChunk + done; body != want {
		t.Fatalf("client saw\n%q\nwant\n%q", body, want)
	}
	if u, _ := h.usage(t, tok); u.InputTokens != 18 || u.OutputTokens != 4 || u.Requests != 2 {
		t.Fatalf("usage %+v", u)
	}
}

func TestProxyRevokedAndUnknownTokens(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-r", nil)
	if resp, _ := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil); resp.StatusCode != 200 {
		t.Fatalf("live token: %d", resp.StatusCode)
	}
	h.g.Revoke(tok)
	cases := []struct {
		name, path, token string
		hdr               map[string]string
		wantType          string
	}{
		{"revoked openai", "/v1/chat/completions", tok, nil, `"code":"invalid_api_key"`},
		{"revoked anthropic", "/v1/messages", "", map[string]string{"x-api-key": tok, "anthropic-version": "2023-06-01"}, `"type":"authentication_error"`},
		{"unknown", "/v1/embeddings", "stw-nope", nil, `"code":"invalid_api_key"`},
		{"the real key is not a token", "/v1/chat/completions", realKey, nil, `"code":"invalid_api_key"`},
		{"missing", "/v1/chat/completions", "", nil, "missing attempt token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, h.url, tc.path, tc.token, `{}`, tc.hdr)
			if resp.StatusCode != 401 || !strings.Contains(body, tc.wantType) {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			if strings.Contains(body, realKey) {
				t.Fatal("401 body contains the real key")
			}
		})
	}
	if up.calls.Load() != 1 {
		t.Fatalf("upstream called %d times, want 1 (refused tokens must not reach it)", up.calls.Load())
	}
	if u, ok := h.usage(t, "att-r"); !ok || u.Requests != 1 {
		t.Fatalf("usage after revoke: %+v %v", u, ok)
	}
}

func TestProxyValidation(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, `{"object":"list","data":[]}`)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, MaxBodyBytes: 1024})
	tok := h.g.Issue("att-v", nil)
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"too large", "POST", "/v1/chat/completions", `{"x":"` + strings.Repeat("a", 2000) + `"}`, 413, "larger than 1024"},
		{"bad json", "POST", "/v1/chat/completions", `{"model":`, 400, "not valid JSON"},
		{"not an object", "POST", "/v1/responses", `[1,2]`, 400, "not valid JSON"},
		{"empty", "POST", "/v1/messages", ``, 400, "not valid JSON"},
		{"unknown route", "POST", "/v1/fine_tuning/jobs", `{}`, 404, "unknown route"},
		{"root", "GET", "/", ``, 404, "unknown route"},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, "not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Fatalf("got %d %s", resp.StatusCode, b)
			}
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
				t.Fatalf("error not in the provider's format: %s", b)
			}
		})
	}
	if up.calls.Load() != 0 {
		t.Fatalf("refused requests reached the upstream %d times", up.calls.Load())
	}
	req, _ := http.NewRequest("GET", h.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/models: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestRetry429HonoursRetryAfterAndReleasesSlot(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if n <= 2 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		io.WriteString(w, chatOK)
	})
	clk := clock.NewInstant(testEpoch)
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clk,
		Rand: func() float64 { return 0.5 }, BackoffBase: 100 * time.Millisecond})
	hooks := &hookLog{}
	tok := h.g.Issue("att-429", hooks)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m"}`, nil)
	if resp.StatusCode != 200 || body != chatOK {
		t.Fatalf("agent saw %d %s", resp.StatusCode, body)
	}
	if up.calls.Load() != 3 {
		t.Fatalf("upstream calls %d, want 3", up.calls.Load())
	}
	if got := hooks.Events(); got != "start,end,start,end" {
		t.Fatalf("backoff hooks %q", got)
	}
	var backoffs []time.Duration
	for _, d := range clk.Waits() {
		if d >= time.Second {
			backoffs = append(backoffs, d)
		}
	}
	if len(backoffs) < 2 {
		t.Fatalf("waits %v: want two backoffs of at least Retry-After", clk.Waits())
	}
	for _, d := range backoffs[:2] {
		if d < 2*time.Second || d > 2200*time.Millisecond {
			t.Fatalf("backoff %s does not honour Retry-After 2s", d)
		}
	}
	s := h.window(t)
	if s.Retries != 2 || s.RateLimited != 2 || s.Episodes != 1 || !s.Pushback || s.Errors != 0 {
		t.Fatalf("signals %+v", s)
	}
}

func TestRetry5xxAndDroppedConnections(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		switch n {
		case 1:
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"message":"overloaded"}}`)
		case 2:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // dropped before any response
			}
		case 3:
			w.WriteHeader(500)
		default:
			io.WriteString(w, chatOK)
		}
	})
	clk := clock.NewInstant(testEpoch)
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clk,
		Rand: func() float64 { return 0 }, BackoffBase: 100 * time.Millisecond})
	hooks := &hookLog{}
	tok := h.g.Issue("att-5xx", hooks)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m"}`, nil)
	if resp.StatusCode != 200 || body != chatOK {
		t.Fatalf("agent saw %d %s", resp.StatusCode, body)
	}
	if up.calls.Load() != 4 {
		t.Fatalf("upstream calls %d, want 4", up.calls.Load())
	}
	// Exponential: 50ms, 100ms, 200ms with jitter 0 (equal jitter: half of 100·2^n).
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if got := clk.Waits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v want %v", got, want)
	}
	if got := hooks.Events(); got != "start,end,start,end,start,end" {
		t.Fatalf("hooks %q", got)
	}
	if s := h.window(t); s.Retries != 3 || s.RateLimited != 0 || s.Episodes != 0 {
		t.Fatalf("signals %+v", s)
	}
}

func TestRetriesExhaustedScrubsKey(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(502)
		// A misbehaving upstream that echoes the key it was sent.
		fmt.Fprintf(w, `{"error":{"message":"bad gateway for key %s"}}`, realKey)
	})
	clk := clock.NewInstant(testEpoch)
	log := &gatewaytest.SyncBuffer{}
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clk, RetryLimit: 3, Logger: log})
	tok := h.g.Issue("att-x", nil)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m"}`, nil)
	if resp.StatusCode != 502 || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	if up.calls.Load() != 4 {
		t.Fatalf("calls %d, want 1 + 3 retries", up.calls.Load())
	}
	if strings.Contains(body, realKey) || !strings.Contains(body, "[redacted]") {
		t.Fatalf("body leaks or lost the message: %s", body)
	}
	if strings.Contains(log.String(), realKey) || !strings.Contains(log.String(), "retries exhausted") {
		t.Fatalf("log: %s", log.String())
	}
	if u, _ := h.usage(t, tok); u.Errors != 1 {
		t.Fatalf("usage %+v", u)
	}
	if s := h.window(t); s.Errors != 1 || s.Retries != 3 {
		t.Fatalf("signals %+v", s)
	}
}

func TestRetryBudgetStopsRetries(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"message":"slow down","code":"rate_limit_exceeded"}}`)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch),
		RetryBudget: 45 * time.Second, Rand: func() float64 { return 0 }})
	tok := h.g.Issue("att-b", nil)
	resp, _ := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil)
	if resp.StatusCode != 429 || up.calls.Load() != 3 {
		t.Fatalf("status %d after %d calls: want 429 after 3 (two 20s waits fit a 45s budget)", resp.StatusCode, up.calls.Load())
	}
}

func TestSpendLimit429FailsFast(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"insufficient_quota", `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
		{"billing", `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","code":"billing_hard_limit_reached"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
				w.WriteHeader(429)
				io.WriteString(w, tc.body)
			})
			h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
			hooks := &hookLog{}
			tok := h.g.Issue("att-q", hooks)
			resp, body := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil)
			if resp.StatusCode != 429 || !strings.Contains(body, "spend limit or quota") || !strings.Contains(body, "not retried") {
				t.Fatalf("got %d %s", resp.StatusCode, body)
			}
			if up.calls.Load() != 1 || hooks.Events() != "" {
				t.Fatalf("spend-limit refusal was retried: %d calls, hooks %q", up.calls.Load(), hooks.Events())
			}
			if resp.Header.Get("X-Should-Retry") != "false" {
				t.Fatal("SDKs are not told to stop retrying")
			}
			if s := h.window(t); s.Episodes != 0 || s.RateLimited != 0 || s.Errors != 1 {
				t.Fatalf("spend limit counted as congestion: %+v", s)
			}
		})
	}
}

func TestStartedStreamIsNotRetried(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			buf.Flush()
			conn.Close()
		}
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
	tok := h.g.Issue("att-st", nil)
	_, body := post(t, h.url, "/v1/chat/completions", tok, `{"stream":true,"stream_options":{"include_usage":true}}`, nil)
	if !strings.Contains(body, `"content":"a"`) {
		t.Fatalf("client did not get the started stream: %q", body)
	}
	if up.calls.Load() != 1 {
		t.Fatalf("a started stream was retried: %d calls", up.calls.Load())
	}
}

func TestKeyNeverReachesSandboxSide(t *testing.T) {
	// Everything a sandbox can observe: its environment, every response
	// (success, upstream errors, gateway errors), and the gateway's log.
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/v1/embeddings":
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, realKey)
		default:
			io.WriteString(w, chatOK)
		}
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
	tok := h.g.Issue("att-k", nil)
	env := strings.Join(Env(h.url, tok), "\n")
	if strings.Contains(env, realKey) || !strings.Contains(env, "OPENAI_API_KEY="+tok) || !strings.Contains(env, "ANTHROPIC_BASE_URL="+h.url) {
		t.Fatalf("env: %s", env)
	}
	var seen strings.Builder
	for _, p := range []string{"/v1/chat/completions", "/v1/embeddings", "/v1/nope"} {
		resp, body := post(t, h.url, p, tok, `{}`, nil)
		fmt.Fprintf(&seen, "%v %s\n", resp.Header, body)
	}
	h.g.Revoke(tok)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil)
	fmt.Fprintf(&seen, "%v %s\n", resp.Header, body)
	if strings.Contains(seen.String(), realKey) {
		t.Fatalf("the real key reached the sandbox side:\n%s", seen.String())
	}
	if !strings.Contains(seen.String(), "Incorrect API key provided: [redacted]") {
		t.Fatalf("upstream error lost its message:\n%s", seen.String())
	}
	if strings.Contains(h.log.String(), realKey) {
		t.Fatal("the real key is in the log")
	}
	b, _ := json.Marshal(h.g.History())
	if strings.Contains(string(b), realKey) {
		t.Fatal("the key is in the history")
	}
}

func TestMockUpstreamInProcess(t *testing.T) {
	h := startGateway(t, Config{Upstream: "mock", Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
	tok := h.g.Issue("att-m", nil)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"mock","messages":[{"role":"user","content":"What is 2+3?"}]}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "chat.completion") {
		t.Fatalf("mock: %d %s", resp.StatusCode, body)
	}
	if u, _ := h.usage(t, tok); u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Fatalf("mock usage not counted: %+v", u)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Upstream: "bedrock"},
		{Upstream: "openai"},
		{Upstream: "openai", APIKey: "k", BaseURL: "ftp://x"},
		{Upstream: "mock", MaxConnections: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	g, err := New(Config{Upstream: "openai", APIKey: "k", MaxConnections: 7})
	if err != nil || g.Window().Limit != 7 || !g.Window().Fixed {
		t.Fatalf("fixed: %v %+v", err, g.Window())
	}
}

// settle waits until no attempt has a request in flight, so usage and
// signals are final.
func (h *harness) settle(t *testing.T) {
	t.Helper()
	h.g.mu.Lock()
	var ids []string
	for id := range h.g.attempts {
		ids = append(ids, id)
	}
	h.g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		if err := h.g.Drain(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func (h *harness) usage(t *testing.T, key string) (Usage, bool) {
	h.settle(t)
	return h.g.Usage(key)
}

func (h *harness) window(t *testing.T) Signals {
	h.settle(t)
	return h.g.Window()
}

// refusingHooks fail BackoffEnd, as when the attempt is cancelled while in backoff.
type refusingHooks struct{ hookLog }

func (h *refusingHooks) BackoffEnd(ctx context.Context) error {
	h.add("end")
	return context.Canceled
}

func TestBackoffEndErrorAnswersTheAgent(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.WriteHeader(503)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
	hooks := &refusingHooks{}
	tok := h.g.Issue("att-c", hooks)
	resp, body := post(t, h.url, "/v1/chat/completions", tok, `{}`, nil)
	if resp.StatusCode != 503 || !strings.Contains(body, "retry was abandoned") || up.calls.Load() != 1 {
		t.Fatalf("got %d %s after %d calls", resp.StatusCode, body, up.calls.Load())
	}
	if hooks.Events() != "start,end" {
		t.Fatalf("hooks %q", hooks.Events())
	}
}
