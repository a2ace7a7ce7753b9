package report

import (
	"fmt"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// Per-attempt limits and deadlines in the reports (issue 30 items 3, 4):
// an attempt that reached a limit or ran out of agent time keeps its
// verdict (as on_limit judged it) and says so beside it in every report;
// the summary shows "pass within budget" beside the pass rate.

// fillLimits copies the limit an attempt reached and its timeout.
func fillLimits(row *AttemptRow, a record.Attempt) {
	row.Limit, row.TimedOut = a.Limit, a.TimedOut
}

// limited says whether the attempt reached a limit or its deadline.
func (a AttemptRow) limited() bool { return a.Limit != "" || a.TimedOut }

// limitNote is what every report shows beside a limited attempt's verdict.
func limitNote(a AttemptRow) string {
	switch {
	case a.TimedOut:
		return "timed out (limit: agent_time): stopped at its deadline and judged on what it left"
	case a.Limit != "":
		return "limit: " + a.Limit
	}
	return ""
}

// WithinBudget is the pass rate over attempts that stayed within their
// limits and deadline: passes that hit no limit ÷ judged attempts (the
// pass rate's denominator). Present when some attempt was limited.
type WithinBudget struct {
	Passed  int     `json:"passed"`
	Judged  int     `json:"judged"`
	Limited int     `json:"limited"` // attempts that reached a limit or timed out
	Rate    float64 `json:"rate"`
}

// withinBudget is r's WithinBudget over its attempts (nil: none limited).
func withinBudget(rows []AttemptRow) *WithinBudget {
	var w WithinBudget
	for _, a := range rows {
		if a.limited() && a.Status != status.Skipped {
			w.Limited++
		}
		switch a.Status {
		case status.Passed:
			w.Judged++
			if !a.limited() {
				w.Passed++
			}
		case status.Failed, status.Errored, status.Infra:
			w.Judged++
		}
	}
	if w.Limited == 0 {
		return nil
	}
	if w.Judged > 0 {
		w.Rate = float64(w.Passed) / float64(w.Judged)
	}
	return &w
}

// withinBudgetLine is the summary's line ("" when nothing was limited).
func withinBudgetLine(r *Report) string {
	w := r.PassWithinBudget
	if w == nil {
		return ""
	}
	rate := "–"
	if w.Judged > 0 {
		rate = fmt.Sprintf("%.1f%%", 100*w.Rate)
	}
	s := fmt.Sprintf("pass within budget: %s (%d of %d judged attempts passed without reaching a limit or their deadline; %d reached one)", rate, w.Passed, w.Judged, w.Limited)
	if r.Score != nil {
		s = fmt.Sprintf("pass rate %s · %s", formatScoreRate(r.Score), s)
	}
	return s
}

var _ = stats.Rate{}
