package evalset

import (
	"strings"
	"testing"
)

// Issue 23 item 11: the output tokens --budget holds for a model call that
// names no max_tokens (4096, fixed in the gateway) are model.budget_max_tokens,
// validated like every other key.
func TestBudgetMaxTokens(t *testing.T) {
	dir := writeTree(t, yamlOnly("model:\n  budget_max_tokens: 512\n"+okTask))
	if es := mustLoad(t, dir, LoadOptions{}); es.Model.BudgetMaxTokens != 512 {
		t.Fatalf("budget_max_tokens %d, want 512", es.Model.BudgetMaxTokens)
	}
	for _, c := range []struct{ yaml, want string }{
		{"model:\n  budget_max_tokens: -1\n", "steward.yaml:2: model.budget_max_tokens: must be between 0 (the default, 4096) and 10000000, got -1"},
		{"model:\n  budget_max_tokens: lots\n", `steward.yaml:2: model.budget_max_tokens: expected a whole number, got "lots"`},
	} {
		got := problems(t, writeTree(t, yamlOnly(c.yaml+okTask)), LoadOptions{})
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("problems %q, want %q", got, c.want)
		}
	}
}
