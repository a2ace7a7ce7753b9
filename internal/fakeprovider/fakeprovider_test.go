package fakeprovider_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/fakeprovider/fptest"
	"github.com/steward-evals/steward/internal/mockmodel"
)

// The helpers are fptest's, shared with the sdkcheck module's tests.
const key = fptest.Key

var (
	epoch        = fptest.Epoch
	start        = fptest.Start
	chatBody     = fptest.ChatBody
	messagesBody = fptest.MessagesBody
	do           = fptest.Do
	openaiHdr    = fptest.OpenAIHdr
	anthropicHdr = fptest.AnthropicHdr
	outcomes     = fptest.Outcomes
)

func TestTPMExceeded(t *testing.T) {
	clk := clock.NewFake(epoch)
	prompt := "echo: alpha beta gamma delta"
	cost := 3 + 3 + mockmodel.CountTokens(prompt) + mockmodel.CountTokens(mockmodel.Reply(prompt))
	_, url := start(t, fakeprovider.Config{APIKey: key, TPM: int(2*cost + cost/2), Clock: clk})
	for i := 0; i < 2; i++ {
		if r := do(t, url, "/v1/chat/completions", chatBody(prompt), openaiHdr(key)); r.Status != 200 {
			t.Fatalf("request %d: %d", i, r.Status)
		}
	}
	r := do(t, url, "/v1/chat/completions", chatBody(prompt), openaiHdr(key))
	if r.Status != 429 || r.Body["error"].(map[string]any)["type"] != "tokens" {
		t.Fatalf("3rd: %d %v", r.Status, r.Body)
	}
	if r.Header.Get("x-ratelimit-remaining-tokens") != strconv.FormatInt(cost/2, 10) || r.Header.Get("retry-after") == "" {
		t.Errorf("headers %v", r.Header)
	}
	// A request larger than the whole limit can never pass: 429 without Retry-After.
	_, url2 := start(t, fakeprovider.Config{APIKey: key, TPM: 5, Clock: clk})
	r = do(t, url2, "/v1/chat/completions", chatBody(prompt), openaiHdr(key))
	if r.Status != 429 || r.Header.Get("retry-after") != "" || !strings.Contains(r.Body["error"].(map[string]any)["message"].(string), "Request too large") {
		t.Fatalf("too large: %d %v %v", r.Status, r.Header, r.Body)
	}
}

func TestSetLimitsHalving(t *testing.T) {
	clk := clock.NewFake(epoch)
	s, url := start(t, fakeprovider.Config{APIKey: key, RPM: 10, Clock: clk})
	okCount := func(n int) int {
		ok := 0
		for i := 0; i < n; i++ {
			if do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)).Status == 200 {
				ok++
			}
		}
		return ok
	}
	if got := okCount(4); got != 4 {
		t.Fatalf("before halving: %d ok of 4", got)
	}
	s.SetLimits(5, 0) // 6 left, capped at the new limit of 5
	if rpm, tpm := s.Limits(); rpm != 5 || tpm != 0 {
		t.Fatalf("limits = %d, %d", rpm, tpm)
	}
	if got := okCount(7); got != 5 {
		t.Fatalf("after halving: %d ok of 7, want 5", got)
	}
	r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
	if r.Header.Get("x-ratelimit-limit-requests") != "5" || r.Header.Get("retry-after") != "12" {
		t.Fatalf("halved headers: %v", r.Header)
	}
	// Refill follows the new limit too: one request per 12s, not per 6s.
	clk.Advance(6 * time.Second)
	if got := okCount(1); got != 0 {
		t.Fatalf("6s after halving: %d ok, want 0", got)
	}
	clk.Advance(6 * time.Second)
	if got := okCount(2); got != 1 {
		t.Fatalf("12s after halving: %d ok of 2, want 1", got)
	}
}

