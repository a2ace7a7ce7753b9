package sdkcheck_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/fakeprovider/fptest"
	"github.com/steward-evals/steward/internal/mockmodel"
	"github.com/steward-evals/steward/sdkcheck"
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

func TestSDKsAgainstFakeProvider(t *testing.T) {
	clk := clock.NewInstant(epoch) // latencies are waited out at once, recorded
	s, url := start(t, fakeprovider.Config{
		APIKey: key, RPM: 1000, TPM: 1_000_000,
		BaseLatency: 300 * time.Millisecond, PerTokenLatency: 20 * time.Millisecond,
		Seed: 7, Clock: clk,
	})
	sdkcheck.All(t, url, key)

	st := s.Stats()
	if st.Requests == 0 || st.Succeeded != st.Requests {
		t.Errorf("requests %d, succeeded %d: every SDK call should succeed", st.Requests, st.Succeeded)
	}
	if st.TokensIn == 0 || st.TokensOut == 0 {
		t.Errorf("tokens in %d out %d", st.TokensIn, st.TokensOut)
	}
	if !slices.Equal(st.APIKeys, []string{key}) || !slices.Equal(st.Authorizations, []string{"Bearer " + key}) {
		t.Errorf("keys seen %q, authorizations %q", st.APIKeys, st.Authorizations)
	}
	for _, ep := range []string{"chat.completions", "responses", "completions", "embeddings", "models", "messages", "messages.count_tokens"} {
		if st.ByEndpoint[ep] == 0 {
			t.Errorf("no request counted for %s: %v", ep, st.ByEndpoint)
		}
	}
	if clk.Waited() == 0 {
		t.Error("latency model never slept")
	}
}

