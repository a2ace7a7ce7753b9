package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/score"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// Defaults of the comparison (the action's confidence and min-effect inputs).
const (
	DefaultConfidence = 0.95
	DefaultMinEffect  = 0.05
)

// CompareOptions shape the verdict.
type CompareOptions struct {
	// Confidence is the level of the tests and intervals (default 0.95).
	Confidence float64
	// MinEffect is the smallest change in a task's rate that matters
	// (default 0.05: 5 points); MinEffectSet says a 0 was meant.
	MinEffect    float64
	MinEffectSet bool
	// Look and Looks: this is look Look of at most Looks (decide's rounds
	// plus the first look); each look tests at its share of 1 − Confidence
	// (stats.LookAlpha), so the false-alarm rate over every look stays at the
	// declared level. 0 means one look.
	Look, Looks int
	// Flaky are the samples the record knows as flaky ("task\x00sample"):
	// listed apart, never as newly failing or fixed.
	Flaky map[string]FlakyInfo
	// DecideExtras: head's attempts numbered above its task's planned
	// attempts were added by decide because their sample was uncertain; the
	// test conditions on that selection (stats.PairedSample.Extra).
	DecideExtras bool
}

// FlakyInfo is what the ledger knows of a flaky sample.
type FlakyInfo struct {
	Passed int `json:"passed"`
	Judged int `json:"judged"`
}

func (o CompareOptions) norm() CompareOptions {
	if o.Confidence <= 0 || o.Confidence >= 1 {
		o.Confidence = DefaultConfidence
	}
	if o.MinEffect <= 0 && !o.MinEffectSet {
		o.MinEffect = DefaultMinEffect
	}
	if o.Looks < 1 {
		o.Look, o.Looks = 1, 1
	}
	o.Look = min(max(o.Look, 1), o.Looks)
	return o
}

// Comparison is a run judged against its base (the base branch's results):
// per task a paired test of head against base over the samples both sides
// judged, and the verdict with the change, its interval and its p-value.
type Comparison struct {
	// Base says where the base results came from (a record path), and
	// BaseRunIDs which runs of it.
	Base       string   `json:"base"`
	BaseRunIDs []string `json:"base_run_ids"`
	// Verdict is the overall verdict (regressed if some task regressed;
	// else inconclusive if some task is; else improved if some task
	// improved; else unchanged) and Summary the sentence that leads the
	// comment.
	Verdict stats.Verdict `json:"verdict"`
	Summary string        `json:"summary"`
	// Decide says what would decide an inconclusive verdict.
	Decide string `json:"decide,omitempty"`
	// Confidence, MinEffect: the judging settings; Alpha the two-sided
	// level this look tested at (1 − Confidence on a single look); Look of
	// Looks for decide's rounds.
	Confidence float64 `json:"confidence"`
	MinEffect  float64 `json:"min_effect"`
	Alpha      float64 `json:"alpha"`
	Look       int     `json:"look"`
	Looks      int     `json:"looks"`
	// Family is how the tasks' p-values were adjusted ("holm").
	Family string `json:"family_adjustment"`
	// History is the base's recent runs with the head beside them, when
	// the base's report carried its trend (the action's baseline record).
	History *Trends     `json:"history,omitempty"`
	Tasks   []TaskDelta `json:"tasks"`
	// NewlyFail and NewlyFixed are the samples whose score fell or rose
	// (known-flaky ones are in Flaky instead): what changed, not the
	// verdict (the verdict is the test's).
	NewlyFail  []SampleDelta `json:"newly_failing"`
	NewlyFixed []SampleDelta `json:"newly_fixed"`
	Flaky      []SampleDelta `json:"flaky,omitempty"`
	// OnlyHead and OnlyBase are samples judged on one side only: reported,
	// never tested.
	OnlyHead []SampleDelta `json:"only_on_head,omitempty"`
	OnlyBase []SampleDelta `json:"only_on_base,omitempty"`
	SpendUSD float64       `json:"spend_usd"`
	BaseUSD  float64       `json:"base_spend_usd"`
	// PerPassUSD and BasePerPassUSD are the cost per pass on each side
	// (a cheaper agent at the same pass rate is an improvement too).
	PerPassUSD     *float64 `json:"cost_per_pass_usd,omitempty"`
	BasePerPassUSD *float64 `json:"base_cost_per_pass_usd,omitempty"`
	// Regressed: the verdict is regressed (some task's drop is significant
	// at the look's level, after Holm, and at least MinEffect).
	Regressed bool `json:"regressed"`
	// Rounds are decide's rounds of extra attempts, and DecideStop why
	// decide stopped with the verdict still inconclusive.
	Rounds     []DecideRound `json:"decide_rounds,omitempty"`
	DecideStop string        `json:"decide_stopped,omitempty"`
}

