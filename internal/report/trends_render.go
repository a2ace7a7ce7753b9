package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// trendsOf is the trend a report shows: its own (steward report, view),
// else the base's history with this run beside it (the action's baseline).
func trendsOf(r *Report) *Trends {
	if r.Trends != nil {
		return r.Trends
	}
	if r.Comparison != nil && r.Comparison.History != nil {
		return r.Comparison.History
	}
	return nil
}

// trendMaxTasks bounds the lines of the job summary's trend chart: the tasks
// whose pass rate moved most.
const trendMaxTasks = 8

func trendPct(p *TrendPoint) (float64, bool) {
	if p == nil || p.Score == nil {
		return 0, false
	}
	return math.Round(p.Score.Mean*1000) / 10, true
}

// trendTasks picks at most n tasks of t, those whose pass rate moved most
// (ties: trend order), and returns their indices in trend order.
func trendTasks(t *Trends, n int) []int {
	type mv struct {
		i      int
		spread float64
	}
	var ms []mv
	for i, tt := range t.Tasks {
		lo, hi, any := 101.0, -1.0, false
		for _, p := range tt.Points {
			if v, ok := trendPct(p); ok {
				lo, hi, any = math.Min(lo, v), math.Max(hi, v), true
			}
		}
		if any {
			ms = append(ms, mv{i, hi - lo})
		}
	}
	sort.SliceStable(ms, func(a, b int) bool { return ms[a].spread > ms[b].spread })
	if len(ms) > n {
		ms = ms[:n]
	}
	out := make([]int, len(ms))
	for k, m := range ms {
		out[k] = m.i
	}
	sort.Ints(out)
	return out
}

