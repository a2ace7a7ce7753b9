package run

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/mockmodel"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// The model judge (issue 30 item 2) through the gateway and the mock
// upstream: the grader's verdicts, its spend apart from the agent's at its
// own prices, its calls in the transcript marked as the scorer's, a grader
// that answers nonsense errored (never failed), and carry keeping only
// what was judged.
func TestModelJudge(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model: {name: mock-small, prices: {input_per_mtok: 1000, output_per_mtok: 1000}}
tasks:
  - name: qa
    sandbox: {provider: local}
    exclusive: false
    agent: 'steward_answer() { printf "%s" "$1"; }; case "$STEWARD_SAMPLE_ID" in right) steward_answer "The capital of France is Paris.";; *) steward_answer "It is London.";; esac'
    scorer:
      model_graded:
        prices: {input_per_mtok: 2, output_per_mtok: 4}
    samples:
      - {id: right, input: "What is the capital of France?", target: Paris}
      - {id: wrong, input: "What is the capital of France?", target: Paris}
  - name: vote
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "Paris"'
    scorer:
      model_graded:
        models: [grader-a, grader-b, grader-c]
        rubric: "names Paris"
    samples:
      - {id: v, input: "Capital of France?"}
  - name: nonsense
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "Paris"'
    scorer:
      model_graded:
        template: "Say something about {answer}."
    samples:
      - {id: n, input: "Capital of France?", target: Paris}
`)
	r1 := launchSet(t, path, nil)
	if got := statuses(r1.rep); got != "right:p wrong:f v:f n:e" {
		t.Fatalf("statuses %s\n%+v\n%s", got, r1.rep.Attempts, r1.stderr)
	}
	right, wrong := attemptOf(t, r1.rep, "right"), attemptOf(t, r1.rep, "wrong")
	if !strings.HasPrefix(right.Explanation, "grade C") || !strings.HasPrefix(wrong.Explanation, "grade I") {
		t.Errorf("explanations %q / %q", right.Explanation, wrong.Explanation)
	}
	// The mock grades "names Paris" against "Paris": not the phrase, so
	// all three graders give I (a vote of 0 of 3).
	if v := attemptOf(t, r1.rep, "v"); !strings.HasPrefix(v.Explanation, "grades I, I, I: 0 of 3 pass") {
		t.Errorf("vote explanation %q", v.Explanation)
	}
	if n := attemptOf(t, r1.rep, "n"); !strings.Contains(n.Reason, "model judge: grader mock-small: the grader's reply has no grade") {
		t.Errorf("nonsense grader's reason %q", n.Reason)
	}

	// Spend: the agent made no call; the grader's is priced at its own
	// prices (2 and 4 per million), not the model's (1000).
	for _, a := range []report.AttemptRow{right, wrong} {
		if a.CostUSD != 0 || a.InputTokens != 0 || a.GradingInputTokens == 0 || a.GradingOutputTokens == 0 {
			t.Errorf("%s: agent %d/%d $%g, grading %d/%d", a.Sample, a.InputTokens, a.OutputTokens, a.CostUSD, a.GradingInputTokens, a.GradingOutputTokens)
		}
		want := float64(a.GradingInputTokens)*2/1e6 + float64(a.GradingOutputTokens)*4/1e6
		if math.Abs(a.GradingCostUSD-want) > 1e-12 {
			t.Errorf("%s: grading cost $%g, want $%g at the grader's prices", a.Sample, a.GradingCostUSD, want)
		}
		d := a.Details
		if d == nil || d.Transcript == nil || len(d.Transcript.Calls) != 1 || d.Transcript.Calls[0].By != transcript.ByScorer {
			t.Errorf("%s: the grader's call is not in the transcript as the scorer's: %+v", a.Sample, d)
		}
	}
	if s := r1.rep.Spend; s.GradingUSD <= 0 || math.Abs(s.USD-s.GradingUSD) > 1e-9 {
		t.Errorf("spend %+v: grading not counted apart", s)
	}
	var term strings.Builder
	if err := report.Terminal(&term, r1.rep, report.TerminalOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(term.String(), "(agent $0.0000 · grading $") {
		t.Errorf("terminal report does not split agent and grading spend:\n%s", term.String())
	}

	// Judged attempts are carried, the errored one runs again.
	r2 := launchSet(t, path, nil)
	if got := statuses(r2.rep); got != "right=p wrong=f v=f n:e" {
		t.Fatalf("second launch %s", got)
	}
}

// A budget that cannot cover the grader's call makes the attempt skipped
// (budget), never a judged failed: the budget, not the agent, stopped it.
func TestModelJudgeUnderBudget(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model: {name: mock-small, prices: {input_per_mtok: 1000000, output_per_mtok: 1000000}}
tasks:
  - name: qa
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "Paris"'
    scorer: {model_graded: {}}
    samples:
      - {id: a, input: "Capital of France?", target: Paris}
`)
	r := launchSet(t, path, func(o *Options) { o.BudgetUSD = 1 })
	a := attemptOf(t, r.rep, "a")
	if a.Status != status.Skipped || !strings.HasPrefix(a.Reason, "budget spent") {
		t.Fatalf("status %s, reason %q; want skipped (budget)", a.Status, a.Reason)
	}
}

