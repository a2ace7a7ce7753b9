package run

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// Per-attempt limits and the agent's deadline (issue 30 items 3 and 4).
//
// The supervisor holds the gateway, so it sets each attempt's quota: the
// model-side limits (tokens, model calls, USD) before the attempt is handed
// to its runner, and the agent's deadline once the runner knows it (the
// attempt's sandbox is up and its setup begins: workers say so with a
// `deadline` message). After the agent ends its deadline is lifted again,
// so a scorer calling the model is not refused for the agent's time.

// Environment variables every attempt's commands see.
const (
	// EnvDeadline is when the agent's time ends (RFC 3339, UTC).
	EnvDeadline = "STEWARD_DEADLINE"
	// EnvRemainingURL is the gateway's endpoint that says what the attempt
	// has left (GET with the attempt's token, as for the model API).
	EnvRemainingURL = "STEWARD_REMAINING_URL"
)

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
func (l *launcher) attemptID(seq int) string { return fmt.Sprintf("%s/%d", l.runID, seq) }

// setDeadline gives attempt seq's quota the agent's deadline (zero: none).
func (l *launcher) setDeadline(_ context.Context, seq int, at time.Time) error {
	a := l.bySeq(seq)
	if a == nil {
		return fmt.Errorf("set the deadline of attempt %d: no such attempt", seq)
	}
	q := quotaFor(l.p.Tasks[a.Task].Task)
	q.Deadline = at
	l.gw.SetQuota(l.attemptID(seq), q)
	return nil
}

// agentBudget is how long the agent (sample setup included) has: a
// sample's own timeout (a Harbor task's), else agent_timeout (default:
// timeout), bounded by limits.agent_time either way.
func agentBudget(t *evalset.Task, s *evalset.Sample) time.Duration {
	d := t.AgentTimeoutD()
	if s != nil && s.Timeout > 0 {
		d = s.Timeout.D()
		if t.Limits != nil && t.Limits.AgentTime > 0 && t.Limits.AgentTime.D() < d {
			d = t.Limits.AgentTime.D()
		}
	}
	return d
}

// attemptBound is what an attempt may take before slack: the agent's time,
// its grace and the scorer's time.
func attemptBound(t *evalset.Task, s *evalset.Sample) time.Duration {
	sc := t.ScorerTimeoutD()
	if s != nil && s.ScorerTimeout > 0 {
		sc = s.ScorerTimeout.D()
	}
	return agentBudget(t, s) + t.AgentGraceD() + sc
}

// startDeadline fixes the agent's deadline (from now: sample setup and the
// agent share it), tells the gateway and puts it in the attempt's
// environment with the remaining endpoint. It returns the row and true
// when the gateway could not be told.
func (r *attemptRun) startDeadline() (record.Attempt, bool) {
	r.deadline = time.Now().Add(agentBudget(r.t, r.a.Sample))
	if f := r.e.x.deadline; f != nil {
		if err := f(r.ctx, r.a.Seq, r.deadline); err != nil {
			return r.classify(sandbox.InfraError(err), "give the gateway the agent's deadline"), true
		}
	}
	r.env[EnvDeadline] = r.deadline.UTC().Format(time.RFC3339)
	if u := r.e.x.gwURL[r.e.x.taskProv[r.a.Task]]; u != "" {
		r.env[EnvRemainingURL] = strings.TrimSuffix(u, "/") + gateway.RemainingPath
	}
	return record.Attempt{}, false
}

// endDeadline lifts the agent's deadline from the gateway once the agent
// has ended (the scorer's calls are not the agent's).
//
// An aborted run needs no lifting (its gateway stops with it), and a
// worker's supervisor answers only while the worker serves messages, which
// it stops doing at an abort: waiting then would hang the attempt, and the
// worker, for ever (the cancelled action never exited). The wait is
// bounded either way, and ends at once when the supervisor is gone (the
// binder's gone: a worker cleans up within seconds of its supervisor's death).
func (r *attemptRun) endDeadline() {
	f := r.e.x.deadline
	if f == nil || r.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), endDeadlineWait)
	defer cancel()
	_ = f(ctx, r.a.Seq, time.Time{})
}

// endDeadlineWait bounds endDeadline's wait for the supervisor.
const endDeadlineWait = 10 * time.Second

// timedOut marks an agent stopped at its deadline (SIGTERM, grace, then
// killed): its sandbox is frozen like any other's before judging and the
// scorer judges what it left, unless on_limit says otherwise. It returns
// the row and true when the attempt ends here.
func (r *attemptRun) timedOut(res sandbox.ExecResult) (record.Attempt, bool) {
	r.row.TimedOut, r.row.Limit = true, gateway.LimitAgentTime
	r.row.AgentExit, r.row.AgentOutput = 0, "" // timed_out says how it ended
	why := fmt.Sprintf("limit: agent_time: the agent was stopped at its deadline (%s, grace %s)", agentBudget(r.t, r.a.Sample), r.t.AgentGraceD())
	switch r.t.Limits.Judge() {
	case evalset.OnLimitFail:
		zero := 0.0
		r.row.Score, r.row.Explanation = &zero, why+" (on_limit: fail)"
		return r.finish(status.Failed, ""), true
	case evalset.OnLimitError:
		return r.finish(status.Errored, why+" (on_limit: error)"), true
	}
	return record.Attempt{}, false
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
		return // no limit, or the deadline (judged in the worker: timedOut)
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
