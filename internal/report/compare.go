package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/status"
)

// Comparison is a run judged against its base (the base branch's results):
// per task the pass rate on base and head, the samples that newly fail and
// the ones newly fixed, and spend against base.
type Comparison struct {
	// Base says where the base results came from (a record path), and
	// BaseRunIDs which runs of it.
	Base       string        `json:"base"`
	BaseRunIDs []string      `json:"base_run_ids"`
	Tasks      []TaskDelta   `json:"tasks"`
	NewlyFail  []SampleDelta `json:"newly_failing"`
	NewlyFixed []SampleDelta `json:"newly_fixed"`
	SpendUSD   float64       `json:"spend_usd"`
	BaseUSD    float64       `json:"base_spend_usd"`
	// Regressed: some sample newly fails, or some task's pass rate fell.
	Regressed bool `json:"regressed"`
}

// TaskDelta is one task's pass rate on base and head. A task only on one
// side has the other's judged count 0.
type TaskDelta struct {
	Name        string  `json:"name"`
	Base        Counts  `json:"base"`
	Head        Counts  `json:"head"`
	BaseRate    float64 `json:"base_pass_rate"`
	HeadRate    float64 `json:"head_pass_rate"`
	Delta       float64 `json:"delta"` // head − base, when both judged something
	BaseJudged  int     `json:"base_judged"`
	HeadJudged  int     `json:"head_judged"`
	OnlyOnHead  bool    `json:"only_on_head,omitempty"`
	OnlyOnBase  bool    `json:"only_on_base,omitempty"`
	Regressed   bool    `json:"regressed,omitempty"`
	Improvement bool    `json:"improved,omitempty"`
}

// SampleDelta is a sample whose outcome changed.
type SampleDelta struct {
	Task   string         `json:"task"`
	Sample string         `json:"sample"`
	Base   status.Attempt `json:"base"` // passed or failed
	Head   status.Attempt `json:"head"`
	Reason string         `json:"reason,omitempty"` // the head's reason or explanation
	Source string         `json:"source,omitempty"`
}

func judged(c Counts) int { return c.Passed + c.Failed + c.Errored + c.Infra }

// sampleOutcome is "passed" when every judged attempt of the sample passed,
// "failed" when any failed or errored, "" when none was judged.
func sampleOutcomes(r *Report) (map[string]status.Attempt, map[string]AttemptRow, []string) {
	out := map[string]status.Attempt{}
	why := map[string]AttemptRow{}
	var order []string
	for _, a := range r.Attempts {
		k := a.Task + "\x00" + a.Sample
		if _, seen := out[k]; !seen {
			out[k] = ""
			order = append(order, k)
		}
		switch a.Status {
		case status.Passed:
			if out[k] == "" {
				out[k] = status.Passed
			}
		case status.Failed, status.Errored, status.Infra:
			if out[k] != status.Failed {
				why[k] = a
			}
			out[k] = status.Failed
		}
	}
	return out, why, order
}

