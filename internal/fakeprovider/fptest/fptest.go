// Package fptest holds the helpers the fake provider's tests share, here and
// in the sdkcheck module: a started server, request bodies, raw requests.
package fptest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

// Key is the real key the tests' fake providers hold.
const Key = "sk-fake-real-key-0123456789"

// Epoch is the tests' fixed clock reading.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Start starts a fake provider on loopback, closed when the test ends.
func Start(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Server, string) {
	t.Helper()
	s := fakeprovider.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	url, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, url
}

// Resp is a response read in full.
type Resp struct {
	Status int
	Header http.Header
	Body   map[string]any
}

// ChatBody is an OpenAI chat request for prompt.
func ChatBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": "mock", "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	return string(b)
}

// MessagesBody is an Anthropic messages request for prompt.
func MessagesBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": "mock", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	return string(b)
}

// Do POSTs body to url+path with hdr and reads the JSON answer.
func Do(t *testing.T, url, path, body string, hdr map[string]string) Resp {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return Resp{resp.StatusCode, resp.Header, m}
}

// OpenAIHdr authenticates an OpenAI request with k.
func OpenAIHdr(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }

// AnthropicHdr authenticates an Anthropic request with k.
func AnthropicHdr(k string) map[string]string {
	return map[string]string{"x-api-key": k, "anthropic-version": "2023-06-01"}
}

// Outcomes are the statuses of n chat calls, each on a new connection (0:
// the connection failed).
func Outcomes(t *testing.T, url string, n int) []int {
	t.Helper()
	var out []int
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(ChatBody("hi")))
		req.Header.Set("Authorization", "Bearer "+Key)
		resp, err := client.Do(req)
		if err != nil {
			out = append(out, 0)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp.StatusCode)
	}
	return out
}
