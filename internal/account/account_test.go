package account

import (
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// providerCaused: a verdict the provider caused never stands.
func TestProviderCausedVerdicts(t *testing.T) {
	one := 1.0
	for _, c := range []struct {
		st     status.Attempt
		u      gateway.Usage
		want   status.Attempt
		reason string
	}{
		{status.Failed, gateway.Usage{Requests: 3, UpstreamFailed: 2}, status.Infra, "the model provider failed 2 of the attempt's 3 calls after the gateway's retries (it would have been failed: wrong)"},
		{status.Errored, gateway.Usage{Requests: 1, UpstreamFailed: 1}, status.Infra, "(it would have been errored: agent exited 1"},
		{status.Failed, gateway.Usage{Requests: 4, BudgetRefused: 1, UpstreamFailed: 1}, status.Skipped, "budget spent: the gateway refused 1 of the attempt's model calls"},
		{status.Passed, gateway.Usage{Requests: 3, UpstreamFailed: 1}, status.Passed, ""},
		{status.Failed, gateway.Usage{Requests: 3, Errors: 2}, status.Failed, ""}, // the agent's own bad requests
		{status.Infra, gateway.Usage{UpstreamFailed: 1}, status.Infra, "create sandbox"},
	} {
		row := record.Attempt{Status: c.st, Score: &one, Explanation: "wrong"}
		switch c.st {
		case status.Errored:
			row.Reason, row.Score = "agent exited 1: boom", nil
		case status.Infra:
			row.Reason, row.Score = "create sandbox: hung", nil
		case status.Passed:
			row.Explanation = ""
		}
		providerCaused(&row, c.u)
		if row.Status != c.want || !strings.Contains(row.Reason, c.reason) {
			t.Errorf("%s with %+v: %s %q, want %s %q", c.st, c.u, row.Status, row.Reason, c.want, c.reason)
		}
		if c.want != c.st && row.Score != nil {
			t.Errorf("%s with %+v: kept its score", c.st, c.u)
		}
	}
}
