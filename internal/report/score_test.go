package report

import (
	"math"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/status"
)

func TestScoresAndCostPerPass(t *testing.T) {
	r := &Report{Attempts: []AttemptRow{
		// a: 2 of 3 passed (mean 2/3); b: 0 of 1; an infra attempt is no observation and costs nothing here.
		{Task: "t", Sample: "a", Attempt: 1, Status: status.Passed, CostUSD: 0.01},
		{Task: "t", Sample: "a", Attempt: 2, Status: status.Failed, CostUSD: 0.01},
		{Task: "t", Sample: "a", Attempt: 3, Status: status.Passed, CostUSD: 0.01, Carried: true},
		{Task: "t", Sample: "b", Attempt: 1, Status: status.Errored, CostUSD: 0.02},
		{Task: "t", Sample: "c", Attempt: 1, Status: status.Infra, CostUSD: 0.5},
		{Task: "u", Sample: "x", Attempt: 1, Status: status.Passed, CostUSD: 0.04},
	}}
	r.Recount()
	tt := r.Tasks[0]
	if tt.Score == nil || tt.Score.Samples != 2 || math.Abs(tt.Score.Mean-1.0/3) > 1e-12 || tt.Score.Attempts != 4 {
		t.Fatalf("task t score %+v", tt.Score)
	}
	// t: $0.05 of judged attempts (carried included) ÷ 2/3 expected passes.
	if tt.CostPerPass == nil || math.Abs(*tt.CostPerPass-0.075) > 1e-12 {
		t.Errorf("task t cost per pass %v", tt.CostPerPass)
	}
	// Overall: $0.09 ÷ (2/3 + 0 + 1) passes.
	if r.CostPerPass == nil || math.Abs(*r.CostPerPass-0.09/(5.0/3)) > 1e-12 {
		t.Errorf("overall cost per pass %v", r.CostPerPass)
	}
	if got := costPerPassLine(r); got != "cost per pass: $0.0540 (t $0.0750, u $0.0400)" {
		t.Errorf("line %q", got)
	}
	// The reducer changes the score: all gives a 0.
	r.Tasks[0].Reducer = "all"
	r.Rescore()
	if r.Tasks[0].Score.Mean != 0 || r.Tasks[0].CostPerPass != nil {
		t.Errorf("reducer all: %+v, %v", r.Tasks[0].Score, r.Tasks[0].CostPerPass)
	}
	if s := formatScoreRate(r.Tasks[1].Score); !strings.HasPrefix(s, "100.0% (20.7–100.0%, n=1)") {
		t.Errorf("rate %q", s)
	}
}
