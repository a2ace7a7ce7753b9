package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Quota bounds one attempt's model use (a task's limits:). Zero fields are
// unlimited. A call is refused, in the wire format's own error shape and
// never retried by the SDKs, once what the attempt has spent plus what its
// calls in flight may still spend (their estimates) reaches a bound, so an
// attempt overshoots a bound by at most what its calls already in flight
// spend beyond their estimates: with one call at a time (most agents), by
// at most one call's output beyond its max_tokens (none: max_tokens bounds
// it) and its input beyond the estimate from the body's size.
type Quota struct {
	// Tokens bounds input + output tokens; Calls the model calls admitted;
	// CostUSD the spend.
	Tokens  int64
	Calls   int64
	CostUSD float64
	// Deadline is when the agent's time ends: calls after it are refused
	// and the remaining endpoint counts down to it.
	Deadline time.Time
}

// Limit names, as reports show them ("limit: tokens").
const (
	LimitTokens    = "tokens"
	LimitCalls     = "model_calls"
	LimitCost      = "cost_usd"
	LimitAgentTime = "agent_time"
)

// quotaState is an attempt's quota and what its calls in flight hold.
type quotaState struct {
	q          Quota
	calls      int64 // calls admitted (in flight or done)
	heldTokens int64 // estimates of the calls in flight
	heldCost   float64
	reached    string // the first bound a call was refused at
}

// SetQuota bounds an attempt's model use; an attempt id that has no token
// yet gets its quota when it is issued.
func (g *Gateway) SetQuota(attemptID string, q Quota) {
	a := g.attemptFor(attemptID)
	a.mu.Lock()
	a.quota.q = q
	a.mu.Unlock()
}

// admit checks the attempt's quota for a call of estimate e and, when it
// fits, holds the estimate until release; it returns the bound that
// refused the call ("" when admitted).
func (a *attempt) admit(e estimate, now time.Time) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	qs := &a.quota
	q := qs.q
	why := ""
	switch {
	case !q.Deadline.IsZero() && !now.Before(q.Deadline):
		why = LimitAgentTime
	case q.Calls > 0 && qs.calls >= q.Calls:
		why = LimitCalls
	case q.Tokens > 0 && a.usage.InputTokens+a.usage.OutputTokens+qs.heldTokens >= q.Tokens:
		why = LimitTokens
	case q.CostUSD > 0 && a.usage.CostUSD+qs.heldCost >= q.CostUSD:
		why = LimitCost
	}
	if why != "" {
		if qs.reached == "" {
			qs.reached = why
		}
		a.usage.Errors++
		a.usage.LimitRefused++
		a.usage.LimitReached = qs.reached
		return why
	}
	qs.calls++
	qs.heldTokens += e.in + e.out
	qs.heldCost += e.cost
	return ""
}

// release gives back what admit held for a call of estimate e.
func (a *attempt) release(e estimate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quota.heldTokens -= e.in + e.out
	a.quota.heldCost -= e.cost
}

// refuseLimit answers a call over the attempt's quota: 429 would be
// retried by the SDKs, so it is the status the provider gives a request it
// will not serve for this client (ErrLimit: OpenAI 403 insufficient_quota
// with code "limit_reached", Anthropic 403 permission_error), with the
// message naming the bound.
func (g *Gateway) refuseLimit(w http.ResponseWriter, f API, a *attempt, which string) {
	a.mu.Lock()
	q := a.quota.q
	a.mu.Unlock()
	var bound string
	switch which {
	case LimitAgentTime:
		bound = "its agent time ended at " + q.Deadline.UTC().Format(time.RFC3339)
	case LimitCalls:
		bound = fmt.Sprintf("its %d model calls are used", q.Calls)
	case LimitTokens:
		bound = fmt.Sprintf("its %d tokens are used (with what calls in flight may still spend)", q.Tokens)
	case LimitCost:
		bound = fmt.Sprintf("its $%.4f is spent (with what calls in flight may still spend)", q.CostUSD)
	}
	msg := "steward gateway: this attempt has reached its limit: " + bound + "; it makes no more model calls (limit: " + which + ")"
	g.writeError(w, f, http.StatusForbidden, ErrLimit, "limit_reached", msg)
}

// RemainingPath is where an attempt asks what it has left (GET, with its
// token as for the model API).
const RemainingPath = "/steward/v1/remaining"

// Remaining is the remaining endpoint's answer: nil fields are unlimited.
type Remaining struct {
	Deadline    *time.Time `json:"deadline"`
	SecondsLeft *float64   `json:"seconds_left"`
	TokensLeft  *int64     `json:"tokens_left"`
	CallsLeft   *int64     `json:"model_calls_left"`
	USDLeft     *float64   `json:"usd_left"`
	// Used is what the attempt has spent so far.
	Used Usage `json:"used"`
	// LimitReached names the bound a call was refused at ("" if none).
	LimitReached string `json:"limit_reached,omitempty"`
}

// remaining answers GET RemainingPath for attempt a.
func (g *Gateway) remaining(w http.ResponseWriter, a *attempt) {
	a.mu.Lock()
	q, qs, u := a.quota.q, a.quota, a.usage
	a.mu.Unlock()
	r := Remaining{Used: u, LimitReached: qs.reached}
	if !q.Deadline.IsZero() {
		d := q.Deadline.UTC()
		left := max(0, d.Sub(g.clock.Now()).Seconds())
		r.Deadline, r.SecondsLeft = &d, &left
	}
	if q.Tokens > 0 {
		left := max(0, q.Tokens-u.InputTokens-u.OutputTokens)
		r.TokensLeft = &left
	}
	if q.Calls > 0 {
		left := max(0, q.Calls-qs.calls)
		r.CallsLeft = &left
	}
	if q.CostUSD > 0 {
		left := max(0, q.CostUSD-u.CostUSD)
		r.USDLeft = &left
	}
	b, _ := json.Marshal(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}
