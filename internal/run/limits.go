package run

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// Per-attempt limits and the agent's deadline (issue 30 items 3 and 4).
//
// The supervisor holds the gateway, so it sets each attempt's quota: the
// model-side limits (tokens, model calls, USD) before the attempt is handed
// to its runner, and the agent's deadline once the runner knows it (the
// attempt's sandbox is up and its setup begins: workers say so with a
// `deadline` message). After the agent ends its deadline is lifted again,
// so a scorer calling the model is not refused for the agent's time. The
// attempt's side (the deadline fixed, told and lifted; an agent stopped at
// it) is internal/attempt's limits.go.

// quotaFor is the gateway quota of a task's limits (zero: unlimited).
func quotaFor(t *evalset.Task) gateway.Quota {
	l := t.Limits
	if l == nil {
		return gateway.Quota{}
	}
	return gateway.Quota{Tokens: l.Tokens, Calls: l.ModelCalls, CostUSD: l.CostUSD}
}

// attemptID is the gateway's id of the attempt with seq (its transcript,
// usage and quota).
func (l *dispatch) attemptID(seq int) string { return fmt.Sprintf("%s/%d", l.runID, seq) }

// setDeadline gives attempt seq's quota the agent's deadline (zero: none).
func (l *dispatch) setDeadline(_ context.Context, seq int, at time.Time) error {
	a := l.p.BySeq(seq)
	if a == nil {
		return fmt.Errorf("set the deadline of attempt %d: no such attempt", seq)
	}
	q := quotaFor(l.p.Tasks[a.Task].Task)
	q.Deadline = at
	l.gw.SetQuota(l.attemptID(seq), q)
	return nil
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
