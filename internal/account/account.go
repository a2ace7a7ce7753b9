// Package account is one attempt's account at the model gateway, as the
// supervisor (which holds the gateway) keeps it: the agent's token, issued
// with the task's limits and the scheduler's backoff hooks, and the model
// judge's (its own prices, none of the agent's limits); the agent's
// deadline; and, once the attempt has ended, what its tokens spent charged
// to its row with the verdicts that spend decides (the task's on_limit,
// the provider's failures and the budget's refusals), and the graders'
// calls joined to the agent's transcript.
//
// The attempt's own side of its limits (its deadline fixed, told and
// lifted; an agent stopped at it) is internal/attempt's limits.go.
package account

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// Account is one attempt's tokens at the gateway.
type Account struct {
	gw   *gateway.Gateway
	id   string // the gateway's id of the attempt (its usage, quota, transcript)
	task *evalset.Task
	tok  attempt.Tokens
}

// ID is the gateway's id of attempt seq of run runID.
func ID(runID string, seq int) string { return runID + "/" + strconv.Itoa(seq) }

// Open issues attempt id's tokens: the agent's, whose requests' backoffs
// hooks hands to the scheduler, with the task's model-side limits (tokens,
// model calls, USD) set before its agent starts; and the model judge's,
// when the task has one, priced by its graders' prices (else models').
func Open(gw *gateway.Gateway, id string, t *evalset.Task, hooks gateway.AttemptHooks, models evalset.Prices) *Account {
	a := &Account{gw: gw, id: id, task: t}
	a.tok.Agent = gw.Issue(id, hooks)
	gw.SetQuota(id, quota(t))
	if mg := t.Scorer.ModelGraded; mg != nil {
		// Inside --budget, never in a sandbox.
		a.tok.Grading = gw.Issue(a.gradingID(), nil)
		p := mg.GraderPrices(models)
		gw.SetPrices(a.gradingID(), gateway.Prices{InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok})
	}
	return a
}

func (a *Account) gradingID() string { return a.id + "/grading" }

// Tokens are what the attempt's runner is handed.
func (a *Account) Tokens() attempt.Tokens { return a.tok }

// SetDeadline gives attempt id's quota (task t's limits) the agent's
// deadline, once its runner knows it (zero: none; lifted again after the
// agent, so a scorer calling the model is not refused for the agent's time).
func SetDeadline(gw *gateway.Gateway, id string, t *evalset.Task, at time.Time) {
	q := quota(t)
	q.Deadline = at
	gw.SetQuota(id, q)
}

// quota is the gateway quota of a task's limits (zero: unlimited).
func quota(t *evalset.Task) gateway.Quota {
	l := t.Limits
	if l == nil {
		return gateway.Quota{}
	}
	return gateway.Quota{Tokens: l.Tokens, Calls: l.ModelCalls, CostUSD: l.CostUSD}
}

// Close revokes the tokens, waits for the last of their usage and charges
// it to row: tokens, cost and requests (the graders' apart), the task's
// on_limit, and the verdicts the provider caused.
func (a *Account) Close(row *record.Attempt) {
	gw := a.gw
	gw.Revoke(a.tok.Agent)
	if a.tok.Grading != "" {
		gw.Revoke(a.tok.Grading)
	}
	// Usage of a stream that just ended is charged after its last byte, and a
	// stream the agent cut is read on for up to CutDrain: wait for it.
	dctx, cancel := context.WithTimeout(context.Background(), gateway.DefaultCutDrain+10*time.Second)
	_ = gw.Drain(dctx, a.id)
	if a.tok.Grading != "" {
		_ = gw.Drain(dctx, a.gradingID())
	}
	cancel()
	u, ok := gw.Usage(a.id)
	if !ok {
		return
	}
	row.InputTokens, row.OutputTokens, row.CostUSD, row.Requests = u.InputTokens, u.OutputTokens, u.CostUSD, u.Requests
	judgeLimit(row, u, a.task)
	if gu, ok := gw.Usage(a.gradingID()); ok && a.tok.Grading != "" {
		row.Grading = record.Spend{InputTokens: gu.InputTokens, OutputTokens: gu.OutputTokens, CostUSD: gu.CostUSD, Requests: gu.Requests}
		// The grader's calls the provider failed or the budget refused
		// are the provider's doing too.
		u.BudgetRefused += gu.BudgetRefused
		u.UpstreamFailed += gu.UpstreamFailed
		u.Requests += gu.Requests
	}
	providerCaused(row, u)
}

