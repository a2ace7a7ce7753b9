package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test -update to accept):\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func f64(v float64) *float64 { return &v }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixture is a finished run of two tasks with one of every status.
func fixture() *Report {
	r := &Report{
		Title:    "nightly",
		EvalSet:  "evals/steward.yaml",
		RunIDs:   []string{"run-1"},
		Started:  t0,
		Finished: t0.Add(3 * time.Minute),
		Plan:     "8 attempts · 4 samples × 2 tasks · concurrency 4 (from flag) · slow ≤1",
		Spend:    Spend{USD: 0.4213, InputTokens: 123456, OutputTokens: 7890, Requests: 42, BudgetUSD: 5},
		Attempts: []AttemptRow{
			{Task: "fast", Sample: "add-1", Attempt: 1, Status: status.Passed, Score: f64(1), Duration: 1500 * time.Millisecond, InputTokens: 1200, OutputTokens: 80, Source: "evals/fast.jsonl:1"},
			{Task: "fast", Sample: "add-2", Attempt: 1, Status: status.Failed, Score: f64(0), Explanation: "expected 4, got 5", Duration: 2 * time.Second, InputTokens: 1100, OutputTokens: 75, Source: "evals/fast.jsonl:2"},
			{Task: "fast", Sample: "add-3", Attempt: 1, Status: status.Passed, Score: f64(1), Carried: true, Duration: 900 * time.Millisecond, InputTokens: 1000, OutputTokens: 60, Source: "evals/fast.jsonl:3"},
			{Task: "fast", Sample: "add-4", Attempt: 1, Status: status.Errored, Reason: "timeout after 30s", Duration: 30 * time.Second, Source: "evals/fast.jsonl:4"},
			{Task: "slow", Sample: "repo-1", Attempt: 1, Status: status.Passed, Score: f64(0.75), Duration: 75 * time.Second, InputTokens: 52000, OutputTokens: 3100, Source: "evals/steward.yaml:40"},
			{Task: "slow", Sample: "repo-1", Attempt: 2, Status: status.Infra, Reason: "docker: create container: daemon refused", Source: "evals/steward.yaml:40"},
			{Task: "slow", Sample: "repo-2", Attempt: 1, Status: status.Skipped, Reason: "budget spent", Source: "evals/steward.yaml:44"},
			{Task: "slow", Sample: "repo-2", Attempt: 2, Status: status.Skipped, Reason: "budget spent", Source: "evals/steward.yaml:44"},
		},
		Ramp: []RampPoint{
			{At: t0.Add(30 * time.Second), Task: "fast", Setpoint: 50, Ceiling: 50, Limit: 20, Decision: "up", Reason: "saturated, no pushback", Saturated: true},
			{At: t0.Add(30 * time.Second), Task: "slow", Setpoint: 1, Ceiling: 50, Limit: 20, Decision: "fixed", Reason: "max_samples: 1"},
			{At: t0.Add(60 * time.Second), Task: "fast", Setpoint: 70, Ceiling: 70, Limit: 34, Decision: "up", Reason: "saturated, no pushback", Saturated: true},
			{At: t0.Add(60 * time.Second), Task: "slow", Setpoint: 1, Ceiling: 70, Limit: 34, Decision: "fixed", Reason: "max_samples: 1"},
			{At: t0.Add(90 * time.Second), Task: "fast", Setpoint: 70, Ceiling: 70, Limit: 28, Decision: "hold", Reason: "pushback (1 window)", Pushback: true, Retries: 3},
			{At: t0.Add(120 * time.Second), Task: "fast", Setpoint: 50, Ceiling: 28, Limit: 28, Decision: "down", Reason: "pushback in 2 consecutive windows", Pushback: true, Retries: 5},
		},
	}
	r.Counts = Counts{Total: 8, Reused: 1, Passed: 3, Failed: 1, Errored: 1, Infra: 1, Skipped: 2}
	r.Tasks = []TaskReport{
		{Name: "fast", Counts: Counts{Total: 4, Reused: 1, Passed: 2, Failed: 1, Errored: 1}, Setpoint: 50},
		{Name: "slow", Counts: Counts{Total: 4, Passed: 1, Infra: 1, Skipped: 2}, Setpoint: 1, Limit: "≤1"},
	}
	for i := range r.Tasks {
		r.Tasks[i].PassRate = r.Tasks[i].Counts.PassRate()
	}
	r.Rescore()
	return r
}

// hostile is eval output written to break out of every format it lands in.
const hostile = "x | y `code` <script>alert(1)</script> --> <!-- ]]> \x1b[2J\x1b[31mred\r\n" +
	"line2 @octocat #1 **bold** [link](javascript:alert(1)) $x$ ::set-output name=a::b \u202Eevil\x00"

func hostileReport() *Report {
	r := fixture()
	r.Title = "title <b>|</b> -->"
	r.EvalSet = "evals/ev il.yaml -->"
	r.Hold = hostile
	r.Partial = true
	r.Left = []string{hostile}
	for i := range r.Attempts {
		a := &r.Attempts[i]
		a.Sample = hostile
		a.Explanation = hostile
		a.Answer = hostile
		a.Log = hostile
		if a.Reason != "" {
			a.Reason = hostile
		}
	}
	r.Tasks[0].Name = "task|<img src=x onerror=alert(1)>"
	r.Attempts[0].Task = r.Tasks[0].Name
	return r
}