// DecideRound is one round of extra attempts on the uncertain samples.
type DecideRound struct {
	Round    int           `json:"round"`
	Samples  int           `json:"samples"`
	Attempts int           `json:"attempts"`
	USD      float64       `json:"usd"`
	Verdict  stats.Verdict `json:"verdict"`
}

// TaskDelta is one task judged on both sides. A task only on one side has
// the other's judged count 0 and no test.
type TaskDelta struct {
	Name    string `json:"name"`
	Reducer string `json:"reducer"`
	Base    Counts `json:"base"`
	Head    Counts `json:"head"`
	// BaseRate and HeadRate are the sides' pass rates over the samples
	// compared (both judged them); Delta is head − base.
	BaseRate   float64 `json:"base_pass_rate"`
	HeadRate   float64 `json:"head_pass_rate"`
	Delta      float64 `json:"delta"`
	BaseJudged int     `json:"base_judged"`
	HeadJudged int     `json:"head_judged"`
	// Test is the paired test; PRegress and PImprove its one-sided
	// p-values after Holm's adjustment across tasks.
	Test     *stats.Paired `json:"test,omitempty"`
	PRegress float64       `json:"p_regress"`
	PImprove float64       `json:"p_improve"`
	Verdict  stats.Verdict `json:"verdict"`
	// Look is the look the verdict was reached at (decide keeps a verdict
	// an earlier look reached).
	Look int `json:"look"`
	// Why says in words why the verdict is what it is.
	Why string `json:"why"`
	// Uncertain are the samples more attempts could move (discordant or
	// mixed): where decide spends.
	Uncertain   []string `json:"uncertain,omitempty"`
	OnlyOnHead  bool     `json:"only_on_head,omitempty"`
	OnlyOnBase  bool     `json:"only_on_base,omitempty"`
	Regressed   bool     `json:"regressed,omitempty"`
	Improvement bool     `json:"improved,omitempty"`
}

// SampleDelta is a sample whose score changed, or that only one side has.
type SampleDelta struct {
	Task      string         `json:"task"`
	Sample    string         `json:"sample"`
	BaseScore float64        `json:"base_score"`
	HeadScore float64        `json:"head_score"`
	Base      status.Attempt `json:"base,omitempty"` // the sample's outcome: passed when its score is 1, else failed
	Head      status.Attempt `json:"head,omitempty"`
	Reason    string         `json:"reason,omitempty"` // the head's reason or explanation
	Source    string         `json:"source,omitempty"`
	// FlakyPassed of FlakyJudged: the ledger's record of a known-flaky sample.
	FlakyPassed int `json:"flaky_passed,omitempty"`
	FlakyJudged int `json:"flaky_judged,omitempty"`
}

func judged(c Counts) int { return c.Passed + c.Failed + c.Errored + c.Infra }

func outcomeOf(s float64) status.Attempt {
	if s >= 1-1e-12 {
		return status.Passed
	}
	return status.Failed
}

// taskSamples is one task's samples on both sides.
type taskSamples struct {
	keys   []string
	paired []stats.PairedSample
}

