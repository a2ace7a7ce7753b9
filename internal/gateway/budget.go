package gateway

import (
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

// estimate is a request's estimate on its route's format: input from the
// body's size, output from the format's reading of the request's caps.
func (g *Gateway) estimate(own API, path string, body []byte, prices Prices) estimate {
	out, billable := own.Estimate(path, body, g.cfg.DefaultMaxTokens)
	if !billable {
		return estimate{}
	}
	e := estimate{in: (int64(len(body)) + 3) / 4, out: out}
	e.cost = prices.Cost(e.in, e.out)
	return e
}

// refuseBudget answers a request the hard budget cannot cover: 402, in the
// shape of the API the agent called (ErrBudget: OpenAI insufficient_quota,
// Anthropic billing_error), never retried by the SDKs.
func (g *Gateway) refuseBudget(w http.ResponseWriter, f API, a *attempt, e estimate) {
	g.mu.Lock()
	spent, held, first := g.totals.CostUSD, g.reserved, g.refused == 1
	g.mu.Unlock()
	msg := fmt.Sprintf("steward gateway: the run's budget of $%.4f cannot cover this request: $%.4f is spent, $%.4f is held by requests in flight, and this one may cost $%.4f (%d input tokens estimated from its size, %d output tokens from its max_tokens or, when it names none, model.budget_max_tokens); the run makes no more model calls",
		g.cfg.BudgetUSD, spent, held, e.cost, e.in, e.out)
	if first {
		g.logf("attempt %s: budget: %s", a.id, msg)
	}
	a.mu.Lock()
	a.usage.Errors++
	a.usage.BudgetRefused++
	a.mu.Unlock()
	g.writeError(w, f, http.StatusPaymentRequired, ErrBudget, "budget_exhausted", msg)
}

// writeBusy answers 429 for a limit the agent may simply wait out: unlike
// other gateway errors, the SDKs may retry it (after Retry-After).
func (g *Gateway) writeBusy(w http.ResponseWriter, f API, msg string) {
	g.writeBusyStatus(w, f, http.StatusTooManyRequests, msg)
}

func (g *Gateway) writeBusyStatus(w http.ResponseWriter, f API, status int, msg string) {
	kind := ErrBusy
	if status == http.StatusServiceUnavailable {
		kind = ErrOverloaded
	}
	g.writeErrorRetry(w, f, status, kind, "gateway_limit", msg, true)
}
