package report

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// StepSummaryLimit is GitHub's limit on one step's job summary (1 MiB).
const StepSummaryLimit = 1 << 20

// MarkdownOptions tunes Markdown.
type MarkdownOptions struct {
	// MaxBytes bounds the output (default: StepSummaryLimit less 16 KiB of
	// headroom for notes the action appends). Detail tables are cut to fit.
	MaxBytes int
	// ReasonWidth caps reasons in runes (default 300).
	ReasonWidth int
	// MaxChartPoints bounds the x axis of the ramp chart (default 60); the
	// table under it keeps every decision that fits.
	MaxChartPoints int
	// Notes are extra lines (already Markdown, written by Steward itself, never
	// from eval output) appended at the end, e.g. why no PR comment was posted.
	Notes []string
}

// Markdown writes the job summary: counts, pass rate per task, failed and
// errored samples with reasons, spend, and the ramp history as a Mermaid
// xychart with a collapsible table of the same numbers. It stays under
// opts.MaxBytes by cutting the detail tables, saying how many rows were cut.
func Markdown(w io.Writer, r *Report, opts MarkdownOptions) error {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = StepSummaryLimit - 16<<10
	}
	if opts.ReasonWidth <= 0 {
		opts.ReasonWidth = 300
	}
	if opts.MaxChartPoints <= 0 {
		opts.MaxChartPoints = 60
	}
	failed := problemRows(r)
	failCap, rampCap := len(failed), len(r.Ramp)
	var out string
	for {
		out = markdown(r, opts, failed, failCap, rampCap)
		if len(out) <= opts.MaxBytes {
			break
		}
		if failCap == 0 && rampCap == 0 {
			// Only fixed-size parts are left; cut at a line boundary.
			out = cutBytes(out, opts.MaxBytes)
			break
		}
		// Halve whichever detail table is larger.
		if rampCap >= failCap {
			rampCap /= 2
		} else {
			failCap /= 2
		}
	}
	if _, err := io.WriteString(w, out); err != nil {
		return fmt.Errorf("write markdown report: %w", err)
	}
	return nil
}

func cutBytes(s string, n int) string {
	const tail = "\n\n_(summary cut to fit GitHub's size limit)_\n"
	if n <= len(tail) {
		return ""
	}
	s = s[:n-len(tail)]
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s + tail
}

// problemRows are the rows a reader must look at: failed, errored, infra and
// interrupted attempts, in discovery order.
func problemRows(r *Report) []AttemptRow {
	var rows []AttemptRow
	for _, a := range r.Attempts {
		switch a.Status {
		case status.Failed, status.Errored, status.Infra, status.Interrupted:
			rows = append(rows, a)
		}
	}
	return rows
}

func heading(r *Report) string {
	h := "Steward"
	if r.Title != "" {
		h += ": " + MD(r.Title, 200)
	}
	return h
}