// Compare judges head against base. Samples are matched by task and sample
// id; tasks by name, in head's order, then the ones only base has. Both
// sides are scored with head's reducer for the task.
func Compare(head, base *Report, baseLabel string, opts ...CompareOptions) *Comparison {
	var o CompareOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o = o.norm()
	alpha := stats.LookAlpha(1-o.Confidence, o.Look, o.Looks)
	c := &Comparison{Base: baseLabel, BaseRunIDs: base.RunIDs, SpendUSD: head.Spend.USD, BaseUSD: base.Spend.USD,
		PerPassUSD: head.CostPerPass, BasePerPassUSD: base.CostPerPass,
		Confidence: o.Confidence, MinEffect: o.MinEffect, Alpha: alpha, Look: o.Look, Looks: o.Looks, Family: "holm"}
	hOrder, hObs := observations(head, "head")
	bOrder, bObs := observations(base, "base")

	// Pair the samples task by task.
	byTask := map[string]*taskSamples{}
	for _, k := range hOrder {
		h, b := hObs[k], bObs[k]
		ht := h.tally()
		if ht.N == 0 {
			continue
		}
		red := head.reducerOf(h.task)
		if b == nil || b.tally().N == 0 {
			c.OnlyHead = append(c.OnlyHead, SampleDelta{Task: h.task, Sample: h.sample, HeadScore: red.Score(ht.Pass, ht.N),
				Head: outcomeOf(red.Score(ht.Pass, ht.N)), Source: h.source})
			continue
		}
		ts := byTask[h.task]
		if ts == nil {
			ts = &taskSamples{}
			byTask[h.task] = ts
		}
		ts.keys = append(ts.keys, k)
		extraAbove := 0
		if o.DecideExtras {
			extraAbove = plannedOf(head, h.task)
		}
		ts.paired = append(ts.paired, pairOf(h, b, extraAbove))
	}
	for _, k := range bOrder {
		b := bObs[k]
		bt := b.tally()
		if bt.N == 0 {
			continue
		}
		if h := hObs[k]; h == nil || h.tally().N == 0 {
			red := head.reducerOf(b.task)
			if !taskIn(head, b.task) {
				red = base.reducerOf(b.task)
			}
			s := red.Score(bt.Pass, bt.N)
			c.OnlyBase = append(c.OnlyBase, SampleDelta{Task: b.task, Sample: b.sample, BaseScore: s, Base: outcomeOf(s), Source: b.source})
		}
	}

	// Test each task, then adjust across the tasks tested.
	baseTasks := map[string]TaskReport{}
	for _, t := range base.Tasks {
		baseTasks[t.Name] = t
	}
	seen := map[string]bool{}
	var tested []int
	add := func(name string, h, b Counts, onlyHead, onlyBase bool) {
		red := head.reducerOf(name)
		if onlyBase {
			red = base.reducerOf(name)
		}
		d := TaskDelta{Name: name, Reducer: red.String(), Head: h, Base: b, HeadJudged: judged(h), BaseJudged: judged(b),
			OnlyOnHead: onlyHead, OnlyOnBase: onlyBase, PRegress: 1, PImprove: 1, Verdict: stats.Inconclusive}
		if ts := byTask[name]; ts != nil && len(ts.paired) > 0 {
			p := stats.PairedTest(ts.paired, red.Func(), 1-alpha)
			d.Test = &p
			d.HeadRate, d.BaseRate, d.Delta = p.Head.Mean, p.Base.Mean, p.Delta
			d.PRegress, d.PImprove = p.PRegress, p.PImprove
			for i, ps := range ts.paired {
				if stats.Uncertain(ps, red.Func()) {
					_, sample, _ := strings.Cut(ts.keys[i], "\x00")
					d.Uncertain = append(d.Uncertain, sample)
				}
			}
			tested = append(tested, len(c.Tasks))
		} else {
			d.Why = "no sample was judged on both sides"
			if onlyHead {
				d.Why = "a new task: nothing on base to compare with"
			} else if onlyBase {
				d.Why = "the task is gone from head"
			}
		}
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
	if len(tested) > 0 {
		pr, pi := make([]float64, len(tested)), make([]float64, len(tested))
		for j, i := range tested {
			pr[j], pi[j] = c.Tasks[i].PRegress, c.Tasks[i].PImprove
		}
		pr, pi = stats.Holm(pr), stats.Holm(pi)
		for j, i := range tested {
			d := &c.Tasks[i]
			d.PRegress, d.PImprove = pr[j], pi[j]
			d.Verdict = stats.Judge(*d.Test, d.PRegress, d.PImprove, alpha, o.MinEffect)
			d.Look = o.Look
			d.Regressed, d.Improvement = d.Verdict == stats.Regressed, d.Verdict == stats.Improved
			d.Why = whyOf(d, alpha, o.MinEffect)
		}
	}
	c.Verdict = overall(c.Tasks, tested)
	c.Regressed = c.Verdict == stats.Regressed

	// Per-sample changes, for the lists.
	for _, k := range hOrder {
		h, b := hObs[k], bObs[k]
		if b == nil {
			continue
		}
		ht, bt := h.tally(), b.tally()
		if ht.N == 0 || bt.N == 0 {
			continue
		}
		red := head.reducerOf(h.task)
		hs, bs := red.Score(ht.Pass, ht.N), red.Score(bt.Pass, bt.N)
		if math.Abs(hs-bs) < 1e-12 {
			continue
		}
		d := SampleDelta{Task: h.task, Sample: h.sample, HeadScore: hs, BaseScore: bs, Head: outcomeOf(hs), Base: outcomeOf(bs), Source: h.last.Source}
		if hs < bs {
			d.Reason = h.last.Reason
			if d.Reason == "" {
				d.Reason = h.last.Explanation
			}
		}
		if f, ok := o.Flaky[k]; ok {
			d.FlakyPassed, d.FlakyJudged = f.Passed, f.Judged
			c.Flaky = append(c.Flaky, d)
			continue
		}
		if hs < bs {
			c.NewlyFail = append(c.NewlyFail, d)
		} else {
			c.NewlyFixed = append(c.NewlyFixed, d)
		}
	}
	c.Summary, c.Decide = summarize(c)
	if base.Trends != nil {
		c.History = base.Trends.WithHead(head)
	}
	return c
}

// plannedOf is the task's planned attempts per sample in r (0: unknown).
func plannedOf(r *Report, name string) int {
	for _, t := range r.Tasks {
		if t.Name == name {
			return t.Planned
		}
	}
	return 0
}

func taskIn(r *Report, name string) bool {
	for _, t := range r.Tasks {
		if t.Name == name {
			return true
		}
	}
	return false
}

// pairOf splits one sample's observations into those both sides share
// (the same producing run and attempt) and each side's own.
//
// With extraAbove > 0, head's own attempts numbered above it are decide's
// extra attempts (stats.PairedSample.Extra).
func pairOf(h, b *sampleObs, extraAbove int) stats.PairedSample {
	var p stats.PairedSample
	add := func(t *stats.Tally, pass bool) {
		t.N++
		if pass {
			t.Pass++
		}
	}
	for _, k := range h.keys {
		switch bp, shared := b.obs[k]; {
		case shared && bp == h.obs[k]:
			add(&p.Shared, h.obs[k])
		case extraAbove > 0 && k.attempt > extraAbove:
			add(&p.Extra, h.obs[k])
		default:
			add(&p.HeadOnly, h.obs[k])
		}
	}
	for _, k := range b.keys {
		if hp, shared := h.obs[k]; !shared || hp != b.obs[k] {
			add(&p.BaseOnly, b.obs[k])
		}
	}
	return p
}

// overall is the comparison's verdict from the tested tasks'.
func overall(tasks []TaskDelta, tested []int) stats.Verdict {
	if len(tested) == 0 {
		return stats.Inconclusive
	}
	has := map[stats.Verdict]bool{}
	for _, i := range tested {
		has[tasks[i].Verdict] = true
	}
	switch {
	case has[stats.Regressed]:
		return stats.Regressed
	case has[stats.Inconclusive]:
		return stats.Inconclusive
	case has[stats.Improved]:
		return stats.Improved
	}
	return stats.Unchanged
}

// interval formats a change's interval in points: "−20.1 to +4.9 pts".
func intervalPts(i stats.Interval) string {
	return signed(i.Lo) + " to " + signed(i.Hi) + " pts"
}

// confidencePct is 1 − alpha as a percentage, at most two decimals.
func confidencePct(alpha float64) string {
	return strconv.FormatFloat(math.Round(10000*(1-alpha))/100, 'f', -1, 64) + "%"
}

// whyOf says why a task's verdict is what it is, in one clause.
func whyOf(d *TaskDelta, alpha, minEffect float64) string {
	p := d.Test
	change := fmt.Sprintf("%s → %s (%s, %s CI %s, %s)", pct(p.Base.Mean), pct(p.Head.Mean), points(p.Delta),
		confidencePct(alpha), intervalPts(p.Interval), formatP(twoSided(d)))
	me := strconv.FormatFloat(100*minEffect, 'f', -1, 64)
	// The test asks whether head behaves differently on these samples; the
	// interval sizes the change on samples like them. Extra attempts on a
	// few samples can make the first sure while the second still spans 0.
	if (d.Verdict == stats.Regressed && p.Interval.Hi >= 0) || (d.Verdict == stats.Improved && p.Interval.Lo <= 0) {
		change += "; the test is about these samples, the interval about samples like them"
	}
	switch d.Verdict {
	case stats.Regressed:
		return "fell " + change
	case stats.Improved:
		return "rose " + change
	case stats.Unchanged:
		if p.Carried == p.Samples {
			return "every result carried: nothing that decides the outcome changed"
		}
		return "within ±" + me + " pts: " + change
	}
	switch {
	case d.PRegress < alpha/2:
		return "a significant drop smaller than min-effect (" + me + " pts): " + change
	case d.PImprove < alpha/2:
		return "a significant rise smaller than min-effect (" + me + " pts): " + change
	}
	return "not decided: " + change
}

// summarize writes the sentence that leads the comment, and for an
// inconclusive verdict what would decide it.
func summarize(c *Comparison) (summary, decide string) {
	var reg, imp, inc []TaskDelta
	for _, d := range c.Tasks {
		switch {
		case d.Test == nil:
		case d.Verdict == stats.Regressed:
			reg = append(reg, d)
		case d.Verdict == stats.Improved:
			imp = append(imp, d)
		case d.Verdict == stats.Inconclusive:
			inc = append(inc, d)
		}
	}
	names := func(ds []TaskDelta) string {
		var s []string
		for i, d := range ds {
			if i == 3 {
				s = append(s, fmt.Sprintf("%d more", len(ds)-3))
				break
			}
			s = append(s, d.Name+" "+d.Why)
		}
		return strings.Join(s, "; ")
	}
	conf := confidencePct(c.Alpha)
	switch c.Verdict {
	case stats.Regressed:
		return fmt.Sprintf("Regressed at %s confidence: %s.", conf, names(reg)), ""
	case stats.Improved:
		return fmt.Sprintf("Improved at %s confidence: %s; no task regressed.", conf, names(imp)), ""
	case stats.Unchanged:
		largest := TaskDelta{}
		for _, d := range c.Tasks {
			if d.Test != nil && math.Abs(d.Delta) >= math.Abs(largest.Delta) {
				largest = d
			}
		}
		s := fmt.Sprintf("Unchanged: every task's change lies within ±%s pts at %s confidence", strconv.FormatFloat(100*c.MinEffect, 'f', -1, 64), conf)
		if largest.Test != nil {
			s += fmt.Sprintf(" (largest: %s, %s, CI %s)", largest.Name, points(largest.Delta), intervalPts(largest.Test.Interval))
		}
		return s + ".", ""
	}
	if len(inc) == 0 {
		return "Inconclusive: no sample was judged on both sides, so nothing could be tested.", "run the same tasks on base and head"
	}
	uncertain, samples := 0, 0
	widest := 0.0
	for _, d := range inc {
		uncertain += len(d.Uncertain)
		samples += d.Test.Samples - d.Test.Carried
		widest = math.Max(widest, (d.Test.Interval.Hi-d.Test.Interval.Lo)/2)
	}
	decide = fmt.Sprintf("more attempts on the %d uncertain sample(s) (`decide:`)", uncertain)
	if need := widest / math.Max(c.MinEffect, 0.01); need > 1 && samples > 0 {
		decide += fmt.Sprintf(", or about %d samples instead of %d (the interval narrows with √n)", int(math.Ceil(float64(samples)*need*need)), samples)
	}
	return fmt.Sprintf("Inconclusive at %s confidence: %s. What would decide it: %s.", conf, names(inc), decide), decide
}

func formatDelta(d TaskDelta) string {
	if d.Test == nil {
		return "–"
	}
	return points(d.Delta) + " (" + intervalPts(d.Test.Interval) + ")"
}

func formatSpendDelta(c *Comparison) string {
	d := c.SpendUSD - c.BaseUSD
	sign := "+"
	if d < 0 {
		sign = "−"
		d = -d
	}
	out := fmt.Sprintf("%s vs %s on base (%s%s)", formatUSD(c.SpendUSD), formatUSD(c.BaseUSD), sign, formatUSD(d))
	if c.PerPassUSD != nil && c.BasePerPassUSD != nil && *c.BasePerPassUSD > 0 {
		ch := 100 * (*c.PerPassUSD - *c.BasePerPassUSD) / *c.BasePerPassUSD
		out += fmt.Sprintf(" · per pass %s vs %s (%s%%)", formatUSD(*c.PerPassUSD), formatUSD(*c.BasePerPassUSD), signedPct(ch))
	}
	return out
}

// signedPct is "+12.5" or "−3.0".
func signedPct(v float64) string {
	if v < 0 {
		return "−" + strconv.FormatFloat(-v, 'f', 1, 64)
	}
	return "+" + strconv.FormatFloat(v, 'f', 1, 64)
}

var verdictBadge = map[stats.Verdict]string{
	stats.Regressed:    "🔻 **regressed**",
	stats.Improved:     "🔺 **improved**",
	stats.Unchanged:    "✅ unchanged",
	stats.Inconclusive: "❔ inconclusive",
}

// comparisonMarkdown renders the comparison for the summary (full) or the
// comment (lists capped at limit rows).
// The summary sentence is written unless the comment already led with it.
func comparisonMarkdown(c *Comparison, heading string, limit, reasonWidth int, sentence bool) string {
	var b strings.Builder
	b.WriteString(heading)
	if sentence {
		fmt.Fprintf(&b, "%s · %s\n\n", verdictBadge[c.Verdict], MD(c.Summary, 2000))
	}
	look := ""
	if c.Looks > 1 {
		look = fmt.Sprintf(" · look %d of %d", c.Look, c.Looks)
	}
	fmt.Fprintf(&b, "Against %s · paired test per task, Holm across tasks · min-effect %s pts%s · %d newly failing · %d newly fixed · spend %s\n\n",
		MD(c.Base, 200), strconv.FormatFloat(100*c.MinEffect, 'f', -1, 64), look, len(c.NewlyFail), len(c.NewlyFixed), MD(formatSpendDelta(c), 0))
	if len(c.Rounds) > 0 || c.DecideStop != "" {
		b.WriteString(decideLine(c) + "\n\n")
	}
	b.WriteString("| task | verdict | base | head | Δ (CI) | p | samples |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, d := range c.Tasks {
		base, head, verdict, p, n := "–", "–", string(d.Verdict), "–", "–"
		if d.Test != nil {
			base, head = pct(d.BaseRate), pct(d.HeadRate)
			p = formatP(twoSided(&d))
			n = fmt.Sprintf("%d (%d differ)", d.Test.Samples, d.Test.Discordant)
		}
		if d.OnlyOnHead {
			base, verdict = "new task", "–"
		}
		if d.OnlyOnBase {
			head, verdict = "removed", "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", MD(d.Name, 100), verdict, base, head, formatDelta(d), p, n)
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
			if r.FlakyJudged > 0 {
				fmt.Fprintf(&b, " (passed %d of %d before; %s → %s)", r.FlakyPassed, r.FlakyJudged, pct(r.BaseScore), pct(r.HeadScore))
			} else if r.BaseScore != 0 || r.HeadScore != 0 {
				if r.BaseScore != math.Round(r.BaseScore) || r.HeadScore != math.Round(r.HeadScore) {
					fmt.Fprintf(&b, " (%s → %s)", pct(r.BaseScore), pct(r.HeadScore))
				}
			}
			if reasons && r.Reason != "" {
				b.WriteString(": " + MD(r.Reason, reasonWidth))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	list("Newly failing", c.NewlyFail, true)
	list("Newly fixed", c.NewlyFixed, false)
	list("Known flaky, changed (not counted as regressions)", c.Flaky, false)
	list("Only on head (not tested)", c.OnlyHead, false)
	list("Only on base (not tested)", c.OnlyBase, false)
	return b.String()
}

// reducerName is the default-aware reducer label of a task report.
func reducerName(s string) string {
	r, err := score.Parse(s)
	if err != nil {
		return s
	}
	return r.String()
}

// decideLine says what decide spent and how it ended.
func decideLine(c *Comparison) string {
	attempts, usd := 0, 0.0
	for _, r := range c.Rounds {
		attempts += r.Attempts
		usd += r.USD
	}
	s := fmt.Sprintf("%d round(s), %d extra attempt(s), %s", len(c.Rounds), attempts, formatUSD(usd))
	if len(c.Rounds) > 0 {
		var vs []string
		for _, r := range c.Rounds {
			vs = append(vs, fmt.Sprintf("%d on %d samples → %s", r.Attempts, r.Samples, r.Verdict))
		}
		s += " (" + strings.Join(vs, "; ") + ")"
	}
	if c.DecideStop != "" {
		s += "; stopped undecided: " + c.DecideStop
	}
	return "**Decide:** " + MD(s, 2000)
}

// twoSided is the task's two-sided p-value (after Holm): twice the smaller
// one-sided one, which is what is compared with 1 − confidence.
func twoSided(d *TaskDelta) float64 {
	return math.Min(1, 2*math.Min(d.PRegress, d.PImprove))
}

// ComparisonMarkdown writes the comparison alone, as the summary shows it.
func ComparisonMarkdown(w io.Writer, c *Comparison) error {
	_, err := io.WriteString(w, comparisonMarkdown(c, "", 1<<30, 200, true))
	return err
}

// WriteComparisonJSON writes the comparison alone as indented JSON.
func WriteComparisonJSON(w io.Writer, c *Comparison) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// ComparisonTerminal writes the comparison for a terminal: the verdict
// sentence, a table per task and the changed samples.
func ComparisonTerminal(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(string(c.Verdict)), Plain(c.Summary, 2000))
	fmt.Fprintf(&b, "against %s · paired test per task, Holm across tasks · min-effect %s pts\n",
		Plain(c.Base, 200), strconv.FormatFloat(100*c.MinEffect, 'f', -1, 64))
	if len(c.Rounds) > 0 || c.DecideStop != "" {
		b.WriteString(Plain(strings.ReplaceAll(decideLine(c), "**", ""), 2000) + "\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	t := newTable(w)
	t.Header("task", "verdict", "base", "head", "Δ", "95% CI", "p", "samples", "differ")
	for _, d := range c.Tasks {
		row := []string{Plain(d.Name, 40), string(d.Verdict), "–", "–", "–", "–", "–", "–", "–"}
		if d.Test != nil {
			row = []string{Plain(d.Name, 40), string(d.Verdict), pct(d.BaseRate), pct(d.HeadRate), points(d.Delta),
				intervalPts(d.Test.Interval), formatP(twoSided(&d)), strconv.Itoa(d.Test.Samples), strconv.Itoa(d.Test.Discordant)}
		}
		if d.OnlyOnHead {
			row[1], row[2] = "new task", "–"
		}
		if d.OnlyOnBase {
			row[1], row[3] = "removed", "–"
		}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	b.Reset()
	list := func(title string, rows []SampleDelta) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s (%d):\n", title, len(rows))
		for _, r := range rows {
			fmt.Fprintf(&b, "  %s/%s %s → %s", Plain(r.Task, 60), Plain(r.Sample, 60), pct(r.BaseScore), pct(r.HeadScore))
			if r.Reason != "" {
				b.WriteString(": " + Plain(r.Reason, 120))
			}
			b.WriteString("\n")
		}
	}
	list("newly failing", c.NewlyFail)
	list("newly fixed", c.NewlyFixed)
	list("known flaky, changed", c.Flaky)
	list("only on head (not tested)", c.OnlyHead)
	list("only on base (not tested)", c.OnlyBase)
	_, err := io.WriteString(w, b.String())
	return err
}

// KeepDecided puts back the tasks an earlier look decided: a verdict
// reached at a look stands (judging it again at a later look's smaller
// level could only take it back, and the error rate was already spent on
// it). The overall verdict and the sentence are made again.
func (c *Comparison) KeepDecided(earlier *Comparison) {
	prev := map[string]TaskDelta{}
	for _, d := range earlier.Tasks {
		if d.Test != nil && d.Verdict != stats.Inconclusive {
			prev[d.Name] = d
		}
	}
	var tested []int
	for i := range c.Tasks {
		if p, ok := prev[c.Tasks[i].Name]; ok {
			c.Tasks[i] = p
		}
		if c.Tasks[i].Test != nil {
			tested = append(tested, i)
		}
	}
	c.Verdict = overall(c.Tasks, tested)
	c.Regressed = c.Verdict == stats.Regressed
	c.Summary, c.Decide = summarize(c)
}
