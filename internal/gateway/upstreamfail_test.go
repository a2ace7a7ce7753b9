package gateway

import (
	"io"
	"net/http"
	"testing"

	"github.com/steward-evals/steward/internal/clock"
)

// An attempt's usage says how many of its calls the upstream failed after
// the gateway's retries, and how many the budget refused, apart from the
// agent's own bad requests: the supervisor never judges an attempt failed
// for what the provider did (issue 30 item 1).
func TestUsageCountsUpstreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		status         int
		body           string
		failed, budget int64
	}{
		{"5xx after retries", 502, `{"error":{"message":"bad gateway"}}`, 1, 0},
		{"non-retried 5xx", 501, `{"error":{"message":"not implemented"}}`, 1, 0},
		{"spend limit", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, 1, 0},
		{"the agent's bad request", 400, `{"error":{"message":"bad request"}}`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch), RetryLimit: 2})
			tok := h.g.Issue("att-u", nil)
			resp, _ := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m"}`, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			h.settle(t)
			if u, _ := h.usage(t, tok); u.UpstreamFailed != tc.failed || u.BudgetRefused != tc.budget || u.Errors != 1 {
				t.Fatalf("usage %+v, want %d upstream failures", u, tc.failed)
			}
		})
	}
	t.Run("budget", func(t *testing.T) {
		up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
			io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
		})
		h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, BudgetUSD: 0.000001, Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
		tok := h.g.Issue("att-b", nil)
		resp, _ := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","max_tokens":500}`, nil)
		if resp.StatusCode != http.StatusPaymentRequired {
			t.Fatalf("status %d, want the budget's 402", resp.StatusCode)
		}
		h.settle(t)
		if u, _ := h.usage(t, tok); u.BudgetRefused != 1 || u.UpstreamFailed != 0 {
			t.Fatalf("usage %+v, want one budget refusal", u)
		}
	})
}
