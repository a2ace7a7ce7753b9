package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// estimate is what a request may cost before it is sent: input tokens from
// the body's size (bytes/4, the usual rule of thumb for English text and
// JSON), output tokens from the request's own cap on them.
type estimate struct {
	in, out int64
	cost    float64
}

// billable routes are the ones the provider charges for.
func billable(path string) bool {
	switch path {
	case "/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/v1/messages":
		return true
	}
	return false
}

func (g *Gateway) estimate(path string, body []byte) estimate {
	if !billable(path) {
		return estimate{}
	}
	e := estimate{in: (int64(len(body)) + 3) / 4}
	if path != "/v1/embeddings" {
		var m struct {
			MaxCompletionTokens *int64 `json:"max_completion_tokens"`
			MaxTokens           *int64 `json:"max_tokens"`
			MaxOutputTokens     *int64 `json:"max_output_tokens"`
			N                   *int64 `json:"n"`
		}
		_ = json.Unmarshal(body, &m)
		e.out = g.cfg.DefaultMaxTokens
		for _, v := range []*int64{m.MaxCompletionTokens, m.MaxTokens, m.MaxOutputTokens} {
			if v != nil && *v > 0 {
				e.out = *v
				break
			}
		}
		if m.N != nil && *m.N > 1 {
			n := *m.N
			if n > 128 {
				n = 128
			}
			e.out *= n
		}
	}
	e.cost = g.cfg.Prices.Cost(e.in, e.out)
	return e
}

// refuseBudget answers a request the hard budget cannot cover: 402, in the
// shape of the API the agent called (OpenAI insufficient_quota, Anthropic
// billing_error), never retried by the SDKs.
func (g *Gateway) refuseBudget(w http.ResponseWriter, f wireFormat, a *attempt, e estimate) {
	g.mu.Lock()
	spent, held, first := g.totals.CostUSD, g.reserved, g.refused == 1
	g.mu.Unlock()
	msg := fmt.Sprintf("steward gateway: the run's budget of $%.4f cannot cover this request: $%.4f is spent, $%.4f is held by requests in flight, and this one may cost $%.4f (%d input tokens estimated from its size, %d output tokens from its max_tokens or the default); the run makes no more model calls",
		g.cfg.BudgetUSD, spent, held, e.cost, e.in, e.out)
	if first {
		g.logf("attempt %s: budget: %s", a.id, msg)
	}
	typ := "insufficient_quota"
	if f == formatAnthropic {
		typ = "billing_error"
	}
	a.mu.Lock()
	a.usage.Errors++
	a.mu.Unlock()
	g.writeError(w, f, http.StatusPaymentRequired, typ, "budget_exhausted", msg)
}

// writeBusy answers 429 for a limit the agent may simply wait out: unlike
// other gateway errors, the SDKs may retry it (after Retry-After).
func (g *Gateway) writeBusy(w http.ResponseWriter, f wireFormat, msg string) {
	g.writeBusyStatus(w, f, http.StatusTooManyRequests, msg)
}

func (g *Gateway) writeBusyStatus(w http.ResponseWriter, f wireFormat, status int, msg string) {
	typ := "rate_limit_error"
	if status == http.StatusServiceUnavailable {
		typ = "overloaded_error"
	}
	g.writeErrorRetry(w, f, status, typ, "gateway_limit", msg, true)
}