// A limit enforced over a short interval refuses a burst the minute's
// total would allow, and announces the per-minute limit with the remaining
// count scaled to a minute (as providers that quantize their limits do).
func TestShortIntervalEnforcement(t *testing.T) {
	clk := clock.NewFake(epoch)
	// 1200 RPM enforced per second: a bucket of 20 that refills 20 a second.
	s, url := start(t, fakeprovider.Config{APIKey: key, RPM: 1200, Interval: time.Second, Clock: clk})
	for i := 0; i < 20; i++ {
		r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
		if r.Status != 200 {
			t.Fatalf("request %d: status %d", i, r.Status)
		}
		if got, want := r.Header.Get("x-ratelimit-remaining-requests"), strconv.Itoa((19-i)*60); got != want {
			t.Fatalf("request %d: remaining %q, want %q (scaled to a minute)", i, got, want)
		}
		if r.Header.Get("x-ratelimit-limit-requests") != "1200" {
			t.Fatalf("limit header %q, want the per-minute 1200", r.Header.Get("x-ratelimit-limit-requests"))
		}
	}
	r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
	if r.Status != 429 || r.Header.Get("retry-after-ms") != "50" {
		t.Fatalf("21st request in the same second: status %d retry-after-ms %q, want 429 and 50", r.Status, r.Header.Get("retry-after-ms"))
	}
	// A full minute's bucket would have taken all 21.
	_, url2 := start(t, fakeprovider.Config{APIKey: key, RPM: 1200, Clock: clk})
	for i := 0; i < 21; i++ {
		if r := do(t, url2, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)); r.Status != 200 {
			t.Fatalf("full-minute bucket, request %d: %d", i, r.Status)
		}
	}
	// The short bucket refills at the per-minute rate, 20 a second, up to 20.
	clk.Advance(500 * time.Millisecond)
	ok := 0
	for i := 0; i < 12; i++ {
		if do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)).Status == 200 {
			ok++
		}
	}
	if ok != 10 {
		t.Fatalf("half a second later: %d ok, want 10", ok)
	}
	clk.Advance(time.Hour)
	ok = 0
	for i := 0; i < 25; i++ {
		if do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)).Status == 200 {
			ok++
		}
	}
	if ok != 20 {
		t.Fatalf("after an hour at rest: %d ok, want the interval's 20", ok)
	}
	// Halving keeps the interval: 600 RPM per second holds 10.
	s.SetLimits(600, 0)
	clk.Advance(time.Hour)
	ok = 0
	for i := 0; i < 15; i++ {
		if do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)).Status == 200 {
			ok++
		}
	}
	if ok != 10 {
		t.Fatalf("halved: %d ok, want 10", ok)
	}
}

func TestAnthropicRateLimitHeaders(t *testing.T) {
	clk := clock.NewFake(epoch)
	_, url := start(t, fakeprovider.Config{APIKey: key, RPM: 2, TPM: 10000, Clock: clk})
	r := do(t, url, "/v1/messages", messagesBody("What is 2*3?"), anthropicHdr(key))
	if r.Status != 200 {
		t.Fatalf("status %d %v", r.Status, r.Body)
	}
	for _, kind := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		p := "anthropic-ratelimit-" + kind
		if r.Header.Get(p+"-limit") == "" || r.Header.Get(p+"-remaining") == "" {
			t.Errorf("missing %s headers: %v", p, r.Header)
		}
		if _, err := time.Parse(time.RFC3339, r.Header.Get(p+"-reset")); err != nil {
			t.Errorf("%s-reset %q: %v", p, r.Header.Get(p+"-reset"), err)
		}
	}
	if r.Header.Get("anthropic-ratelimit-requests-remaining") != "1" {
		t.Errorf("requests remaining %q", r.Header.Get("anthropic-ratelimit-requests-remaining"))
	}
	if r.Header.Get("request-id") == "" || r.Body["type"] != "message" {
		t.Errorf("body %v header %v", r.Body, r.Header)
	}
	do(t, url, "/v1/messages", messagesBody("hi"), anthropicHdr(key))
	r = do(t, url, "/v1/messages", messagesBody("hi"), anthropicHdr(key))
	if r.Status != 429 || r.Header.Get("retry-after") != "30" || r.Header.Get("anthropic-ratelimit-requests-remaining") != "0" {
		t.Fatalf("429: %d %v", r.Status, r.Header)
	}
	if e := r.Body["error"].(map[string]any); r.Body["type"] != "error" || e["type"] != "rate_limit_error" {
		t.Fatalf("429 body %v", r.Body)
	}
	reset, _ := time.Parse(time.RFC3339, r.Header.Get("anthropic-ratelimit-requests-reset"))
	if !reset.Equal(epoch.Add(time.Minute)) {
		t.Errorf("requests reset %v, want %v", reset, epoch.Add(time.Minute))
	}
}

// Anthropic words a 429 alike whether a wait lets the request through
// or its input is larger than the whole limit, and sends both with its
// headers and a Retry-After: only the request's size against the
// announced input-tokens limit tells them apart (as the gateway must).
func TestAnthropicOverLimitReadsAsCongestion(t *testing.T) {
	clk := clock.NewFake(epoch)
	_, url := start(t, fakeprovider.Config{APIKey: key, TPM: 2000, Clock: clk})
	huge := do(t, url, "/v1/messages", messagesBody(strings.Repeat("lorem ipsum ", 2000)), anthropicHdr(key))
	// Two requests that fit, then one that meets the bucket they emptied.
	fits := messagesBody("echo: " + strings.Repeat("word ", 700))
	for i := 0; i < 2; i++ {
		if r := do(t, url, "/v1/messages", fits, anthropicHdr(key)); r.Status != 200 {
			t.Fatalf("request %d that fits: %d %v", i, r.Status, r.Body)
		}
	}
	busy := do(t, url, "/v1/messages", fits, anthropicHdr(key))
	msg := func(r fptest.Resp) string {
		e, _ := r.Body["error"].(map[string]any)
		m, _ := e["message"].(string)
		if r.Body["type"] != "error" || e["type"] != "rate_limit_error" {
			t.Errorf("body %v", r.Body)
		}
		return m
	}
	for name, r := range map[string]fptest.Resp{"over the limit": huge, "congestion": busy} {
		if r.Status != 429 || r.Header.Get("retry-after") == "" || r.Header.Get("anthropic-ratelimit-input-tokens-limit") != "2000" ||
			r.Header.Get("anthropic-ratelimit-tokens-limit") != "2000" {
			t.Errorf("%s: %d %v", name, r.Status, r.Header)
		}
		if m := msg(r); !strings.HasPrefix(m, "This request would exceed the rate limit for your organization (org-fake) of 2,000 input tokens per minute.") {
			t.Errorf("%s: message %q", name, m)
		}
	}
	if msg(huge) != msg(busy) {
		t.Errorf("the two read differently:\n%s\n%s", msg(huge), msg(busy))
	}
}

