// Package report holds the report data model, built from the record only, and
// its renderers (terminal, markdown summary, PR comment, JUnit, JSON).
package report

import (
	"time"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// Report is everything a renderer needs. Rows are in discovery order (C8).
type Report struct {
	Title    string    `json:"title"`
	EvalSet  string    `json:"eval_set"`
	RunIDs   []string  `json:"run_ids"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Plan is the PLAN line without the box, e.g.
	// "45 attempts · 9 evals × 5 configs · concurrency 19 (from flag) · slow ≤1".
	Plan   string `json:"plan"`
	Counts Counts `json:"counts"`
	// Score is the pass rate over every sample of every task (each sample
	// scored by its task's reducer) with its 95 % interval; nil when no
	// sample was judged.
	Score *stats.Rate `json:"score,omitempty"`
	// CostPerPass is the cost per pass over every task (see TaskReport).
	CostPerPass *float64 `json:"cost_per_pass_usd,omitempty"`
	// PassWithinBudget is the pass rate over attempts that reached no limit
	// and no deadline, when some did (limits.go).
	PassWithinBudget *WithinBudget `json:"pass_within_budget,omitempty"`

	Tasks    []TaskReport `json:"tasks"`
	Attempts []AttemptRow `json:"attempts"`
	Spend    Spend        `json:"spend"`
	Ramp     []RampPoint  `json:"ramp,omitempty"`
	Hold     string       `json:"hold,omitempty"` // ramp hold reason when held
	Partial  bool         `json:"partial,omitempty"`
	Left     []string     `json:"left,omitempty"` // what a cancelled run left undone
	Shard    string       `json:"shard,omitempty"`
	// Comparison judges the run against its base, when a baseline was given.
	Comparison *Comparison `json:"comparison,omitempty"`
	// Forecast is what the launch predicted before it ran (set by the
	// launch that made the report; the PLAN line holds it in short).
	Forecast *forecast.Forecast `json:"forecast,omitempty"`
	// Trends is the record's earlier runs of the eval set per task, when
	// asked for (steward report --trends, steward view): trends.go.
	Trends *Trends `json:"trends,omitempty"`
	// SideBySide pairs the base's and the head's attempts of each sample
	// with the diff of their answers (steward compare --format html,
	// steward view): sidebyside.go.
	SideBySide []SamplePair `json:"-"`
	// KnownFlaky are the samples the record's ledger knows as flaky at
	// this report's identities ("task\x00sample"): set on a baseline's
	// report, so the comparison lists their flips apart.
	KnownFlaky map[string]FlakyInfo `json:"-"`
	// Decide is the eval set's decide: (set by the launch that loaded it):
	// what the action spends on an inconclusive verdict when its decide
	// input is not set.
	Decide *DecideSettings `json:"-"`
	// Version is the steward that rendered the report ("v1.2.3 (abc1234)"),
	// shown in the summary and comment footers.
	Version string `json:"version,omitempty"`

	// Crashed says why a run ended without finishing (its process died); ""
	// for a run that finished or was cancelled.
	Crashed string `json:"crashed,omitempty"`
	// Unpublished are the attempts a run that did not finish planned but
	// never published ("task/sample#attempt"), in discovery order.
	Unpublished []string `json:"unpublished,omitempty"`
}

// Counts is the panel's counts line (L1).
type Counts struct {
	Total  int `json:"total"`
	Reused int `json:"reused"`
	// Running: attempts whose sandbox exists and that execute (backoff
	// included); Starting: admitted, their sandbox still being made.
	Running     int `json:"running"`
	Starting    int `json:"starting,omitempty"`
	Queued      int `json:"queued"`
	Passed      int `json:"passed"`
	Failed      int `json:"failed"`
	Errored     int `json:"errored"`
	Infra       int `json:"infra"`
	Skipped     int `json:"skipped"`
	Interrupted int `json:"interrupted"`
}

// PassRate is passed ÷ judged (passed+failed+errored+infra); 0 when nothing was judged.
func (c Counts) PassRate() float64 {
	judged := c.Passed + c.Failed + c.Errored + c.Infra
	if judged == 0 {
		return 0
	}
	return float64(c.Passed) / float64(judged)
}

// TaskReport is one task's line.
type TaskReport struct {
	Name     string  `json:"name"`
	Counts   Counts  `json:"counts"`
	PassRate float64 `json:"pass_rate"`
	Setpoint int     `json:"setpoint,omitempty"` // last setpoint
	Limit    string  `json:"limit,omitempty"`    // e.g. "≤1" when max_samples is set
	// Reducer is how the task's attempts become a sample's score ("" reads
	// as the default, mean); Score is the task's pass rate under it, over
	// its judged samples, with a 95 % interval clustered by sample.
	Reducer string      `json:"reducer,omitempty"`
	Score   *stats.Rate `json:"score,omitempty"`
	// CostUSD is what the task's judged attempts cost (carried ones at
	// what they cost the run that produced them) and CostPerPass that
	// divided by the expected passes (the sum of the sample scores): what a
	// pass costs, whatever this run paid. Absent with no spend or no pass.
	CostUSD     float64  `json:"cost_usd,omitempty"`
	CostPerPass *float64 `json:"cost_per_pass_usd,omitempty"`
	// GradingUSD is the part of CostUSD its model judge's graders spent.
	GradingUSD float64 `json:"grading_usd,omitempty"`
	// Planned is the task's attempts per sample (0: not recorded); attempts
	// numbered above it are extra (launch --confirm, decide).
	Planned int `json:"planned_attempts,omitempty"`
}

// AttemptRow is one attempt.
type AttemptRow struct {
	Task        string         `json:"task"`
	Sample      string         `json:"sample"`
	Attempt     int            `json:"attempt"` // 1-based
	Status      status.Attempt `json:"status"`
	Score       *float64       `json:"score,omitempty"`
	Answer      string         `json:"answer,omitempty"`
	Explanation string         `json:"explanation,omitempty"`
	Reason      string         `json:"reason,omitempty"` // why errored/skipped/infra
	Carried     bool           `json:"carried,omitempty"`
	CarriedFrom string         `json:"carried_from,omitempty"` // the run that produced a carried result
	// Run is the run this row belongs to; Identity the sample's
	// attempt-independent fingerprint (equal identity: the same definition).
	Run          string        `json:"run_id,omitempty"`
	Identity     string        `json:"identity,omitempty"`
	Duration     time.Duration `json:"duration_ns"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	CostUSD      float64       `json:"cost_usd"`
	Fingerprint  string        `json:"fingerprint,omitempty"`
	Log          string        `json:"log,omitempty"`    // truncated agent/scorer output
	Source       string        `json:"source,omitempty"` // file:line of the sample
	// Details are what the HTML report shows per attempt (details.go).
	Details *AttemptDetails `json:"details,omitempty"`
	// Tries is how many times a retried attempt ran (unset: once), and
	// RetryReasons why each earlier try was retried (tries.go).
	Tries        int      `json:"tries,omitempty"`
	RetryReasons []string `json:"retry_reasons,omitempty"`
	// AgentExit and AgentOutput: the agent exited non-zero and the scorer
	// judged what it left; its status and output tail beside the verdict.
	AgentExit   int    `json:"agent_exit,omitempty"`
	AgentOutput string `json:"agent_output,omitempty"`
	// Limit names the per-attempt limit it reached ("tokens", "model_calls",
	// "cost_usd", "agent_time"); TimedOut: stopped at its agent deadline and
	// judged on what it left (limits.go).
	Limit    string `json:"limit,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Grading* are what the model judge's graders spent on the attempt
	// (scorer.model_graded), apart from the agent's tokens and cost.
	GradingInputTokens  int64   `json:"grading_input_tokens,omitempty"`
	GradingOutputTokens int64   `json:"grading_output_tokens,omitempty"`
	GradingCostUSD      float64 `json:"grading_cost_usd,omitempty"`
}

// TotalUSD is what the attempt cost: its agent's calls and its grading.
func (a AttemptRow) TotalUSD() float64 { return a.CostUSD + a.GradingCostUSD }

// Spend sums the gateway's accounting.
type Spend struct {
	USD          float64 `json:"usd"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Requests     int64   `json:"requests"`
	BudgetUSD    float64 `json:"budget_usd,omitempty"`
	// Saved is what the carried attempts cost the runs that produced them:
	// what this run did not spend again.
	SavedUSD          float64 `json:"saved_usd,omitempty"`
	SavedInputTokens  int64   `json:"saved_input_tokens,omitempty"`
	SavedOutputTokens int64   `json:"saved_output_tokens,omitempty"`
	// OverBudgetUSD is what was spent past the budget: requests already in
	// flight when it ran out (at most one request each, see docs/gateway.md).
	OverBudgetUSD float64 `json:"over_budget_usd,omitempty"`
	// BudgetStopped: the budget ran out and stopped the run (exit code 4).
	BudgetStopped bool `json:"budget_stopped,omitempty"`
	// Grading* are the part of USD, the tokens and the requests that model
	// judges' graders spent (the rest is the agents'): --budget covers both.
	GradingUSD          float64 `json:"grading_usd,omitempty"`
	GradingInputTokens  int64   `json:"grading_input_tokens,omitempty"`
	GradingOutputTokens int64   `json:"grading_output_tokens,omitempty"`
	GradingRequests     int64   `json:"grading_requests,omitempty"`
}

// RampPoint is one tend decision for one task (R6).
type RampPoint struct {
	At        time.Time `json:"at"`
	Task      string    `json:"task"`
	Setpoint  int       `json:"setpoint"`
	Ceiling   int       `json:"ceiling"`  // connection ceiling after the decision
	Limit     int       `json:"limit"`    // adaptive connection limit at the time
	Decision  string    `json:"decision"` // "up", "hold", "down", "fixed", "clamp"
	Reason    string    `json:"reason"`
	Pushback  bool      `json:"pushback"`
	Retries   int       `json:"retries"`
	Errored   int       `json:"errored"`
	Saturated bool      `json:"saturated"`
}

// DecideSettings bound decide's extra attempts (the eval set's decide:).
type DecideSettings struct {
	Rounds, PerRound, Attempts int
	USD                        float64
	Time                       time.Duration
}
