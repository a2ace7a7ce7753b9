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

func (g *Gateway) estimate(path string, body []byte, prices Prices) estimate {
	if !billable(path) {
		return estimate{}
	}
	e := estimate{in: (int64(len(body)) + 3) / 4}
	if path != "/v1/embeddings" {
		// Keys exactly as spelled (the upstream's decoder is case-sensitive;
		// Go's struct decoding is not, so "Max_Tokens": 1 after "max_tokens"
		// would hide the real cap), numbers as the upstream reads them.
		var m map[string]json.RawMessage
		_ = json.Unmarshal(body, &m)
		num := func(k string) int64 {
			var f float64
			if json.Unmarshal(m[k], &f) != nil || f < 1 {
				return 0
			}
			if f > 1<<40 {
				return 1 << 40
			}
			return int64(f + 0.999999)
		}
		e.out = g.cfg.DefaultMaxTokens
		for _, k := range []string{"max_completion_tokens", "max_tokens", "max_output_tokens"} {
			if v := num(k); v > 0 {
				e.out = v
				break
			}
		}
		// n answers, or best_of (legacy completions: each one is billed).
		n := max(num("n"), num("best_of"))
		if n > 1 {
			e.out *= min(n, 128)
		}
	}
	e.cost = prices.Cost(e.in, e.out)
	return e
}

// refuseBudget answers a request the hard budget cannot cover: 402, in the
// shape of the API the agent called (OpenAI insufficient_quota, Anthropic
// billing_error), never retried by the SDKs.
func (g *Gateway) refuseBudget(w http.ResponseWriter, f wireFormat, a *attempt, e estimate) {
	g.mu.Lock()
	spent, held, first := g.totals.CostUSD, g.reserved, g.refused == 1
	g.mu.Unlock()
	msg := fmt.Sprintf("steward gateway: the run's budget of $%.4f cannot cover this request: $%.4f is spent, $%.4f is held by requests in flight, and this one may cost $%.4f (%d input tokens estimated from its size, %d output tokens from its max_tokens or, when it names none, model.budget_max_tokens); the run makes no more model calls",
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
	a.usage.BudgetRefused++
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