// outcomes sends n requests in order and returns each status (0 for a dropped connection).
func TestFaultsDeterministicGivenSeed(t *testing.T) {
	cfg := fakeprovider.Config{APIKey: key, ErrorRate: 0.3, DropRate: 0.2, Seed: 42}
	_, a := start(t, cfg)
	_, b := start(t, cfg)
	cfg.Seed = 43
	_, c := start(t, cfg)
	oa, ob, oc := outcomes(t, a, 40), outcomes(t, b, 40), outcomes(t, c, 40)
	if !slices.Equal(oa, ob) {
		t.Fatalf("same seed, different outcomes:\n%v\n%v", oa, ob)
	}
	if slices.Equal(oa, oc) {
		t.Fatalf("different seeds, same outcomes: %v", oa)
	}
	counts := map[int]int{}
	for _, o := range oa {
		counts[o]++
	}
	if counts[0] == 0 || counts[500] == 0 || counts[200] == 0 {
		t.Fatalf("40 requests at 20%% drops and 30%% errors gave %v", counts)
	}
}

func TestControlAPI(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key, RPM: 60})
	do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
	r := do(t, url, "/_fake/limits", `{"rpm":30,"tpm":1000}`, openaiHdr(key))
	if r.Status != 200 || r.Body["rpm"].(float64) != 30 || r.Body["tpm"].(float64) != 1000 {
		t.Fatalf("limits: %d %v", r.Status, r.Body)
	}
	if rpm, tpm := s.Limits(); rpm != 30 || tpm != 1000 {
		t.Fatalf("Limits() = %d, %d", rpm, tpm)
	}
	if r := do(t, url, "/_fake/limits", `{"rpm":1}`, openaiHdr("sk-wrong")); r.Status != 401 {
		t.Fatalf("control with a wrong key: %d", r.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/_fake/stats", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st fakeprovider.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	// Control requests are not counted as API requests.
	if st.Requests != 1 || st.Succeeded != 1 {
		t.Fatalf("stats over the control API: %+v", st)
	}
	s.ResetStats()
	if st := s.Stats(); st.Requests != 0 || len(st.APIKeys) != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

// BenchmarkChatLoopback measures the fake's own overhead: one non-streaming
// chat completion per iteration over loopback keep-alive HTTP, no limits.
func BenchmarkChatLoopback(b *testing.B) {
	s := fakeprovider.New(fakeprovider.Config{APIKey: key})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := chatBody("What is 12*(3+4)?")
	client := &http.Client{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// TokensCharged counts what the TPM bucket took at admission: answered
// requests' tokens, nothing for a refused one, and a request whose client
// hung up mid-call in full (the key spent them; TokensIn/Out, counted as
// the answer is sent, do not have them).
func TestTokensCharged(t *testing.T) {
	clk := clock.NewFake(epoch)
	prompt := "echo: alpha beta gamma delta"
	cost := 3 + 3 + mockmodel.CountTokens(prompt) + mockmodel.CountTokens(mockmodel.Reply(prompt))
	srv, url := start(t, fakeprovider.Config{APIKey: key, TPM: int(2*cost + cost/2), Clock: clk})
	for i := 0; i < 3; i++ {
		do(t, url, "/v1/chat/completions", chatBody(prompt), openaiHdr(key))
	}
	if st := srv.Stats(); st.TokensCharged != 2*cost || st.TokensIn+st.TokensOut != 2*cost || st.RateLimited != 1 {
		t.Fatalf("two answered, one refused: charged %d, served %d in + %d out, %d refused; want %d charged and served", st.TokensCharged, st.TokensIn, st.TokensOut, st.RateLimited, 2*cost)
	}

	slowClk := clock.NewFake(epoch)
	slow, surl := start(t, fakeprovider.Config{APIKey: key, TPM: 1000 * int(cost), BaseLatency: time.Hour, Clock: slowClk})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, surl+"/v1/chat/completions", strings.NewReader(chatBody(prompt)))
	req.Header.Set("Authorization", "Bearer "+key)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	slowClk.BlockUntil(1) // admitted: it waits an hour on the fake clock
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call got an answer")
	}
	for deadline := time.Now().Add(time.Minute); slow.Stats().InFlight != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the handler did not end after the hang-up")
		}
		runtime.Gosched() // the handler sees the hang-up and returns
	}
	if st := slow.Stats(); st.TokensCharged != cost || st.TokensIn != 0 || st.TokensOut != 0 {
		t.Fatalf("a call hung up mid-way: charged %d, served %d in + %d out; want %d charged, none served", st.TokensCharged, st.TokensIn, st.TokensOut, cost)
	}
}
