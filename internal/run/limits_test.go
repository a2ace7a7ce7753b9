package run

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

// loopAgent calls the model through the built-in chat agent until a call
// is refused (at most 20 calls: on old code nothing refuses), counting the
// calls that got an answer, and keeps what the agent saw of its deadline
// and of the remaining endpoint.
const loopAgent = `'i=0; while [ $i -lt 20 ] && "$STEWARD_BIN" agent chat >/dev/null 2>err.txt; do i=$((i+1)); done;
      echo $i > calls.txt; cat err.txt >&2;
      printf %s "$STEWARD_DEADLINE" > deadline.txt;
      curl -s -H "Authorization: Bearer $OPENAI_API_KEY" "$STEWARD_REMAINING_URL" > remaining.json; echo done'`

// Issue 30 item 3: per-attempt limits, end to end with the mock model. The
// gateway refuses the call past a limit (403, never retried); the attempt
// is judged as on_limit says and names the limit in every report: scored
// on what the agent left by default (a scorer command passes it, a match
// with no answer fails it, never errored), failed or errored on request.
// _steward.yaml's limits are the default a task's own fields override.
// On the old code nothing refused: 20 calls each, no limit anywhere.
func TestLimitsEndToEnd(t *testing.T) {
	exe := buildSteward(t)
	dir := t.TempDir()
	write(t, dir, "_steward.yaml", "limits: {model_calls: 3}\n")
	path := write(t, dir, "steward.yaml", `
model: {upstream: mock}
tasks:
  - name: calls
    sandbox: {provider: local}
    agent: `+loopAgent+`
    scorer: {command: 'test "$(cat calls.txt)" = 3 && test -s deadline.txt && grep -q model_calls_left remaining.json'}
    samples: [{id: calls, input: "What is 1+1?", target: "2"}]
  - name: tokens
    sandbox: {provider: local}
    limits: {tokens: 20, on_limit: fail}
    agent: `+loopAgent+`
    scorer: {command: 'true'}
    samples: [{id: tokens, input: "What is 1+1?", target: "2"}]
  - name: match
    sandbox: {provider: local}
    limits: {model_calls: 1}
    agent: '"$STEWARD_BIN" agent chat >/dev/null && "$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples: [{id: match, input: "What is 1+1?", target: "2"}]
  - name: error
    sandbox: {provider: local}
    limits: {on_limit: error}
    agent: `+loopAgent+`
    scorer: {command: 'true'}
    samples: [{id: error, input: "What is 1+1?", target: "2"}]
`)
	r := launchSet(t, path, func(o *Options) { o.Exe = exe })
	if got := statuses(r.rep); got != "calls:p tokens:f match:f error:e" {
		t.Fatalf("statuses %s, want calls:p tokens:f match:f error:e\n%+v\n%s", got, r.rep.Attempts, r.stderr)
	}
	want := map[string]string{"calls": gateway.LimitCalls, "tokens": gateway.LimitTokens, "match": gateway.LimitCalls, "error": gateway.LimitCalls}
	for _, a := range r.rep.Attempts {
		if a.Limit != want[a.Sample] || a.TimedOut {
			t.Errorf("%s: limit %q timed out %v, want limit %q", a.Sample, a.Limit, a.TimedOut, want[a.Sample])
		}
		if a.Status == status.Errored && a.Reason != "" && !strings.Contains(a.Reason, "on_limit: error") {
			t.Errorf("%s: reason %q does not say on_limit: error", a.Sample, a.Reason)
		}
	}
	if a := attemptOf(t, r.rep, "calls"); a.Score == nil || *a.Score != 1 {
		t.Errorf("calls: score %v, want 1 (the scorer judged what the agent left)", a.Score)
	}
	// Recorded, and shown in every report.
	db, err := record.OpenReadOnly(context.Background(), dir+"/.steward")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Attempts(context.Background(), r.rep.RunIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Limit != want[row.Sample] {
			t.Errorf("record: %s limit %q, want %q", row.Sample, row.Limit, want[row.Sample])
		}
	}
	w := r.rep.PassWithinBudget
	if w == nil || w.Passed != 0 || w.Judged != 4 || w.Limited != 4 {
		t.Errorf("pass within budget %+v, want 0 of 4 judged, 4 limited", w)
	}
	var term, md, junit, js bytes.Buffer
	if err := report.Terminal(&term, r.rep, report.TerminalOptions{ReasonWidth: 400}); err != nil {
		t.Fatal(err)
	}
	if err := report.Markdown(&md, r.rep, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := report.JUnit(&junit, r.rep); err != nil {
		t.Fatal(err)
	}
	if err := report.JSON(&js, r.rep); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"terminal": term.String(), "markdown": md.String(), "junit": junit.String()} {
		for _, s := range []string{"limit: model_calls", "limit: tokens"} {
			if name == "markdown" {
				s = strings.ReplaceAll(s, "_", "&#95;") // escaped in Markdown
			}
			if !strings.Contains(out, s) {
				t.Errorf("%s report does not show %q:\n%s", name, s, out)
			}
		}
		if name != "junit" && !strings.Contains(out, "pass within budget: 0.0%") {
			t.Errorf("%s report does not show the pass within budget:\n%s", name, out)
		}
	}
	if !strings.Contains(js.String(), `"limit": "model_calls"`) || !strings.Contains(js.String(), `"pass_within_budget"`) {
		t.Errorf("JSON report lacks the limit or pass_within_budget:\n%s", js.String())
	}
}

// working_time is refused at load with a reason (it is not measured), and
// bad limits name file, line and field.
func TestLimitsValidation(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: bad
    agent: 'true'
    scorer: {match: exact}
    agent_timeout: -1s
    limits:
      tokens: -5
      working_time: 10m
      on_limit: retry
    samples: [{id: a, input: x, target: y}]
`)
	_, err := evalset.Load(path, evalset.LoadOptions{})
	if err == nil {
		t.Fatal("loaded")
	}
	for _, s := range []string{
		"steward.yaml:8: tasks[0].limits.tokens: must be 0 (unlimited) or more",
		"steward.yaml:9: tasks[0].limits.working_time: is not supported yet",
		"steward.yaml:10: tasks[0].limits.on_limit: must be score",
		"steward.yaml:6: tasks[0].agent_timeout: duration \"-1s\" is negative",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("missing %q in:\n%v", s, err)
		}
	}
	write(t, dir, "_steward.yaml", "limits: {cost_usd: -1}\n")
	path = write(t, dir, "steward.yaml", "tasks: [{name: ok, agent: 'true', scorer: {match: exact}, samples: [{id: a, input: x, target: y}]}]\n")
	if _, err := evalset.Load(path, evalset.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "_steward.yaml:1: limits.cost_usd: must be 0") {
		t.Errorf("fleet limits: %v", err)
	}
}
