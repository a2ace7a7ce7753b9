package report

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

// CommentLimit is GitHub's limit on an issue comment body, in characters.
const CommentLimit = 65536

// CommentOptions tunes Comment.
type CommentOptions struct {
	// SummaryURL links to the full report (the job summary of the run).
	SummaryURL string
	// MaxChars bounds the body (default CommentLimit). Counted in UTF-16 code
	// units, which is never fewer than GitHub's character count.
	MaxChars int
	// ReasonWidth caps reasons in runes (default 200).
	ReasonWidth int
	// Notes are extra lines written by Steward itself (never eval output).
	Notes []string
}

// CommentMarker is the hidden first line that identifies the sticky comment
// of one eval set and report title: edited in place on every run.
func CommentMarker(r *Report) string {
	return "<!-- steward:report key=" + markerKey(r.EvalSet) + "/" + markerKey(r.Title) + " -->"
}

// Comment renders the sticky PR comment: the marker, the summary, the
// per-task table and the failed list, cut with a pointer to the job summary
// so that it stays within opts.MaxChars.
func Comment(r *Report, opts CommentOptions) string {
	if opts.MaxChars <= 0 {
		opts.MaxChars = CommentLimit
	}
	if opts.ReasonWidth <= 0 {
		opts.ReasonWidth = 200
	}
	failed := problemRows(r)
	// Find the largest number of failed rows that fits, by bisection: the
	// length grows with the number of rows.
	lo, hi := 0, len(failed)
	best := comment(r, opts, failed, 0)
	if full := comment(r, opts, failed, hi); textLen(full) <= opts.MaxChars {
		return full
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if c := comment(r, opts, failed, mid); textLen(c) <= opts.MaxChars {
			lo, best = mid, c
		} else {
			hi = mid - 1
		}
	}
	if textLen(best) > opts.MaxChars {
		// Even the bare summary is too long (a tiny MaxChars): keep the marker
		// and the pointer.
		best = CommentMarker(r) + "\n" + pointer(opts.SummaryURL, "The report is too long for a comment") + "\n"
		if textLen(best) > opts.MaxChars {
			best = CommentMarker(r) + "\n"
		}
	}
	return best
}

func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func pointer(url, lead string) string {
	if url == "" {
		return "_" + lead + ": see the job summary of this workflow run._"
	}
	return "_" + lead + ": see the [job summary](" + safeURL(url) + ")._"
}

// safeURL keeps a link target from breaking out of its Markdown link.
func safeURL(u string) string {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return ""
	}
	var b strings.Builder
	for _, c := range []byte(u) {
		switch {
		case c <= ' ' || c >= 0x7f || c == '(' || c == ')' || c == '[' || c == ']' || c == '<' || c == '>' || c == '"' || c == '\'' || c == '`' || c == '\\':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func statusIcon(c Counts) string {
	switch {
	case c.Failed+c.Errored+c.Infra+c.Interrupted > 0:
		return "❌"
	case c.Passed > 0:
		return "✅"
	default:
		return "⚪"
	}
}

func comment(r *Report, opts CommentOptions, failed []AttemptRow, n int) string {
	var b strings.Builder
	b.WriteString(CommentMarker(r) + "\n")
	fmt.Fprintf(&b, "### %s %s\n\n", statusIcon(r.Counts), heading(r))
	if r.Comparison != nil {
		// The verdict leads: one sentence a reviewer can act on.
		fmt.Fprintf(&b, "%s · %s\n\n", verdictBadge[r.Comparison.Verdict], MD(r.Comparison.Summary, 2000))
	}
	if r.Partial {
		b.WriteString(partialBanner(r))
	}
	c := r.Counts
	fmt.Fprintf(&b, "**%d passed** · **%d failed** · %d errored", c.Passed, c.Failed, c.Errored)
	if c.Infra > 0 {
		fmt.Fprintf(&b, " · %d infra", c.Infra)
	}
	fmt.Fprintf(&b, " · %d skipped", c.Skipped)
	if c.Interrupted > 0 {
		fmt.Fprintf(&b, " · %d interrupted", c.Interrupted)
	}
	saved := ""
	if r.Spend.SavedUSD > 0 {
		saved = " (" + formatUSD(r.Spend.SavedUSD) + " saved by carry)"
	}
	if n, usd := r.EarlyExitSaving(); n > 0 {
		saved += fmt.Sprintf(" (%d attempts saved by early exit", n)
		if usd > 0 {
			saved += ", about " + formatUSD(usd)
		}
		saved += ")"
	}
	perPass := ""
	if r.CostPerPass != nil {
		perPass = " · " + formatPerPass(r.CostPerPass)
	}
	spend := formatUSD(r.Spend.USD)
	if r.Spend.GradingUSD > 0 || r.Spend.GradingRequests > 0 {
		spend += " (agent " + formatUSD(r.Spend.USD-r.Spend.GradingUSD) + " · grading " + formatUSD(r.Spend.GradingUSD) + ")"
	}
	fmt.Fprintf(&b, " · %d reused of %d · pass rate %s · spend %s%s%s\n\n", c.Reused, c.Total, formatScoreRate(r.Score), MD(spend, 0), MD(saved, 0), MD(perPass, 0))
	if r.EvalSet != "" || r.Shard != "" {
		b.WriteString("Eval set: " + MD(r.EvalSet, 200))
		if r.Shard != "" {
			b.WriteString(" · shard " + MD(r.Shard, 20))
		}
		b.WriteString("\n\n")
	}
	if r.Hold != "" {
		fmt.Fprintf(&b, "**Ramp held:** %s\n\n", MD(r.Hold, opts.ReasonWidth))
	}
	if r.Comparison != nil {
		b.WriteString(comparisonMarkdown(r.Comparison, "", min(n, 10), opts.ReasonWidth, false))
	} else if len(r.Tasks) > 0 {
		b.WriteString(taskTable(r, false))
		b.WriteString("\n")
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "<details open><summary>Failed and errored (%d)</summary>\n\n", len(failed))
		b.WriteString(problemTable(failed, n, opts.ReasonWidth))
		if n < len(failed) {
			b.WriteString("\n" + pointer(opts.SummaryURL, fmt.Sprintf("%d more not shown", len(failed)-n)) + "\n")
		}
		b.WriteString("\n</details>\n\n")
	}
	b.WriteString(retriedMarkdown(r, min(n, 10), opts.ReasonWidth))
	for _, note := range opts.Notes {
		b.WriteString(note + "\n\n")
	}
	if opts.SummaryURL != "" {
		b.WriteString("[Full report](" + safeURL(opts.SummaryURL) + ")\n")
	}
	if f := footer(r); f != "" {
		b.WriteString("\n" + f)
	}
	return b.String()
}