func TestAuthRefused(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key})
	ctx := context.Background()

	for _, k := range []string{"", "sk-wrong-key-000000000"} {
		_, err := sdkcheck.OpenAIClient(url, k).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Type != "invalid_request_error" {
			t.Errorf("openai key %q: err = %v, want 401", k, err)
		}
		_, err = sdkcheck.AnthropicClient(url, k).Messages.New(ctx, anthropic.MessageNewParams{
			Model: "mock", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 401 || !strings.Contains(ae.Error(), "authentication_error") {
			t.Errorf("anthropic key %q: err = %v, want 401 authentication_error", k, err)
		}
	}
	// Anthropic reads x-api-key first, then a Bearer token.
	if r := do(t, url, "/v1/messages", messagesBody("hi"), map[string]string{"x-api-key": "sk-wrong-key-000000000", "Authorization": "Bearer " + key, "anthropic-version": "2023-06-01"}); r.Status != 401 {
		t.Errorf("anthropic route with a wrong x-api-key and a right Bearer: status %d, want 401", r.Status)
	}
	if r := do(t, url, "/v1/messages", messagesBody("hi"), anthropicHdr(key)); r.Status != 200 {
		t.Errorf("anthropic route with x-api-key: status %d, want 200", r.Status)
	}
	// OpenAI reads only the Bearer token.
	if r := do(t, url, "/v1/chat/completions", chatBody("hi"), map[string]string{"x-api-key": key}); r.Status != 401 {
		t.Errorf("openai route with x-api-key: status %d, want 401", r.Status)
	}
	// Anthropic requires anthropic-version.
	if r := do(t, url, "/v1/messages", messagesBody("hi"), map[string]string{"x-api-key": key}); r.Status != 400 {
		t.Errorf("messages without anthropic-version: status %d, want 400", r.Status)
	}
	st := s.Stats()
	if st.Unauthorized != 6 || st.Succeeded != 1 || st.BadRequests != 1 {
		t.Errorf("stats = %+v", st)
	}
	if !slices.Contains(st.APIKeys, "sk-wrong-key-000000000") || !slices.Contains(st.APIKeys, key) {
		t.Errorf("keys seen = %q", st.APIKeys)
	}

	// An empty configured key accepts any non-empty key, never none.
	_, url2 := start(t, fakeprovider.Config{})
	if r := do(t, url2, "/v1/chat/completions", chatBody("hi"), openaiHdr("anything")); r.Status != 200 {
		t.Errorf("open provider with a key: %d", r.Status)
	}
	if r := do(t, url2, "/v1/chat/completions", chatBody("hi"), nil); r.Status != 401 {
		t.Errorf("open provider without a key: %d, want 401", r.Status)
	}
}

func TestRPMExceeded(t *testing.T) {
	clk := clock.NewFake(epoch)
	s, url := start(t, fakeprovider.Config{APIKey: key, RPM: 3, Clock: clk})
	for i := 0; i < 3; i++ {
		r := do(t, url, "/v1/chat/completions", chatBody("What is 1+1?"), openaiHdr(key))
		if r.Status != 200 {
			t.Fatalf("request %d: status %d %v", i, r.Status, r.Body)
		}
		if got, want := r.Header.Get("x-ratelimit-remaining-requests"), strconv.Itoa(2-i); got != want {
			t.Errorf("request %d: remaining %q, want %q", i, got, want)
		}
		if r.Header.Get("x-ratelimit-limit-requests") != "3" {
			t.Errorf("limit header %q", r.Header.Get("x-ratelimit-limit-requests"))
		}
	}
	r := do(t, url, "/v1/chat/completions", chatBody("What is 1+1?"), openaiHdr(key))
	if r.Status != 429 {
		t.Fatalf("4th request: status %d, want 429", r.Status)
	}
	// 3 RPM refill one request every 20s.
	if r.Header.Get("retry-after") != "20" || r.Header.Get("retry-after-ms") != "20000" ||
		r.Header.Get("x-ratelimit-remaining-requests") != "0" || r.Header.Get("x-ratelimit-reset-requests") != "1m0s" {
		t.Errorf("429 headers: %v", r.Header)
	}
	e := r.Body["error"].(map[string]any)
	if e["code"] != "rate_limit_exceeded" || e["type"] != "requests" {
		t.Errorf("429 body: %v", r.Body)
	}
	// The SDK sees the same as a typed error.
	_, err := sdkcheck.OpenAIClient(url, key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Response.Header.Get("retry-after") == "" {
		t.Fatalf("sdk err = %v", err)
	}

	clk.Advance(19 * time.Second)
	if r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)); r.Status != 429 || r.Header.Get("retry-after-ms") != "1000" {
		t.Fatalf("after 19s: status %d retry-after-ms %q, want 429 and 1000", r.Status, r.Header.Get("retry-after-ms"))
	}
	clk.Advance(time.Second)
	if r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)); r.Status != 200 {
		t.Fatalf("after 20s: status %d, want 200", r.Status)
	}
	st := s.Stats()
	if st.Succeeded != 4 || st.RateLimited != 3 {
		t.Errorf("succeeded %d rate-limited %d, want 4 and 3", st.Succeeded, st.RateLimited)
	}
}

func TestSpendLimit(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key, RPM: 100, SpendLimit: true})
	r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
	if r.Status != 429 || r.Header.Get("retry-after") != "" || r.Header.Get("retry-after-ms") != "" {
		t.Fatalf("openai spend limit: %d %v", r.Status, r.Header)
	}
	if e := r.Body["error"].(map[string]any); e["type"] != "insufficient_quota" || e["code"] != "insufficient_quota" {
		t.Fatalf("openai spend-limit body %v", r.Body)
	}
	r = do(t, url, "/v1/messages", messagesBody("hi"), anthropicHdr(key))
	if r.Status != 429 || r.Header.Get("retry-after") != "" || !strings.Contains(r.Body["error"].(map[string]any)["message"].(string), "spend limit") {
		t.Fatalf("anthropic spend limit: %d %v %v", r.Status, r.Header, r.Body)
	}
	_, err := sdkcheck.OpenAIClient(url, key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "insufficient_quota" {
		t.Fatalf("sdk err = %v", err)
	}
	s.SetSpendLimit(false)
	if r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)); r.Status != 200 {
		t.Fatalf("after lifting the spend limit: %d", r.Status)
	}
	if st := s.Stats(); st.QuotaRefused != 3 || st.RateLimited != 0 || st.Succeeded != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestInjected5xx(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key, ErrorRate: 1})
	r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key))
	if r.Status != 500 || r.Body["error"].(map[string]any)["type"] != "server_error" {
		t.Fatalf("openai 5xx: %d %v", r.Status, r.Body)
	}
	_, url529 := start(t, fakeprovider.Config{APIKey: key, ErrorRate: 1, ErrorStatus: 529})
	_, err := sdkcheck.AnthropicClient(url529, key).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "mock", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 || !strings.Contains(ae.Error(), "overloaded_error") {
		t.Fatalf("anthropic 529: %v", err)
	}
	s.SetFaults(0, 0)
	if r := do(t, url, "/v1/chat/completions", chatBody("hi"), openaiHdr(key)); r.Status != 200 {
		t.Fatalf("after SetFaults(0,0): %d", r.Status)
	}
	if st := s.Stats(); st.Injected5xx != 1 || st.Succeeded != 1 {
		t.Errorf("stats %+v", st)
	}
}