func markdown(r *Report, opts MarkdownOptions, failed []AttemptRow, failCap, rampCap int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", heading(r))
	if r.Partial {
		b.WriteString(partialBanner(r))
	}
	if r.EvalSet != "" {
		fmt.Fprintf(&b, "Eval set: %s", MD(r.EvalSet, 200))
		if r.Shard != "" {
			fmt.Fprintf(&b, " · shard %s", MD(r.Shard, 20))
		}
		b.WriteString("\n\n")
	}
	if r.Plan != "" {
		fmt.Fprintf(&b, "Plan: %s\n\n", MD(r.Plan, 300))
	}
	b.WriteString(countsTable(r.Counts, r.Score))
	if line := withinBudgetLine(r); line != "" {
		b.WriteString("\n" + MD(line, 1000) + "\n") // limits.go
	}
	b.WriteString("\n")
	if r.Comparison != nil {
		b.WriteString(comparisonMarkdown(r.Comparison, "### Compared with base\n\n", failCap, opts.ReasonWidth, true))
	}
	b.WriteString(trendsMarkdown(trendsOf(r)))
	if len(r.Tasks) > 0 {
		b.WriteString("### Pass rate per task\n\n")
		b.WriteString(taskTable(r, true))
		b.WriteString("\n")
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "### Failed and errored (%d)\n\n", len(failed))
		b.WriteString(problemTable(failed, failCap, opts.ReasonWidth))
		if failCap < len(failed) {
			fmt.Fprintf(&b, "\n_%d more not shown to keep this summary under GitHub's size limit; the JSON report has them all._\n", len(failed)-failCap)
		}
		b.WriteString("\n")
	}
	b.WriteString(retriedMarkdown(r, failCap, opts.ReasonWidth))
	b.WriteString("### Spend\n\n")
	b.WriteString(MD(formatSpend(r.Spend), 0) + "\n\n")
	if pp := costPerPassLine(r); pp != "" {
		b.WriteString(MD(pp, 0) + "\n\n")
	}
	if r.Hold != "" || len(r.Ramp) > 0 {
		b.WriteString("### Sample ramp\n\n")
		if r.Hold != "" {
			fmt.Fprintf(&b, "**Ramp held:** %s\n\n", MD(r.Hold, opts.ReasonWidth))
		}
		if len(r.Ramp) > 0 {
			b.WriteString(rampChart(r.Ramp, opts.MaxChartPoints))
			b.WriteString(rampTable(r.Ramp, rampCap, opts.ReasonWidth))
		}
	}
	for _, n := range opts.Notes {
		b.WriteString(n + "\n\n")
	}
	b.WriteString(footer(r))
	return b.String()
}

// footer names the steward that rendered the report.
func footer(r *Report) string {
	if r.Version == "" {
		return ""
	}
	if versionRE.MatchString(r.Version) {
		// Steward's own version and commit (version.String): nothing in it
		// is Markdown, and the commit is meant to read as a commit.
		return "<sub>steward " + r.Version + "</sub>\n"
	}
	return "<sub>steward " + MD(r.Version, 80) + "</sub>\n"
}

// versionRE is the shape of version.String: a version and a commit.
var versionRE = regexp.MustCompile(`^v?[0-9A-Za-z.+-]{1,40}( \([0-9a-f]{7,40}\))?$`)

func partialBanner(r *Report) string {
	var b strings.Builder
	b.WriteString("> [!WARNING]\n> **Partial report:** the run was cancelled before it finished")
	if r.Crashed != "" {
		b.Reset()
		fmt.Fprintf(&b, "> [!WARNING]\n> **Partial report:** %s", MD(r.Crashed, 200))
	}
	if len(r.Left) == 0 && len(r.Unpublished) == 0 {
		b.WriteString(".\n\n")
		return b.String()
	}
	const maxLeft = 20
	list := func(items []string) {
		for i, l := range items {
			if i == maxLeft {
				fmt.Fprintf(&b, "> - … and %d more\n", len(items)-maxLeft)
				break
			}
			fmt.Fprintf(&b, "> - %s\n", MD(l, 200))
		}
	}
	if len(r.Left) > 0 {
		b.WriteString(". Left undone:\n")
		list(r.Left)
	} else {
		b.WriteString(".\n")
	}
	if len(r.Unpublished) > 0 {
		fmt.Fprintf(&b, ">\n> Planned but never published (%d):\n", len(r.Unpublished))
		list(r.Unpublished)
	}
	b.WriteString("\n")
	return b.String()
}

func countsTable(c Counts, score *stats.Rate) string {
	return "| total | reused | passed | failed | errored | infra | skipped | interrupted | pass rate (95% CI) |\n" +
		"|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
		fmt.Sprintf("| %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
			c.Total, c.Reused, c.Passed, c.Failed, c.Errored, c.Infra, c.Skipped, c.Interrupted, formatScoreRate(score))
}

