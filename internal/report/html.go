package report

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/steward-evals/steward/internal/status"
)

//go:embed assets/report.html.tmpl assets/report.css assets/report.js
var htmlAssets embed.FS

// HTMLOptions shape the HTML report.
type HTMLOptions struct {
	// LiveURL, when set, is polled (relative to the page) by the page while
	// a run is live: when the text it answers changes, the page reloads.
	// `steward view` sets it; a file report leaves it empty.
	LiveURL string
	// Version is the record version the page was rendered from (what
	// LiveURL answered at the time).
	Version string
	// Live says the run was still running when the page was rendered.
	Live bool
	// Nav links the page to the viewer's other pages (steward view).
	Nav []NavLink
}

// htmlRowCut bounds the one-line reason in the attempt table; the full text
// is in the attempt's details.
const htmlRowCut = 200

// htmlRow is one attempt in the table's data (short keys keep 10 000 rows small).
type htmlRow struct {
	Task     string         `json:"t"`
	Sample   string         `json:"s"`
	Attempt  int            `json:"a"`
	Status   status.Attempt `json:"st"`
	Score    *float64       `json:"sc"`
	Carried  int            `json:"c,omitempty"`
	Duration int64          `json:"d"` // milliseconds
	In       int64          `json:"in"`
	Out      int64          `json:"o"`
	Cost     float64        `json:"u"`
	Reason   string         `json:"r,omitempty"`
	Calls    int            `json:"n,omitempty"` // captured model calls
}

