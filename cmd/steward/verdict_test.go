package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
)

// stochasticEvalSet is one task of 40 samples whose agent passes each
// attempt with the probability P in agent.conf, drawn from a hash of SEED,
// the sample and the attempt: a noisy agent, the same on every machine.
// agent.conf is a task file, so changing it (a neutral change, when only
// SEED moves) re-runs every sample.
func stochasticEvalSet() string {
	var b strings.Builder
	b.WriteString(`name: noisy
model: {upstream: mock}
tasks:
  - name: noisy
    sandbox: {provider: local}
    exclusive: false
    files: {agent.conf: agent.conf}
    agent: |
      . ./agent.conf
      h=$(printf '%s' "$SEED-$STEWARD_SAMPLE_ID-$STEWARD_ATTEMPT" | cksum | cut -d' ' -f1)
      if [ $((h % 100)) -lt "$P" ]; then echo ok; else echo no; fi
    scorer: {match: exact}
    samples:
`)
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "      - {id: s%02d, input: go, target: ok}\n", i)
	}
	return b.String()
}

// verdictRun launches base (SEED 1, P 80) into .steward-base, then head
// with the given agent.conf through the action with fail-on: regression.
func verdictRun(t *testing.T, headConf string, inputs map[string]string, baseConfirm int) (out string, code int, outs map[string]string, comment string) {
	t.Helper()
	gh := fakegithub.New(t)
	gh.AddToken("ghs_writeToken1234", "github-actions[bot]", true)
	gh.AddPullRequest("octo", "evals", 17)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), stochasticEvalSet())
	writeFile(t, filepath.Join(dir, "agent.conf"), "SEED=1\nP=80\n")
	base := exec.Command(exe, "launch", "steward.yaml", "--record", ".steward-base")
	base.Dir = dir
	if b, err := base.CombinedOutput(); err != nil && !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("base launch: %v\n%s", err, b)
	}
	if baseConfirm > 0 {
		// The nightly job on main: more attempts of every sample, the
		// evidence the base side of the paired test draws on.
		night := exec.Command(exe, "launch", "steward.yaml", "--record", ".steward-base", "--confirm", fmt.Sprint(baseConfirm))
		night.Dir = dir
		if b, err := night.CombinedOutput(); err != nil && !strings.Contains(err.Error(), "exit status 1") {
			t.Fatalf("base --confirm: %v\n%s", err, b)
		}
	}
	writeFile(t, filepath.Join(dir, "agent.conf"), headConf)
	g := newGHEnv(t, dir, gh.URL, 17)
	g.vars["INPUT_GITHUB-TOKEN"] = "ghs_writeToken1234"
	g.vars["INPUT_BASELINE"] = ".steward-base"
	g.vars["INPUT_FAIL-ON"] = "regression"
	for k, v := range inputs {
		g.vars[k] = v
	}
	out, code = g.run(t)
	mine := stickyComments(t, gh)
	if len(mine) != 1 {
		t.Fatalf("%d sticky comments, want 1:\n%s", len(mine), out)
	}
	return out, code, readOutputs(t, g.output), mine[0].Body
}

// The gate through the action on a noisy agent (issue 22): a neutral change
// (a new seed, the same pass probability) passes; a real drop fails; an
// undecided case says what would decide it; decide spends extra attempts
// only on the uncertain samples and settles it.
func TestVerdictGateOnANoisyAgent(t *testing.T) {
	t.Parallel()
	t.Run("neutral change passes", func(t *testing.T) {
		t.Parallel()
		out, code, outs, body := verdictRun(t, "SEED=2\nP=80\n", nil, 0)
		t.Logf("A/A: %s", outs["verdict-summary"])
		if code != 0 || outs["verdict"] == "regressed" {
			t.Fatalf("A/A: exit %d, verdict %q:\n%s", code, outs["verdict"], out)
		}
		if outs["verdict"] == "inconclusive" && (!strings.Contains(body, "What would decide it") || !strings.Contains(out, "::warning::Steward: the verdict is inconclusive")) {
			t.Errorf("an inconclusive verdict does not say what would decide it:\n%s\n%s", body, out)
		}
		if !strings.Contains(body, "(95% CI") && !strings.Contains(body, "95% CI") {
			t.Errorf("no interval in the comment:\n%s", body)
		}
	})
	t.Run("real drop fails", func(t *testing.T) {
		t.Parallel()
		out, code, outs, body := verdictRun(t, "SEED=3\nP=30\n", nil, 0)
		if code != 1 || outs["verdict"] != "regressed" || !strings.Contains(body, "🔻 **regressed** · Regressed at 95% confidence: noisy fell") {
			t.Fatalf("drop: exit %d, verdict %q:\n%s\n%s", code, outs["verdict"], body, out)
		}
	})
	t.Run("decide settles it", func(t *testing.T) {
		t.Parallel()
		out, code, outs, body := verdictRun(t, "SEED=4\nP=65\n", map[string]string{"INPUT_DECIDE": "rounds=3,per-round=3,attempts=300"}, 4)
		if outs["verdict"] != "regressed" || code != 1 || !strings.Contains(body, "**Decide:**") {
			t.Fatalf("decide: exit %d, verdict %q:\n%s\n%s", code, outs["verdict"], body, out)
		}
		t.Logf("decide: %s", outs["verdict-summary"])
		if !strings.Contains(out, "Steward: decide, round 1: 3 more attempts on each of") {
			t.Errorf("no decide round in the log:\n%s", out)
		}
	})
}