// outcomes sends n requests in order and returns each status (0 for a dropped connection).
func TestDropConnection(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key, DropRate: 1})
	if got := outcomes(t, url, 3); !slices.Equal(got, []int{0, 0, 0}) {
		t.Fatalf("outcomes %v, want every connection dropped", got)
	}
	_, err := sdkcheck.AnthropicClient(url, key).Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "mock", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("dropped connection gave %v, want a transport error", err)
	}
	if st := s.Stats(); st.Dropped != 4 || st.Succeeded != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestDropMidStream(t *testing.T) {
	s, url := start(t, fakeprovider.Config{APIKey: key, DropRate: 1, DropAfterTokens: 2})
	stream := sdkcheck.OpenAIClient(url, key).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("echo: one two six ten big")},
	})
	defer stream.Close()
	var text strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if stream.Err() == nil {
		t.Fatal("stream cut mid-way ended without an error")
	}
	if text.String() != "one two" {
		t.Fatalf("received %q before the cut, want %q", text.String(), "one two")
	}
	if st := s.Stats(); st.Dropped != 1 || st.TokensOut != 2 || st.Succeeded != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestLatencyModel(t *testing.T) {
	clk := clock.NewInstant(epoch)
	s, url := start(t, fakeprovider.Config{
		APIKey: key, BaseLatency: time.Second, PerTokenLatency: 100 * time.Millisecond, TimeScale: 0.5,
		SlowRate: 1, SlowLatency: 4 * time.Second, Clock: clk,
	})
	prompt := "echo: one two six"
	n := mockmodel.CountTokens(mockmodel.Reply(prompt))
	want := 500*time.Millisecond + 2*time.Second + time.Duration(n)*50*time.Millisecond
	do(t, url, "/v1/chat/completions", chatBody(prompt), openaiHdr(key))
	if clk.Waited() != want {
		t.Fatalf("non-streaming slept %v, want %v", clk.Waited(), want)
	}
	stream := sdkcheck.AnthropicClient(url, key).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "mock", MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	})
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if clk.Waited() != 2*want {
		t.Fatalf("after a stream too, slept %v, want %v", clk.Waited(), 2*want)
	}
	if st := s.Stats(); st.Slowed != 2 {
		t.Errorf("slowed %d, want 2", st.Slowed)
	}
}

func TestMaxInFlight(t *testing.T) {
	clk := clock.NewFake(epoch) // every request waits out its latency on it
	s, url := start(t, fakeprovider.Config{APIKey: key, BaseLatency: time.Second, Clock: clk})
	const n = 5
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := sdkcheck.OpenAIClient(url, key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "mock", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(fmt.Sprintf("What is %d+1?", i))},
			})
			errs <- err
		}(i)
	}
	clk.BlockUntil(n) // all n are now inside the handler at once
	if st := s.Stats(); st.InFlight != n || st.MaxInFlight != n {
		t.Errorf("in flight %d, max %d, want %d", st.InFlight, st.MaxInFlight, n)
	}
	clk.Advance(time.Second)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if st := s.Stats(); st.InFlight != 0 || st.MaxInFlight != n || st.Succeeded != n {
		t.Errorf("after: %+v", st)
	}
}
