package run

import (
	"fmt"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// providerCaused keeps a verdict the provider caused out of the record
// (issue 30 item 1): an attempt that did not pass while the gateway
// refused its calls for the budget is skipped (budget), and one during
// which the upstream failed calls after the gateway's retries is infra, so
// carry never keeps it. A pass stands: the agent got there regardless.
func providerCaused(row *record.Attempt, u gateway.Usage) {
	if row.Status != status.Failed && row.Status != status.Errored {
		return
	}
	was := string(row.Status)
	if row.Reason != "" {
		was += ": " + row.Reason
	} else if row.Explanation != "" {
		was += ": " + row.Explanation
	}
	switch {
	case u.BudgetRefused > 0:
		row.Status = status.Skipped
		row.Reason = fmt.Sprintf("budget spent: the gateway refused %d of the attempt's model calls (it would have been %s)", u.BudgetRefused, was)
	case u.UpstreamFailed > 0:
		row.Status = status.Infra
		row.Reason = fmt.Sprintf("the model provider failed %d of the attempt's %d calls after the gateway's retries (it would have been %s)", u.UpstreamFailed, u.Requests, was)
	default:
		return
	}
	row.Score = nil
}
