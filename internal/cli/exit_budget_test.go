package cli

import (
	"testing"

	"github.com/steward-evals/steward/internal/report"
)

// A run its budget stopped exits 4, even when everything that ran passed;
// cancellation and infrastructure errors still take precedence.
func TestExitCodeForBudgetStop(t *testing.T) {
	stopped := &report.Report{Spend: report.Spend{BudgetUSD: 1, USD: 0.9, BudgetStopped: true}}
	stopped.Counts.Passed = 2
	if got := exitFor(stopped, false); got != ExitBudget || ExitBudget != 4 {
		t.Fatalf("budget stop: exit %d", got)
	}
	if got := exitFor(stopped, true); got != ExitCancelled {
		t.Fatalf("cancelled budget stop: exit %d", got)
	}
	stopped.Counts.Infra = 1
	if got := exitFor(stopped, false); got != ExitInfra {
		t.Fatalf("infra and budget stop: exit %d", got)
	}
	ok := &report.Report{Spend: report.Spend{BudgetUSD: 1, USD: 0.5}}
	ok.Counts.Passed = 2
	if got := exitFor(ok, false); got != ExitOK {
		t.Fatalf("within budget: exit %d", got)
	}
}
