package run

import (
	"strings"
	"testing"
)

// Issue 23 item 11: model.budget_max_tokens is what the hard budget holds
// for a call that names no max_tokens (it was 4096, fixed). At $0.10 an
// output token and a $10 budget, 4096 tokens' hold refuses the call; 16
// tokens' lets it through, and the sample passes.
func TestBudgetMaxTokensReachesTheGateway(t *testing.T) {
	exe := buildSteward(t)
	set := func(extra string) string {
		return `
model:
  upstream: mock
  prices: {input_per_mtok: 1000, output_per_mtok: 100000}
` + extra + `
tasks:
  - name: spend
    sandbox: {provider: local}
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - {id: "1", input: "What is 1+1?", target: "2"}
`
	}
	held := launchSet(t, write(t, t.TempDir(), "steward.yaml", set("")), func(o *Options) { o.BudgetUSD = 10; o.Exe = exe })
	if got := statuses(held.rep); got == "1:p" || !held.rep.Spend.BudgetStopped {
		t.Fatalf("with the default hold of 4096 tokens: %s, spend %+v\n%s", got, held.rep.Spend, held.stderr)
	}
	if !strings.Contains(held.stderr, "4096 output tokens") {
		t.Fatalf("the refusal does not name the 4096 tokens held:\n%s", held.stderr)
	}
	small := launchSet(t, write(t, t.TempDir(), "steward.yaml", set("  budget_max_tokens: 16\n")), func(o *Options) { o.BudgetUSD = 10; o.Exe = exe })
	if got := statuses(small.rep); got != "1:p" || small.rep.Spend.BudgetStopped {
		t.Fatalf("with budget_max_tokens 16: %s, spend %+v\n%s", got, small.rep.Spend, small.stderr)
	}
}