// Compare judges head against base. Samples are matched by task and sample
// id; tasks by name, in head's order, then the ones only base has.
func Compare(head, base *Report, baseLabel string) *Comparison {
	c := &Comparison{Base: baseLabel, BaseRunIDs: base.RunIDs, SpendUSD: head.Spend.USD, BaseUSD: base.Spend.USD}
	baseTasks := map[string]TaskReport{}
	for _, t := range base.Tasks {
		baseTasks[t.Name] = t
	}
	seen := map[string]bool{}
	add := func(name string, h, b Counts, onlyHead, onlyBase bool) {
		d := TaskDelta{Name: name, Head: h, Base: b, HeadRate: h.PassRate(), BaseRate: b.PassRate(),
			HeadJudged: judged(h), BaseJudged: judged(b), OnlyOnHead: onlyHead, OnlyOnBase: onlyBase}
		if d.HeadJudged > 0 && d.BaseJudged > 0 {
			d.Delta = d.HeadRate - d.BaseRate
			// Rates are compared to the tenth of a percent shown.
			d.Regressed = d.Delta < -0.0005
			d.Improvement = d.Delta > 0.0005
		}
		c.Regressed = c.Regressed || d.Regressed
		c.Tasks = append(c.Tasks, d)
	}
	for _, t := range head.Tasks {
		seen[t.Name] = true
		b, ok := baseTasks[t.Name]
		add(t.Name, t.Counts, b.Counts, !ok, false)
	}
	for _, t := range base.Tasks {
		if !seen[t.Name] {
			add(t.Name, Counts{}, t.Counts, false, true)
		}
	}
	ho, why, order := sampleOutcomes(head)
	bo, _, _ := sampleOutcomes(base)
	for _, k := range order {
		h, b := ho[k], bo[k]
		if h == "" || b == "" || h == b {
			continue
		}
		task, sample, _ := strings.Cut(k, "\x00")
		d := SampleDelta{Task: task, Sample: sample, Base: b, Head: h}
		if h == status.Failed {
			a := why[k]
			d.Reason, d.Source = a.Reason, a.Source
			if d.Reason == "" {
				d.Reason = a.Explanation
			}
			c.NewlyFail = append(c.NewlyFail, d)
		} else {
			c.NewlyFixed = append(c.NewlyFixed, d)
		}
	}
	c.Regressed = c.Regressed || len(c.NewlyFail) > 0
	return c
}

func formatDelta(d TaskDelta) string {
	if d.HeadJudged == 0 || d.BaseJudged == 0 {
		return "–"
	}
	pts := 100 * d.Delta
	s := strconv.FormatFloat(pts, 'f', 1, 64)
	switch {
	case d.Regressed:
		return "🔻 " + s + " pts"
	case d.Improvement:
		return "🔺 +" + s + " pts"
	}
	return "±0.0 pts"
}

func formatSpendDelta(c *Comparison) string {
	d := c.SpendUSD - c.BaseUSD
	sign := "+"
	if d < 0 {
		sign = "−"
		d = -d
	}
	return fmt.Sprintf("%s vs %s on base (%s%s)", formatUSD(c.SpendUSD), formatUSD(c.BaseUSD), sign, formatUSD(d))
}

// comparisonMarkdown renders the comparison for the summary (full) or the
// comment (lists capped at limit rows).
func comparisonMarkdown(c *Comparison, heading string, limit, reasonWidth int) string {
	var b strings.Builder
	b.WriteString(heading)
	verdict := "no regression"
	if c.Regressed {
		verdict = "**regressed**"
	}
	fmt.Fprintf(&b, "Against %s: %s · %d newly failing · %d newly fixed · spend %s\n\n",
		MD(c.Base, 200), verdict, len(c.NewlyFail), len(c.NewlyFixed), MD(formatSpendDelta(c), 0))
	b.WriteString("| task | base | head | Δ |\n|---|---:|---:|---:|\n")
	for _, d := range c.Tasks {
		base, head := formatRate(d.Base), formatRate(d.Head)
		if d.OnlyOnHead {
			base = "new task"
		}
		if d.OnlyOnBase {
			head = "removed"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", MD(d.Name, 100), base, head, formatDelta(d))
	}
	b.WriteString("\n")
	list := func(title string, rows []SampleDelta, reasons bool) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "**%s (%d)**\n\n", title, len(rows))
		for i, r := range rows {
			if i == limit {
				fmt.Fprintf(&b, "- … and %d more\n", len(rows)-limit)
				break
			}
			fmt.Fprintf(&b, "- %s / %s", MD(r.Task, 100), MD(r.Sample, 100))
			if reasons && r.Reason != "" {
				b.WriteString(": " + MD(r.Reason, reasonWidth))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	list("Newly failing", c.NewlyFail, true)
	list("Newly fixed", c.NewlyFixed, false)
	return b.String()
}
