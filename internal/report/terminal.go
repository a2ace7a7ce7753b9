package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// TerminalOptions tunes Terminal.
type TerminalOptions struct {
	// Color adds ANSI colour to statuses. The caller decides (a TTY, and
	// NO_COLOR unset); renderers never look at the environment.
	Color bool
	// ReasonWidth caps the reason column in runes (default 60).
	ReasonWidth int
	// NoPlan leaves the PLAN line out (the live panel already printed it).
	NoPlan bool
}

// PlanLine boxes the PLAN line (L1), e.g.
// "│ 45 attempts · 9 evals × 5 configs · concurrency 19 (from flag) · slow ≤1 │".
func PlanLine(plan string) string {
	return "│ " + Plain(plan, 0) + " │"
}

// CountsText is the counts line without its box:
// "45 total · 6 reused · 19 running · 12 queued · 6 passed · 2 failed · 0 errored · 0 skipped".
// Infrastructure errors and interrupted attempts are appended only when there
// are any, so the everyday line reads exactly as L1.
func CountsText(c Counts) string {
	parts := []string{
		strconv.Itoa(c.Total) + " total",
		strconv.Itoa(c.Reused) + " reused",
		strconv.Itoa(c.Running) + " running",
	}
	if c.Starting > 0 {
		// Admitted attempts whose sandbox is still being made, apart from running.
		parts = append(parts, strconv.Itoa(c.Starting)+" starting")
	}
	parts = append(parts,
		strconv.Itoa(c.Queued)+" queued",
		strconv.Itoa(c.Passed)+" passed",
		strconv.Itoa(c.Failed)+" failed",
		strconv.Itoa(c.Errored)+" errored",
	)
	if c.Infra > 0 {
		parts = append(parts, strconv.Itoa(c.Infra)+" infra")
	}
	parts = append(parts, strconv.Itoa(c.Skipped)+" skipped")
	if c.Interrupted > 0 {
		parts = append(parts, strconv.Itoa(c.Interrupted)+" interrupted")
	}
	return strings.Join(parts, " · ")
}

// CountsLine boxes the counts line (L1):
// "│ 45 total · 6 reused · 19 running · 12 queued · 6 passed · 2 failed · 0 errored · 0 skipped │".
func CountsLine(c Counts) string {
	return "│ " + CountsText(c) + " │"
}

// ANSI colours for statuses.
const (
	ansiReset  = "\x1b[0m"
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiGrey   = "\x1b[90m"
	ansiBold   = "\x1b[1m"
)

func statusColour(st status.Attempt) string {
	switch st {
	case status.Passed:
		return ansiGreen
	case status.Failed:
		return ansiRed
	case status.Errored, status.Infra, status.Interrupted:
		return ansiYellow
	default:
		return ansiGrey
	}
}