// Transcript is the attempt's model calls as the gateway captured them:
// the agent's, then the graders' marked as the scorer's.
func (a *Account) Transcript() *transcript.Transcript {
	return withGrading(a.gw.Transcript(a.id), a.gw.Transcript(a.gradingID()), a.tok.Grading != "")
}

// judgeLimit applies the task's on_limit to an attempt whose model calls
// the gateway refused at one of its limits (u.LimitReached), once its row
// is back at the supervisor. score (the default) keeps the verdict on what
// the agent left; an agent that then exited non-zero with nothing a match
// could judge is failed (it ran out of its limit), not errored. fail and
// error replace the verdict.
func judgeLimit(row *record.Attempt, u gateway.Usage, t *evalset.Task) {
	if u.LimitReached != "" && row.Limit == "" {
		row.Limit = u.LimitReached
	}
	if row.Limit == "" || row.Limit == gateway.LimitAgentTime && row.TimedOut {
		return // no limit, or the deadline (judged in the worker: internal/attempt's timedOut)
	}
	why := fmt.Sprintf("limit: %s: the gateway refused %d of the attempt's model calls at its limit", row.Limit, u.LimitRefused)
	switch t.Limits.Judge() {
	case evalset.OnLimitFail:
		if row.Status == status.Passed || row.Status == status.Failed || row.Status == status.Errored {
			zero := 0.0
			row.Status, row.Score, row.Reason, row.Explanation = status.Failed, &zero, "", why+" (on_limit: fail)"
		}
	case evalset.OnLimitError:
		if row.Status == status.Passed || row.Status == status.Failed {
			row.Status, row.Score, row.Reason = status.Errored, nil, why+" (on_limit: error)"
		}
	default:
		if row.Status == status.Errored && strings.HasPrefix(row.Reason, "agent exited ") {
			zero := 0.0
			row.Status, row.Score, row.Explanation = status.Failed, &zero, why+"; then the "+row.Reason
			row.Reason = ""
		}
	}
}

// providerCaused keeps a verdict the provider caused out of the record
// (issue 30 item 1): an attempt that did not pass while the gateway
// refused its calls for the budget is skipped (budget), and one during
// which the upstream failed calls after the gateway's retries is infra, so
// carry never keeps it. A pass stands: the agent got there regardless.
func providerCaused(row *record.Attempt, u gateway.Usage) {
	if row.Status != status.Failed && row.Status != status.Errored {
		return
	}
	was := string(row.Status)
	if row.Reason != "" {
		was += ": " + row.Reason
	} else if row.Explanation != "" {
		was += ": " + row.Explanation
	}
	switch {
	case u.BudgetRefused > 0:
		row.Status = status.Skipped
		row.Reason = fmt.Sprintf("budget spent: the gateway refused %d of the attempt's model calls (it would have been %s)", u.BudgetRefused, was)
	case u.UpstreamFailed > 0:
		row.Status = status.Infra
		row.Reason = fmt.Sprintf("the model provider failed %d of the attempt's %d calls after the gateway's retries (it would have been %s)", u.UpstreamFailed, u.Requests, was)
	default:
		return
	}
	row.Score = nil
}

// withGrading adds the graders' calls to the agent's transcript, marked
// as the scorer's, after the agent's.
func withGrading(agent, grading *transcript.Transcript, judged bool) *transcript.Transcript {
	if !judged || grading == nil || len(grading.Calls) == 0 && grading.Dropped == 0 {
		return agent
	}
	if agent == nil {
		agent = &transcript.Transcript{Mode: grading.Mode}
	}
	for _, c := range grading.Calls {
		c.By = transcript.ByScorer
		agent.Calls = append(agent.Calls, c)
	}
	agent.Dropped += grading.Dropped
	if agent.Truncated == "" {
		agent.Truncated = grading.Truncated
	}
	return agent
}
