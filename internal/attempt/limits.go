package attempt

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
// to its runner (internal/run's limits.go), and the agent's deadline once
// the runner knows it (the attempt's sandbox is up and its setup begins:
// Env.Deadline; workers say so with a `deadline` message). After the agent
// ends its deadline is lifted again, so a scorer calling the model is not
// refused for the agent's time.

// Environment variables every attempt's commands see.
const (
	// EnvDeadline is when the agent's time ends (RFC 3339, UTC).
	EnvDeadline = "STEWARD_DEADLINE"
	// EnvRemainingURL is the gateway's endpoint that says what the attempt
	// has left (GET with the attempt's token, as for the model API).
	EnvRemainingURL = "STEWARD_REMAINING_URL"
)

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
	if f := r.e.x.Deadline; f != nil {
		if err := f(r.ctx, r.a.Seq, r.deadline); err != nil {
			return r.classify(sandbox.InfraError(err), "give the gateway the agent's deadline"), true
		}
	}
	r.env[EnvDeadline] = r.deadline.UTC().Format(time.RFC3339)
	if u := r.e.x.GatewayURL[r.e.x.TaskProv[r.a.Task]]; u != "" {
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
	f := r.e.x.Deadline
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