// Terminal writes the PLAN and counts lines, the results table in discovery
// order (task, sample, attempt, status, score, duration, tokens, reason), and
// the pass rate per task and overall.
func Terminal(w io.Writer, r *Report, opts TerminalOptions) error {
	if opts.ReasonWidth <= 0 {
		opts.ReasonWidth = 60
	}
	var b strings.Builder
	if r.Title != "" {
		b.WriteString(Plain(r.Title, 0) + "\n")
	}
	if r.Partial {
		msg := "PARTIAL: the run was cancelled"
		if r.Crashed != "" {
			msg = "CRASHED: " + Plain(r.Crashed, 200)
		}
		if len(r.Left) > 0 {
			msg += "; left undone: " + Plain(strings.Join(r.Left, ", "), 200)
		}
		if len(r.Unpublished) > 0 {
			msg += fmt.Sprintf("; %d planned attempts never published: %s", len(r.Unpublished), Plain(strings.Join(r.Unpublished, ", "), 400))
		}
		if opts.Color {
			msg = ansiYellow + msg + ansiReset
		}
		b.WriteString(msg + "\n")
	}
	if r.Plan != "" && !opts.NoPlan {
		b.WriteString(PlanLine(r.Plan) + "\n")
	}
	b.WriteString(CountsLine(r.Counts) + "\n")
	if r.Hold != "" {
		b.WriteString("ramp held: " + Plain(r.Hold, 200) + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write terminal report: %w", err)
	}

	if len(r.Attempts) > 0 {
		t := newTable(w)
		t.Header("task", "sample", "attempt", "status", "score", "duration", "tokens", "reason")
		for _, a := range r.Attempts {
			st := string(a.Status)
			if a.Carried {
				st += " (reused)"
			}
			if opts.Color {
				st = statusColour(a.Status) + st + ansiReset
			}
			if err := t.Append([]string{
				Plain(a.Task, 40), Plain(a.Sample, 40), strconv.Itoa(a.Attempt), st,
				formatScore(a.Score), formatDuration(a.Duration),
				formatTokens(a.InputTokens, a.OutputTokens), Plain(rowReason(a), opts.ReasonWidth),
			}); err != nil {
				return fmt.Errorf("append result row: %w", err)
			}
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("render results table: %w", err)
		}
	}

	// Infrastructure errors are kept apart from the task's own errors; the
	// column shows only when a run had any, so everyday tables stay as they were.
	infra := r.Counts.Infra > 0
	row := func(name string, c Counts, reducer string, rate *stats.Rate) []string {
		cells := []string{name, strconv.Itoa(c.Passed), strconv.Itoa(c.Failed), strconv.Itoa(c.Errored + c.Interrupted)}
		if infra {
			cells = append(cells, strconv.Itoa(c.Infra))
		} else {
			cells[3] = strconv.Itoa(c.Errored + c.Infra + c.Interrupted)
		}
		return append(cells, strconv.Itoa(c.Skipped), reducer, formatScoreRate(rate))
	}
	t := newTable(w)
	if infra {
		t.Header("task", "passed", "failed", "errored", "infra", "skipped", "reducer", "pass rate (95% CI)")
	} else {
		t.Header("task", "passed", "failed", "errored", "skipped", "reducer", "pass rate (95% CI)")
	}
	for _, tr := range r.Tasks {
		if err := t.Append(row(Plain(tr.Name, 40), tr.Counts, Plain(reducerName(tr.Reducer), 30), tr.Score)); err != nil {
			return fmt.Errorf("append task row: %w", err)
		}
	}
	overall := row("overall", r.Counts, "", r.Score)
	if opts.Color {
		for i := range overall {
			overall[i] = ansiBold + overall[i] + ansiReset
		}
	}
	if err := t.Append(overall); err != nil {
		return fmt.Errorf("append overall row: %w", err)
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render pass-rate table: %w", err)
	}
	if line := withinBudgetLine(r); line != "" {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return fmt.Errorf("write pass within budget: %w", err)
		}
	}
	if r.Spend.USD > 0 || r.Spend.InputTokens > 0 || r.Spend.OutputTokens > 0 || r.Spend.SavedUSD > 0 || r.Spend.SavedInputTokens > 0 {
		if _, err := io.WriteString(w, "spend: "+formatSpend(r.Spend)+"\n"); err != nil {
			return fmt.Errorf("write spend: %w", err)
		}
		if pp := costPerPassLine(r); pp != "" {
			if _, err := io.WriteString(w, Plain(pp, 2000)+"\n"); err != nil {
				return fmt.Errorf("write cost per pass: %w", err)
			}
		}
	}
	if n, usd := r.EarlyExitSaving(); n > 0 {
		line := fmt.Sprintf("saved by early exit: %d attempts not run", n)
		if usd > 0 {
			line += " (about " + formatUSD(usd) + " at their samples' mean cost)"
		}
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return fmt.Errorf("write early exit saving: %w", err)
		}
	}
	if r.Comparison != nil {
		if err := ComparisonTerminal(w, r.Comparison); err != nil {
			return fmt.Errorf("write comparison: %w", err)
		}
	}
	return nil
}

func newTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
	)
}

// rowReason is the one reason a row shows: the recorded reason for errored,
// skipped and infra rows, else the scorer's explanation for failures.
func rowReason(a AttemptRow) string {
	return withTries(a, baseReason(a))
}

func baseReason(a AttemptRow) string {
	if a.Reason != "" {
		return a.Reason
	}
	if a.Status == status.Failed || a.Status == status.Errored {
		return a.Explanation
	}
	return ""
}

func formatScore(s *float64) string {
	if s == nil {
		return "–"
	}
	return strconv.FormatFloat(*s, 'f', 2, 64)
}

func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	default:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
}

func formatCount(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	default:
		return strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64) + "M"
	}
}

func formatTokens(in, out int64) string {
	if in == 0 && out == 0 {
		return "–"
	}
	return formatCount(in) + " in / " + formatCount(out) + " out"
}

func formatUSD(v float64) string {
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}

func formatSpend(s Spend) string {
	out := formatUSD(s.USD)
	if s.GradingUSD > 0 || s.GradingRequests > 0 {
		out += " (agent " + formatUSD(s.USD-s.GradingUSD) + " · grading " + formatUSD(s.GradingUSD) + ")"
	}
	if s.BudgetUSD > 0 {
		out += " of " + formatUSD(s.BudgetUSD) + " budget"
		if over := s.USD - s.BudgetUSD; over > 0 {
			out += " (over by " + formatUSD(over) + ": requests in flight when it ran out)"
		}
		if s.BudgetStopped {
			out += ", which stopped the run"
		}
	}
	out += " · " + formatCount(s.InputTokens) + " input tokens · " + formatCount(s.OutputTokens) +
		" output tokens · " + strconv.FormatInt(s.Requests, 10) + " requests"
	if s.SavedUSD > 0 || s.SavedInputTokens > 0 || s.SavedOutputTokens > 0 {
		out += " · saved by carry: " + formatUSD(s.SavedUSD) + " (" + formatCount(s.SavedInputTokens) + " input, " +
			formatCount(s.SavedOutputTokens) + " output tokens)"
	}
	return out
}
