package stats

import "math"

// Verdict is the judgement of head against base for one task or overall.
type Verdict string

// Verdicts.
const (
	// Regressed: head is worse, significantly at the look's level, by at
	// least the smallest change that matters.
	Regressed Verdict = "regressed"
	// Improved: head is better in the same sense.
	Improved Verdict = "improved"
	// Unchanged: the change's interval lies inside ±min-effect (an
	// equivalence claim, not "no change was shown").
	Unchanged Verdict = "unchanged"
	// Inconclusive: none of the above; more evidence would decide it.
	Inconclusive Verdict = "inconclusive"
)

// Judge decides a verdict from a paired comparison made at confidence
// 1 − alpha (its Interval), given the one-sided p-values to use (the
// comparison's own, or Holm-adjusted across tasks) and minEffect, the
// smallest change in rate that matters (0.05 for 5 points).
//
// Regressed needs pRegress < alpha/2 and a change of at least minEffect
// downwards; Improved the mirror image; Unchanged needs the interval inside
// (−minEffect, +minEffect). The one-sided tests are at alpha/2 so that
// they match the two-sided interval at 1 − alpha, but the two are different
// methods (an exact test, an approximate interval) and can disagree near
// the edge: with one attempt a side and 5 of 5 discordant samples newly
// failing, the interval excludes 0 while p = 1/32 > 0.025. Regressed and
// Improved rest on the test alone, Unchanged on the interval alone.
func Judge(p Paired, pRegress, pImprove, alpha, minEffect float64) Verdict {
	const eps = 1e-12
	switch {
	case p.Samples == 0:
		return Inconclusive
	case pRegress < alpha/2 && p.Delta <= -minEffect+eps:
		return Regressed
	case pImprove < alpha/2 && p.Delta >= minEffect-eps:
		return Improved
	case p.Interval.Lo > -minEffect-eps && p.Interval.Hi < minEffect+eps && !(minEffect == 0 && p.Interval.Lo != p.Interval.Hi):
		return Unchanged
	}
	return Inconclusive
}

// Uncertain says whether more attempts at a sample could move a verdict:
// its two sides scored differently (discordant), or either side's
// attempts disagree among themselves (mixed). A sample whose every attempt
// both sides share never is: its change is exactly 0.
func Uncertain(s PairedSample, reduce Reducer) bool {
	if !s.own() {
		return false
	}
	h, b := s.Head(), s.Base()
	mixed := func(t Tally) bool { return t.Pass > 0 && t.Pass < t.N }
	return math.Abs(reduce(h.Pass, h.N)-reduce(b.Pass, b.N)) > 1e-12 || mixed(h) || mixed(b)
}