// htmlDetail is what one attempt's details panel shows.
type htmlDetail struct {
	Task        string         `json:"task"`
	Sample      string         `json:"sample"`
	Attempt     int            `json:"attempt"`
	Status      status.Attempt `json:"status"`
	Answer      string         `json:"answer,omitempty"`
	Explanation string         `json:"explanation,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	Log         string         `json:"log,omitempty"`
	Source      string         `json:"source,omitempty"`
	Fingerprint string         `json:"fingerprint,omitempty"`
	*AttemptDetails
}

type htmlSeries struct {
	Name   string
	Class  string
	Points string // "x,y x,y …" in SVG units
	Dashed bool
}

type htmlTick struct {
	Pos   float64
	Label string
}

type htmlChart struct {
	Width, Height          int
	Left, Right, Top, Base float64
	Series                 []htmlSeries
	XTicks, YTicks         []htmlTick
}

type htmlTask struct {
	Name    string
	C       Counts
	Rate    string
	Reducer string
	Bar     float64 // 0..100
	// Lo and Width place the 95 % interval on the bar (0..100).
	Lo, Width float64
	Limit     string
}

type htmlCount struct {
	Label string
	N     int
	Class string
}

type htmlDetailBlock struct {
	ID   string
	JSON template.JS
}

type htmlPage struct {
	R       *Report
	CSP     string
	CSS     template.CSS
	JS      template.JS
	Rows    template.JS
	Details []htmlDetailBlock
	Counts  []htmlCount
	Rate    string
	// Within is the pass within budget ("" when no attempt was limited).
	Within   string
	Tasks    []htmlTask
	Chart    *htmlChart
	Spend    string
	Started  string
	Duration string
	Opts     HTMLOptions
	Statuses []status.Attempt
	// Trends are the trend's small charts and TrendNames its legend.
	Trends     []htmlTrendChart
	TrendNames []htmlTrendSeries
	TrendRuns  int
	// Pairs are the side by side of a comparison (changed samples first,
	// at most htmlPairs); PairsSame how many unchanged ones were left out.
	Pairs     []SamplePair
	PairsLeft int
}

// HTML writes the report as one self-contained HTML page: no network, no
// external file, inline CSS, JS and SVG; it works from file://. Every
// value taken from eval output is escaped by html/template, or travels as
// JSON (with <, > and & escaped, so `</script>` and `<!--` cannot end its
// block) that the page's script puts into the document as text only.
// Attempt details are rendered on demand, so 10 000 attempts stay usable.
func HTML(w io.Writer, r *Report, opts HTMLOptions) error {
	css, err := htmlAssets.ReadFile("assets/report.css")
	if err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	js, err := htmlAssets.ReadFile("assets/report.js")
	if err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	tmpl, err := template.New("report.html.tmpl").Funcs(template.FuncMap{
		"c": func(s string) string { return clean(s, " ") },
		// t keeps line breaks (inside <pre>).
		"t": func(s string) string { return clean(s, "\n") },
		"score": func(a AttemptRow) string {
			if a.Score == nil {
				return ""
			}
			return fmt.Sprintf("%.2f", *a.Score)
		},
	}).ParseFS(htmlAssets, "assets/report.html.tmpl")
	if err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	p := htmlPage{R: r, CSS: template.CSS(css), JS: template.JS(js), Opts: opts}
	connect := "'none'"
	if opts.LiveURL != "" {
		connect = "'self'"
	}
	// Only the page's own script and style run: an injected script or
	// event handler would be refused even if escaping failed.
	p.CSP = fmt.Sprintf("default-src 'none'; script-src '%s'; style-src '%s'; img-src data:; connect-src %s; base-uri 'none'; form-action 'none'",
		cspHash(js), cspHash(css), connect)

	rows := make([]htmlRow, len(r.Attempts))
	for i, a := range r.Attempts {
		row := htmlRow{Task: a.Task, Sample: a.Sample, Attempt: a.Attempt, Status: a.Status, Score: a.Score,
			Duration: a.Duration.Milliseconds(), In: a.InputTokens, Out: a.OutputTokens, Cost: a.TotalUSD(),
			Reason: truncate(clean(rowReason(a), " "), htmlRowCut)}
		if a.Carried {
			row.Carried = 1
		}
		if a.Details != nil && a.Details.Transcript != nil {
			row.Calls = len(a.Details.Transcript.Calls)
		}
		rows[i] = row
		d := htmlDetail{Task: a.Task, Sample: a.Sample, Attempt: a.Attempt, Status: a.Status, Answer: a.Answer,
			Explanation: a.Explanation, Reason: a.Reason, Log: a.Log, Source: a.Source, Fingerprint: a.Fingerprint,
			AttemptDetails: a.Details}
		b, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("render html: attempt %d: %w", i, err)
		}
		p.Details = append(p.Details, htmlDetailBlock{ID: fmt.Sprintf("d-%d", i), JSON: template.JS(jsonInvisible(b))})
	}
	rb, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	p.Rows = template.JS(jsonInvisible(rb))

	c := r.Counts
	p.Counts = []htmlCount{{"total", c.Total, ""}, {"reused", c.Reused, ""}, {"passed", c.Passed, "passed"},
		{"failed", c.Failed, "failed"}, {"errored", c.Errored, "errored"}}
	if c.Infra > 0 {
		p.Counts = append(p.Counts, htmlCount{"infra", c.Infra, "infra"})
	}
	p.Counts = append(p.Counts, htmlCount{"skipped", c.Skipped, "skipped"})
	if c.Interrupted > 0 {
		p.Counts = append(p.Counts, htmlCount{"interrupted", c.Interrupted, "interrupted"})
	}
	if c.Running > 0 || c.Queued > 0 {
		p.Counts = append(p.Counts, htmlCount{"running", c.Running, ""}, htmlCount{"queued", c.Queued, ""})
	}
	p.Rate = formatScoreRate(r.Score)
	if w := r.PassWithinBudget; w != nil {
		p.Within = fmt.Sprintf("%d of %d", w.Passed, w.Judged)
		if w.Judged > 0 {
			p.Within = fmt.Sprintf("%.1f%% (%s)", 100*w.Rate, p.Within)
		}
	}
	for _, t := range r.Tasks {
		limit := t.Limit
		if limit == "" && t.Setpoint > 0 {
			limit = fmt.Sprint(t.Setpoint)
		}
		ht := htmlTask{Name: t.Name, C: t.Counts, Rate: formatScoreRate(t.Score), Reducer: reducerName(t.Reducer), Limit: limit}
		if t.Score != nil {
			ht.Bar = math.Round(t.Score.Mean*1000) / 10
			ht.Lo = math.Round(t.Score.Interval.Lo*1000) / 10
			ht.Width = math.Round((t.Score.Interval.Hi-t.Score.Interval.Lo)*1000) / 10
		}
		p.Tasks = append(p.Tasks, ht)
	}
	p.Chart = rampSVG(r.Ramp)
	p.Spend = formatSpend(r.Spend)
	if pp := costPerPassLine(r); pp != "" {
		p.Spend += " · " + pp
	}
	if !r.Started.IsZero() {
		p.Started = r.Started.UTC().Format("2006-01-02 15:04:05 UTC")
		if !r.Finished.IsZero() && r.Finished.After(r.Started) {
			p.Duration = formatDuration(r.Finished.Sub(r.Started))
		}
	}
	p.Statuses = status.Attempts
	if tr := trendsOf(r); tr != nil {
		p.Trends = trendCharts(tr)
		if len(p.Trends) > 0 {
			p.TrendNames = p.Trends[0].Series
			p.TrendRuns = len(tr.Runs)
		}
	}
	p.Pairs, p.PairsLeft = pairsShown(r.SideBySide)
	if err := tmpl.Execute(w, p); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	return nil
}

// jsonInvisible writes the characters encoding/json leaves as they are but
// that reorder or hide text (bidirectional controls, DEL, C1 controls) as
// \u escapes: they can only occur inside JSON strings, so the value is
// unchanged, and the page's script drops them before showing text.
func jsonInvisible(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.Write(b[i : i+size])
		}
		i += size
	}
	return out.Bytes()
}

func cspHash(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

// rampSVG draws the ramp history: one line per task's setpoint over the
// elapsed time, and the connection ceiling dashed. Nil when there is none.
func rampSVG(points []RampPoint) *htmlChart {
	if len(points) == 0 {
		return nil
	}
	ch := &htmlChart{Width: 760, Height: 240, Left: 48, Right: 728, Top: 12, Base: 208}
	t0 := points[0].At
	var tMax float64
	yMax := 1
	type xy struct{ x, y float64 }
	byTask := map[string][]xy{}
	var order []string
	var ceil []xy
	for _, p := range points {
		x := p.At.Sub(t0).Seconds()
		if x > tMax {
			tMax = x
		}
		if _, ok := byTask[p.Task]; !ok {
			order = append(order, p.Task)
		}
		byTask[p.Task] = append(byTask[p.Task], xy{x, float64(p.Setpoint)})
		if n := len(ceil); n > 0 && ceil[n-1].x == x {
			ceil[n-1].y = float64(p.Ceiling)
		} else {
			ceil = append(ceil, xy{x, float64(p.Ceiling)})
		}
		yMax = max(yMax, p.Setpoint, p.Ceiling)
	}
	if tMax == 0 {
		tMax = 1
	}
	yTop := niceCeil(float64(yMax))
	sx := func(x float64) float64 { return ch.Left + x/tMax*(ch.Right-ch.Left) }
	sy := func(y float64) float64 { return ch.Base - y/yTop*(ch.Base-ch.Top) }
	line := func(pts []xy) string {
		idx := downsampleIdx(len(pts), 400)
		var b strings.Builder
		for k, i := range idx {
			if k > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", sx(pts[i].x), sy(pts[i].y))
		}
		return b.String()
	}
	for i, name := range order {
		ch.Series = append(ch.Series, htmlSeries{Name: name, Class: fmt.Sprintf("s%d", i%8), Points: line(byTask[name])})
	}
	ch.Series = append(ch.Series, htmlSeries{Name: "connection ceiling", Class: "ceil", Points: line(ceil), Dashed: true})
	for k := 0; k <= 4; k++ {
		v := yTop * float64(k) / 4
		ch.YTicks = append(ch.YTicks, htmlTick{Pos: sy(v), Label: fmt.Sprint(int(math.Round(v)))})
		x := tMax * float64(k) / 4
		ch.XTicks = append(ch.XTicks, htmlTick{Pos: sx(x), Label: elapsedLabel(time.Duration(x * float64(time.Second)))})
	}
	return ch
}

// downsampleIdx picks at most n of total indices, evenly, keeping the first and last.
func downsampleIdx(total, n int) []int {
	if total <= n {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{}
	var out []int
	for k := 0; k < n; k++ {
		i := int(math.Round(float64(k) * float64(total-1) / float64(n-1)))
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

func niceCeil(v float64) float64 {
	if v <= 4 {
		return 4
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= v {
			return m * mag
		}
	}
	return 10 * mag
}

func elapsedLabel(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