// The mock upstream's grading rule, which the examples and tests rest on.
func TestMockGrades(t *testing.T) {
	for _, c := range []struct{ sub, crit, want string }{
		{"The capital of France is Paris.", "Paris", "GRADE: C"},
		{"paris!", "PARIS", "GRADE: C"},
		{"Parisian food", "Paris", "GRADE: I"},
		{"It is London.", "Paris", "GRADE: I"},
		{"anything", "", "GRADE: I"},
	} {
		prompt := "[Task]: q\n***\n[Submission]: " + c.sub + "\n***\n[Criterion]: " + c.crit + "\n***\n"
		got, ok := mockmodel.Grade(prompt)
		if !ok || !strings.HasSuffix(got, c.want) {
			t.Errorf("Grade(%q, %q) = %q, %v; want …%s", c.sub, c.crit, got, ok, c.want)
		}
	}
	if _, ok := mockmodel.Grade("What is the capital of France?"); ok {
		t.Error("an ordinary prompt was graded")
	}
}

// The judge speaks each upstream's own API through the gateway to a
// provider as strict as the real ones (official SDK shapes, the real key
// only upstream), from worker processes as from the supervisor; a grader
// call the upstream fails after the gateway's retries makes the attempt
// infra, never failed.
func TestModelJudgeThroughTheFakeProvider(t *testing.T) {
	const key = "sk-real-key-judge-5e1d07"
	exe := buildSteward(t)
	for _, c := range []struct {
		upstream string
		workers  bool
		failing  bool
		want     string
	}{
		{"openai", false, false, "right:p wrong:f"},
		{"anthropic", true, false, "right:p wrong:f"},
		{"openai", true, true, "right:i wrong:i"},
	} {
		name := c.upstream + map[bool]string{false: "/in-process", true: "/workers"}[c.workers] + map[bool]string{false: "", true: "/upstream-fails"}[c.failing]
		t.Run(name, func(t *testing.T) {
			cfg := fakeprovider.Config{APIKey: key}
			if c.failing {
				cfg.ErrorRate, cfg.ErrorStatus = 1, 501 // not retried: the test needs no backoff
			}
			fp := fakeprovider.New(cfg)
			url, err := fp.Start(context.Background(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer fp.Close()
			base := url + "/v1"
			if c.upstream == "anthropic" {
				base = url
			}
			dir := t.TempDir()
			path := write(t, dir, "steward.yaml", `
model: {upstream: `+c.upstream+`, name: judge-test, base_url: `+base+`, api_key_env: TEST_REAL_KEY}
tasks:
  - name: qa
    sandbox: {provider: local}
    exclusive: false
    retries: 0
    agent: 'case "$STEWARD_SAMPLE_ID" in right) printf "Paris, of course.";; *) printf "Lyon";; esac'
    scorer: {model_graded: {}}
    samples:
      - {id: right, input: "What is the capital of France?", target: Paris}
      - {id: wrong, input: "What is the capital of France?", target: Paris}
`)
			getenv := func(k string) string {
				if k == "TEST_REAL_KEY" {
					return key
				}
				return ""
			}
			es, err := evalset.Load(path, evalset.LoadOptions{Getenv: getenv})
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			res, err := Launch(context.Background(), Options{EvalSet: es, Stderr: &syncWriter{w: &stderr}, Getenv: getenv,
				Exe: exe, Workers: c.workers, Providers: factory{&counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}}})
			if err != nil {
				t.Fatalf("launch: %v\n%s", err, stderr.String())
			}
			if got := statuses(res.Report); got != c.want {
				t.Fatalf("statuses %s, want %s\n%+v\n%s", got, c.want, res.Report.Attempts, stderr.String())
			}
			st := fp.Stats()
			if len(st.APIKeys) != 1 || st.APIKeys[0] != key {
				t.Errorf("the provider saw keys %v, want only the real one", st.APIKeys)
			}
			if c.failing {
				if a := attemptOf(t, res.Report, "right"); !strings.Contains(a.Reason, "the model provider failed") {
					t.Errorf("reason %q", a.Reason)
				}
				return
			}
			if a := attemptOf(t, res.Report, "right"); a.GradingInputTokens == 0 || a.Details == nil || a.Details.Transcript == nil ||
				len(a.Details.Transcript.Calls) != 1 || a.Details.Transcript.Calls[0].By != transcript.ByScorer {
				t.Errorf("grading not accounted or not in the transcript: %+v", a)
			}
		})
	}
}

// The JUnit and JSON reports carry the grading spend too.
func TestModelJudgeSpendInJUnitAndJSON(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model: {name: mock-small, prices: {input_per_mtok: 1, output_per_mtok: 1}}
tasks:
  - name: qa
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf Paris'
    scorer: {model_graded: {prices: {input_per_mtok: 100, output_per_mtok: 100}}}
    samples:
      - {id: a, input: "Capital of France?", target: Paris}
`)
	r := launchSet(t, path, nil)
	var junit, js bytes.Buffer
	if err := report.JUnit(&junit, r.rep); err != nil {
		t.Fatal(err)
	}
	if err := report.JSON(&js, r.rep); err != nil {
		t.Fatal(err)
	}
	if g := r.rep.Spend.GradingUSD; g <= 0 || !strings.Contains(junit.String(), `<property name="steward.grading_usd" value="`+strconv.FormatFloat(g, 'f', 6, 64)+`"`) {
		t.Errorf("JUnit lacks the grading spend:\n%s", junit.String())
	}
	for _, s := range []string{`"grading_usd": 0.0`, `"grading_cost_usd": 0.0`, `"grading_input_tokens": `} {
		if !strings.Contains(js.String(), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}
}