// trendsMarkdown is the job summary's trend: a Mermaid xychart of each
// task's pass rate over the runs (the base's recent history, then this
// run), the legend outside the code block (task names are eval output),
// and the numbers in a folded table.
func trendsMarkdown(t *Trends) string {
	if t == nil || len(t.Runs) < 2 {
		return ""
	}
	idx := trendTasks(t, trendMaxTasks)
	if len(idx) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Trend\n\n")
	labels := make([]string, len(t.Runs))
	for i, r := range t.Runs {
		labels[i] = strconv.Quote(MD(r.Label, 20))
	}
	b.WriteString("```mermaid\nxychart-beta\n")
	b.WriteString("    title \"Pass rate per task (%), oldest run first\"\n")
	fmt.Fprintf(&b, "    x-axis [%s]\n", strings.Join(labels, ", "))
	b.WriteString("    y-axis \"pass rate %\" 0 --> 100\n")
	for _, i := range idx {
		vals := make([]string, len(t.Runs))
		last := ""
		for k, p := range t.Tasks[i].Points {
			if v, ok := trendPct(p); ok {
				last = strconv.FormatFloat(v, 'f', -1, 64)
			}
			if last == "" {
				// Mermaid draws no gaps: a run before the task's first is drawn at its first value.
				for _, q := range t.Tasks[i].Points[k:] {
					if v, ok := trendPct(q); ok {
						last = strconv.FormatFloat(v, 'f', -1, 64)
						break
					}
				}
			}
			vals[k] = last
		}
		fmt.Fprintf(&b, "    line [%s]\n", strings.Join(vals, ", "))
	}
	b.WriteString("```\n\n")
	var legend []string
	for k, i := range idx {
		legend = append(legend, fmt.Sprintf("%d. %s", k+1, MD(t.Tasks[i].Task, 100)))
	}
	note := ""
	if len(idx) < len(t.Tasks) {
		note = fmt.Sprintf(" (the %d tasks whose pass rate moved most of %d)", len(idx), len(t.Tasks))
	}
	b.WriteString("Lines, in drawing order" + note + ": " + strings.Join(legend, " · ") + "\n\n")
	fmt.Fprintf(&b, "<details><summary>Trend over %d runs: pass rate, spend, mean attempt time</summary>\n\n", len(t.Runs))
	b.WriteString("| task |")
	for _, r := range t.Runs {
		fmt.Fprintf(&b, " %s |", MD(r.Label, 20))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(t.Runs)) + "\n")
	for _, tt := range t.Tasks {
		fmt.Fprintf(&b, "| %s |", MD(tt.Task, 100))
		for _, p := range tt.Points {
			fmt.Fprintf(&b, " %s |", trendCell(p))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n</details>\n\n")
	return b.String()
}

func trendCell(p *TrendPoint) string {
	if p == nil {
		return "–"
	}
	s := "–"
	if p.Score != nil {
		s = fmt.Sprintf("%.0f%% (%.0f–%.0f)", p.Score.Mean*100, p.Score.Interval.Lo*100, p.Score.Interval.Hi*100)
	}
	if p.Ran > 0 {
		s += fmt.Sprintf(" · $%.4f · %s", p.USD, formatDuration(secondsDur(p.Seconds)))
	} else if p.Attempts > 0 {
		s += " · carried"
	}
	return s
}

// TrendsTerminal prints the trend as a plain table: a row per task and run.
func TrendsTerminal(w io.Writer, t *Trends) error {
	if len(t.Runs) == 0 {
		_, err := fmt.Fprintln(w, "no finished runs of this eval set in the record")
		return err
	}
	fmt.Fprintf(w, "%d runs of %s, oldest first\n", len(t.Runs), Plain(t.EvalSet, 200))
	for _, tt := range t.Tasks {
		fmt.Fprintf(w, "\n%s\n", Plain(tt.Task, 100))
		fmt.Fprintf(w, "  %-24s %-20s %-18s %10s %10s %10s\n", "run", "started", "pass rate (95% CI)", "spend", "tokens", "mean time")
		for k, p := range tt.Points {
			r := t.Runs[k]
			if p == nil {
				continue
			}
			rate := "–"
			if p.Score != nil {
				rate = fmt.Sprintf("%.1f%% (%.0f–%.0f)", p.Score.Mean*100, p.Score.Interval.Lo*100, p.Score.Interval.Hi*100)
			}
			mean := "carried"
			if p.Ran > 0 {
				mean = formatDuration(secondsDur(p.Seconds))
			}
			fmt.Fprintf(w, "  %-24s %-20s %-18s %10s %10s %10s\n", Plain(r.ID, 24), r.Started.UTC().Format("2006-01-02 15:04"), rate,
				fmt.Sprintf("$%.4f", p.USD), strconv.FormatInt(p.Tokens, 10), mean)
		}
	}
	return nil
}

// WriteTrendsJSON writes the trend as indented JSON.
func WriteTrendsJSON(w io.Writer, t *Trends) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

// htmlTrendChart is one small chart of the HTML report's trend section.
type htmlTrendChart struct {
	ID, Title              string
	Width, Height          int
	Left, Right, Top, Base float64
	Series                 []htmlTrendSeries
	YTicks, XTicks         []htmlTick
}

type htmlTrendSeries struct {
	Name, Class string
	Points      string
	Band        string // the interval as a polygon ("" = none)
	Dots        []htmlDot
}

type htmlDot struct {
	X, Y  float64
	Title string
}

// trendCharts draws the trend as four small charts (pass rate with its
// interval as a band, spend, tokens, mean attempt time), a line per task.
func trendCharts(t *Trends) []htmlTrendChart {
	if t == nil || len(t.Runs) < 2 || len(t.Tasks) == 0 {
		return nil
	}
	type metric struct {
		id, title string
		val       func(*TrendPoint) (float64, bool)
		fmt       func(float64) string
	}
	ms := []metric{
		{"trend-rate", "pass rate (95% CI)", func(p *TrendPoint) (float64, bool) {
			if p == nil || p.Score == nil {
				return 0, false
			}
			return p.Score.Mean * 100, true
		}, func(v float64) string { return fmt.Sprintf("%.0f%%", v) }},
		{"trend-spend", "spend", func(p *TrendPoint) (float64, bool) { return vOr(p, func(p *TrendPoint) float64 { return p.USD }) },
			func(v float64) string { return fmt.Sprintf("$%.4f", v) }},
		{"trend-tokens", "tokens", func(p *TrendPoint) (float64, bool) {
			return vOr(p, func(p *TrendPoint) float64 { return float64(p.Tokens) })
		}, func(v float64) string { return formatCount(int64(v)) }},
		{"trend-time", "mean attempt time", func(p *TrendPoint) (float64, bool) {
			if p == nil || p.Ran == 0 {
				return 0, false
			}
			return p.Seconds, true
		}, func(v float64) string {
			if v == 0 {
				return "0s"
			}
			return formatDuration(secondsDur(v))
		}},
	}
	n := len(t.Runs)
	var out []htmlTrendChart
	for _, m := range ms {
		ch := htmlTrendChart{ID: m.id, Title: m.title, Width: 380, Height: 170, Left: 52, Right: 340, Top: 10, Base: 140}
		top := 0.0
		for _, tt := range t.Tasks {
			for _, p := range tt.Points {
				if v, ok := m.val(p); ok {
					top = math.Max(top, v)
				}
			}
		}
		if m.id == "trend-rate" {
			top = 100
		} else if top <= 0 {
			top = 1
		} else {
			top *= 1.1
		}
		sx := func(k int) float64 { return ch.Left + float64(k)/float64(n-1)*(ch.Right-ch.Left) }
		sy := func(v float64) float64 { return ch.Base - v/top*(ch.Base-ch.Top) }
		for ti, tt := range t.Tasks {
			s := htmlTrendSeries{Name: tt.Task, Class: fmt.Sprintf("s%d", ti%8)}
			var pts, upper, lower []string
			for k, p := range tt.Points {
				v, ok := m.val(p)
				if !ok {
					continue
				}
				x, y := sx(k), sy(v)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
				title := tt.Task + " · " + t.Runs[k].Label + " · " + m.fmt(v)
				if m.id == "trend-rate" {
					lo, hi := p.Score.Interval.Lo*100, p.Score.Interval.Hi*100
					upper = append(upper, fmt.Sprintf("%.1f,%.1f", x, sy(hi)))
					lower = append([]string{fmt.Sprintf("%.1f,%.1f", x, sy(lo))}, lower...)
					title += fmt.Sprintf(" (%.0f–%.0f%%)", lo, hi)
				}
				s.Dots = append(s.Dots, htmlDot{X: x, Y: y, Title: title})
			}
			if len(pts) == 0 {
				continue
			}
			s.Points = strings.Join(pts, " ")
			if len(upper) > 1 {
				s.Band = strings.Join(append(upper, lower...), " ")
			}
			ch.Series = append(ch.Series, s)
		}
		for k := 0; k <= 2; k++ {
			v := top * float64(k) / 2
			ch.YTicks = append(ch.YTicks, htmlTick{Pos: sy(v), Label: m.fmt(v)})
		}
		step := max(1, (n+4)/5)
		for k := 0; k < n; k += step {
			ch.XTicks = append(ch.XTicks, htmlTick{Pos: sx(k), Label: t.Runs[k].Label})
		}
		if (n-1)%step != 0 {
			ch.XTicks = append(ch.XTicks, htmlTick{Pos: sx(n - 1), Label: t.Runs[n-1].Label})
		}
		out = append(out, ch)
	}
	return out
}

func vOr(p *TrendPoint, f func(*TrendPoint) float64) (float64, bool) {
	if p == nil || p.Ran == 0 {
		return 0, false
	}
	return f(p), true
}

func secondsDur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
