package evalset

import (
	"fmt"
	"math"
	"time"
)

// Limits are per-attempt bounds (issue 30 item 3): a task's limits:, each
// field defaulting from _steward.yaml's limits: (the fleet default). Zero
// fields are unlimited. The gateway enforces the model-side ones (Tokens,
// ModelCalls, CostUSD) per attempt token; AgentTime is the agent's
// deadline (with agent_timeout: the smaller of the two). Reaching one is a
// status of its own (`limit: tokens`, …), judged as OnLimit says.
type Limits struct {
	Tokens     int64    `yaml:"tokens" json:"tokens,omitempty"`
	ModelCalls int64    `yaml:"model_calls" json:"model_calls,omitempty"`
	CostUSD    float64  `yaml:"cost_usd" json:"cost_usd,omitempty"`
	AgentTime  Duration `yaml:"agent_time" json:"agent_time,omitempty"`
	// WorkingTime (agent time minus time waiting on the model) is refused at
	// load: Steward does not measure it yet (see checkLimits).
	WorkingTime Duration `yaml:"working_time" json:"working_time,omitempty"`
	// OnLimit is how an attempt that reached a limit or its agent deadline
	// is judged: "score" (default: the scorer judges what the agent left;
	// the verdict stands beside the limit), "fail" (failed without
	// scoring) or "error" (errored: not a verdict, never carried).
	OnLimit string `yaml:"on_limit" json:"on_limit,omitempty"`
}

// How a limit reached is judged (limits.on_limit).
const (
	OnLimitScore = "score"
	OnLimitFail  = "fail"
	OnLimitError = "error"
)

// DefaultAgentGrace is how long an agent has between SIGTERM at its
// deadline and being killed (agent_grace).
const DefaultAgentGrace = 10 * time.Second

// Judge is OnLimit with its default.
func (l *Limits) Judge() string {
	if l == nil || l.OnLimit == "" {
		return OnLimitScore
	}
	return l.OnLimit
}

// IsZero says whether no field is set.
func (l *Limits) IsZero() bool { return l == nil || *l == Limits{} }

// checkLimits reports every bad field of l at path (tasks[i].limits or
// limits in _steward.yaml); has says which fields were written.
func checkLimits(l *Limits, path string, has func(string) bool, errf func(path, format string, args ...any)) {
	if l == nil {
		return
	}
	if l.Tokens < 0 {
		errf(path+".tokens", "must be 0 (unlimited) or more, got %d", l.Tokens)
	}
	if l.ModelCalls < 0 {
		errf(path+".model_calls", "must be 0 (unlimited) or more, got %d", l.ModelCalls)
	}
	if l.CostUSD < 0 || math.IsNaN(l.CostUSD) || math.IsInf(l.CostUSD, 0) {
		errf(path+".cost_usd", "must be 0 (unlimited) or a positive amount of USD, got %v", l.CostUSD)
	}
	if l.AgentTime < 0 {
		errf(path+".agent_time", "must be 0 (unlimited) or longer, got %s", l.AgentTime)
	}
	if has(path + ".working_time") {
		errf(path+".working_time", "is not supported yet: working time is agent time minus the time spent waiting on the model, "+
			"and Steward does not yet measure that wait per attempt soundly (calls overlap, streams stall in the agent as well as in the model), "+
			"so it will not enforce a bound it cannot measure; use agent_time (the whole time, model waits included) instead")
	}
	switch l.OnLimit {
	case "", OnLimitScore, OnLimitFail, OnLimitError:
	default:
		errf(path+".on_limit", "must be score (judge what the agent left, the default), fail or error, got %q", l.OnLimit)
	}
}

// mergeLimits fills the fields task leaves unset from fleet (the
// _steward.yaml default); nil when neither sets any.
func mergeLimits(task, fleet *Limits) *Limits {
	if task.IsZero() && fleet.IsZero() {
		return task
	}
	var out Limits
	if task != nil {
		out = *task
	}
	if fleet != nil {
		if out.Tokens == 0 {
			out.Tokens = fleet.Tokens
		}
		if out.ModelCalls == 0 {
			out.ModelCalls = fleet.ModelCalls
		}
		if out.CostUSD == 0 {
			out.CostUSD = fleet.CostUSD
		}
		if out.AgentTime == 0 {
			out.AgentTime = fleet.AgentTime
		}
		if out.OnLimit == "" {
			out.OnLimit = fleet.OnLimit
		}
	}
	return &out
}

// AgentTimeout is how long the agent (sample setup included) may run:
// agent_timeout (default: timeout), bounded by limits.agent_time.
func (t *Task) AgentTimeoutD() time.Duration {
	d := t.Timeout.D()
	if t.AgentTimeout > 0 {
		d = t.AgentTimeout.D()
	}
	if t.Limits != nil && t.Limits.AgentTime > 0 && t.Limits.AgentTime.D() < d {
		d = t.Limits.AgentTime.D()
	}
	return d
}

// ScorerTimeoutD is how long the scorer may run: scorer_timeout (default: timeout).
func (t *Task) ScorerTimeoutD() time.Duration {
	if t.ScorerTimeout > 0 {
		return t.ScorerTimeout.D()
	}
	return t.Timeout.D()
}

// AgentGraceD is agent_grace with its default (0 when set to 0: killed at once).
func (t *Task) AgentGraceD() time.Duration {
	if t.AgentGrace == nil {
		return DefaultAgentGrace
	}
	return t.AgentGrace.D()
}

// limits validates a task's limits:, timeouts and grace.
func (v *validator) limits(tp string, t *Task) {
	checkLimits(t.Limits, tp+".limits", v.has, v.errf)
	for _, k := range []struct {
		key string
		d   Duration
	}{{"agent_timeout", t.AgentTimeout}, {"scorer_timeout", t.ScorerTimeout}} {
		if k.d < 0 {
			v.errf(tp+"."+k.key, "must be longer than 0 (0 or unset: timeout, %s)", t.Timeout)
		}
	}
	if t.AgentGrace != nil && *t.AgentGrace < 0 {
		v.errf(tp+".agent_grace", "must be 0 (killed at the deadline) or longer, got %s", *t.AgentGrace)
	}
}

var _ = fmt.Sprintf