func taskTable(r *Report, withSetpoint bool) string {
	var b strings.Builder
	if withSetpoint {
		b.WriteString("| task | passed | failed | errored | skipped | reducer | pass rate (95% CI) | setpoint |\n|---|---:|---:|---:|---:|---|---:|---:|\n")
	} else {
		b.WriteString("| task | passed | failed | errored | skipped | reducer | pass rate (95% CI) |\n|---|---:|---:|---:|---:|---|---:|\n")
	}
	for _, t := range r.Tasks {
		c := t.Counts
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s |", MD(t.Name, 100), c.Passed, c.Failed,
			c.Errored+c.Infra+c.Interrupted, c.Skipped, MD(reducerName(t.Reducer), 30), formatScoreRate(t.Score))
		if withSetpoint {
			sp := "–"
			switch {
			case t.Limit != "":
				sp = MD(t.Limit, 20)
			case t.Setpoint > 0:
				sp = strconv.Itoa(t.Setpoint)
			}
			fmt.Fprintf(&b, " %s |", sp)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func problemTable(rows []AttemptRow, n, reasonWidth int) string {
	var b strings.Builder
	b.WriteString("| task | sample | attempt | status | reason |\n|---|---|---:|---|---|\n")
	for i, a := range rows {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", MD(a.Task, 100), MD(a.Sample, 100), a.Attempt,
			MD(string(a.Status), 20), MD(rowReason(a), reasonWidth))
	}
	return b.String()
}

// rampSeries lines the ramp history up on one time axis: the distinct tend
// times, each task's setpoint at each time (carried forward between its own
// points, 0 before its first), and the connection ceiling.
type rampSeries struct {
	times    []time.Time
	tasks    []string
	setpoint map[string][]int
	ceiling  []int
}

func buildSeries(points []RampPoint) rampSeries {
	s := rampSeries{setpoint: map[string][]int{}}
	seen := map[time.Time]bool{}
	taskSeen := map[string]bool{}
	for _, p := range points {
		if !seen[p.At] {
			seen[p.At] = true
			s.times = append(s.times, p.At)
		}
		if !taskSeen[p.Task] {
			taskSeen[p.Task] = true
			s.tasks = append(s.tasks, p.Task)
		}
	}
	sort.Slice(s.times, func(i, j int) bool { return s.times[i].Before(s.times[j]) })
	index := make(map[time.Time]int, len(s.times))
	for i, t := range s.times {
		index[t] = i
	}
	has := map[string][]bool{}
	for _, task := range s.tasks {
		s.setpoint[task] = make([]int, len(s.times))
		has[task] = make([]bool, len(s.times))
	}
	s.ceiling = make([]int, len(s.times))
	hasCeil := make([]bool, len(s.times))
	for _, p := range points {
		i := index[p.At]
		s.setpoint[p.Task][i] = p.Setpoint
		has[p.Task][i] = true
		if p.Ceiling > s.ceiling[i] || !hasCeil[i] {
			s.ceiling[i] = p.Ceiling
			hasCeil[i] = true
		}
	}
	for _, task := range s.tasks {
		for i := 1; i < len(s.times); i++ {
			if !has[task][i] {
				s.setpoint[task][i] = s.setpoint[task][i-1]
			}
		}
	}
	for i := 1; i < len(s.times); i++ {
		if !hasCeil[i] {
			s.ceiling[i] = s.ceiling[i-1]
		}
	}
	return s
}

// downsample picks at most n indexes of 0..total-1, evenly, always keeping
// the first and the last.
func downsample(total, n int) []int {
	if total <= n || n < 2 {
		idx := make([]int, total)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	idx := make([]int, 0, n)
	for k := 0; k < n; k++ {
		idx = append(idx, k*(total-1)/(n-1))
	}
	return idx
}

func elapsed(d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	d = d.Round(time.Second)
	if d%time.Minute == 0 {
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// rampChart draws setpoints, the connection ceiling and the gateway's
// connection limit as a Mermaid xychart, with the upstream retries of each
// window as bars, so a reader sees whether the provider (limit down,
// retries up) or the sandboxes (setpoints at the budget) held the run.
// Nothing from eval output goes inside the code block: the axis holds
// elapsed times and the lines numbers; the legend (task names) sits
// outside, escaped.
func rampChart(points []RampPoint, maxPoints int) string {
	s := buildSeries(points)
	if len(s.times) == 0 {
		return ""
	}
	idx := downsample(len(s.times), maxPoints)
	start := s.times[0]
	// The gateway's limit and retries are the fleet's: one per tend.
	at := make(map[time.Time]int, len(s.times))
	for i, t := range s.times {
		at[t] = i
	}
	limit, retries := make([]int, len(s.times)), make([]int, len(s.times))
	for _, p := range points {
		i := at[p.At]
		limit[i], retries[i] = max(limit[i], p.Limit), max(retries[i], p.Retries)
	}
	labels := make([]string, len(idx))
	top := 1
	for k, i := range idx {
		labels[k] = strconv.Quote(elapsed(s.times[i].Sub(start)))
		top = max(top, s.ceiling[i], limit[i], retries[i])
		for _, task := range s.tasks {
			if v := s.setpoint[task][i]; v > top {
				top = v
			}
		}
	}
	series := func(vals []int) string {
		out := make([]string, len(idx))
		for k, i := range idx {
			out[k] = strconv.Itoa(vals[i])
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	var b strings.Builder
	b.WriteString("```mermaid\nxychart-beta\n")
	b.WriteString("    title \"Setpoints, connection ceiling and limit, retries per window\"\n")
	fmt.Fprintf(&b, "    x-axis \"elapsed\" [%s]\n", strings.Join(labels, ", "))
	fmt.Fprintf(&b, "    y-axis \"samples / connections\" 0 --> %d\n", top+top/10+1)
	for _, task := range s.tasks {
		fmt.Fprintf(&b, "    line %s\n", series(s.setpoint[task]))
	}
	fmt.Fprintf(&b, "    line %s\n", series(s.ceiling))
	fmt.Fprintf(&b, "    line %s\n", series(limit))
	fmt.Fprintf(&b, "    bar %s\n", series(retries))
	b.WriteString("```\n\n")
	legend := make([]string, 0, len(s.tasks)+1)
	for k, task := range s.tasks {
		legend = append(legend, fmt.Sprintf("%d. setpoint of %s", k+1, MD(task, 100)))
	}
	legend = append(legend, fmt.Sprintf("%d. connection ceiling", len(s.tasks)+1),
		fmt.Sprintf("%d. connection limit (the gateway's, adaptive)", len(s.tasks)+2),
		"bars: upstream retries in the window (429s, and 5xx answers the gateway retried)")
	b.WriteString("Lines, in drawing order: " + strings.Join(legend, " · ") + "\n\n")
	return b.String()
}

// rampTable is the same history as a table, folded away, for readers whose
// viewer does not draw Mermaid.
func rampTable(points []RampPoint, n, reasonWidth int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<details><summary>Ramp history: %d decisions</summary>\n\n", len(points))
	b.WriteString("| elapsed | task | decision | setpoint | ceiling | conn. limit | pushback | retries | errored | saturated | reason |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---|---:|---:|---|---|\n")
	var start time.Time
	for _, p := range points {
		if start.IsZero() || p.At.Before(start) {
			start = p.At
		}
	}
	// Keep the most recent decisions when cutting: they explain where the run ended.
	from := 0
	if n < len(points) {
		from = len(points) - n
		fmt.Fprintf(&b, "| … | _%d earlier decisions not shown to keep this summary under GitHub's size limit_ | | | | | | | | | |\n", from)
	}
	for _, p := range points[from:] {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s | %d | %d | %s | %s |\n",
			elapsed(p.At.Sub(start)), MD(p.Task, 100), MD(p.Decision, 20), p.Setpoint, p.Ceiling, p.Limit,
			yesNo(p.Pushback), p.Retries, p.Errored, yesNo(p.Saturated), MD(p.Reason, reasonWidth))
	}
	b.WriteString("\n</details>\n\n")
	return b.String()
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
