package report

import (
	"fmt"
	"strings"

	"github.com/steward-evals/steward/internal/record"
)

// fillTries copies what the record keeps of an attempt's tries and of a
// failed agent's exit into its row (a row that ran once keeps Tries unset).
func fillTries(row *AttemptRow, a record.Attempt) {
	if a.Tries > 1 {
		row.Tries, row.RetryReasons = a.Tries, a.RetryReasons
	}
	row.AgentExit, row.AgentOutput = a.AgentExit, a.AgentOutput
	fillLimits(row, a) // limits.go
}

// withTries is a row's reason with what every report shows beside it: the
// agent's non-zero exit beside a verdict (issue 30 item 1) and the tries of
// a retried attempt, with why (issue 23 item 2).
func withTries(a AttemptRow, reason string) string {
	var notes []string
	if n := limitNote(a); n != "" && !strings.Contains(reason, n) {
		notes = append(notes, n)
	}
	if a.AgentExit != 0 {
		n := fmt.Sprintf("agent exited %d", a.AgentExit)
		if a.AgentOutput != "" {
			n += ": " + a.AgentOutput
		}
		if !strings.Contains(reason, n) {
			notes = append(notes, n)
		}
	}
	if a.Tries > 1 {
		n := fmt.Sprintf("%d tries", a.Tries)
		if len(a.RetryReasons) > 0 {
			n += " (retried: " + strings.Join(a.RetryReasons, "; ") + ")"
		}
		notes = append(notes, n)
	}
	if len(notes) == 0 {
		return reason
	}
	if reason == "" {
		return strings.Join(notes, " · ")
	}
	return reason + " · " + strings.Join(notes, " · ")
}

// retriedMarkdown lists the attempts that passed or were skipped after a
// retry (the failed and errored ones show their tries in the problem
// table), so that no retried attempt goes unseen: "" when there is none.
func retriedMarkdown(r *Report, n, reasonWidth int) string {
	var rows []AttemptRow
	for _, a := range r.Attempts {
		if a.Tries > 1 && !isProblem(a) {
			rows = append(rows, a)
		}
	}
	if len(rows) == 0 {
		return ""
	}
	// The problem table's cap follows the failures; these get their own.
	n = min(max(n, 20), len(rows))
	return fmt.Sprintf("**Retried after infrastructure errors (%d):**\n\n", len(rows)) + problemTable(rows, n, reasonWidth) + "\n"
}

func isProblem(a AttemptRow) bool {
	return len(problemRows(&Report{Attempts: []AttemptRow{a}})) == 1
}
