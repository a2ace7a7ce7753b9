package stats

import (
	"math"
	"sort"
	"strings"
	"testing"
)

// Reference values: /usr/bin/python3 internal/stats/testdata/reference.py
// (see stats_test.go). The permutation p-values there come from a brute
// force enumeration of every 0/1 outcome vector with each sample's pooled
// own passes, written apart from the Go code.

func meanR(p, n int) float64 { return float64(p) / float64(n) }

func allR(p, n int) float64 {
	if p == n {
		return 1
	}
	return 0
}

func sqrtR(p, n int) float64 { return math.Sqrt(float64(p) / float64(n)) }

// mk builds samples from {sharedPass, sharedN, headPass, headN, basePass,
// baseN, extraPass, extraN}.
func mk(rows [][8]int) []PairedSample {
	out := make([]PairedSample, len(rows))
	for i, r := range rows {
		out[i] = PairedSample{Shared: Tally{r[0], r[1]}, HeadOnly: Tally{r[2], r[3]}, BaseOnly: Tally{r[4], r[5]}, Extra: Tally{r[6], r[7]}}
	}
	return out
}

// table2x2 is one attempt a side: a both pass, hb head only, bb base only,
// d neither.
func table2x2(a, hb, bb, d int) []PairedSample {
	var s []PairedSample
	add := func(n, h, b int) {
		for range n {
			s = append(s, PairedSample{HeadOnly: Tally{h, 1}, BaseOnly: Tally{b, 1}})
		}
	}
	add(a, 1, 1)
	add(hb, 1, 0)
	add(bb, 0, 1)
	add(d, 0, 0)
	return s
}

func TestPairedMcNemar(t *testing.T) {
	// pRegress = binomtest(bb, hb+bb, 0.5, "greater"), pImprove = binomtest(hb, hb+bb, 0.5, "greater")
	for _, c := range []struct {
		a, hb, bb, d int
		pr, pi       float64
	}{
		{30, 2, 8, 0, 0.0546875, 0.9892578125},
		{10, 5, 5, 10, 0.623046875, 0.623046875},
		{0, 0, 6, 0, 0.015625, 1.0},
		{36, 0, 0, 4, 1.0, 1.0},
		{20, 12, 2, 16, 0.99908447265625, 0.0064697265625},
		{12, 3, 9, 16, 0.072998046875, 0.980712890625},
		{1, 7, 1, 12, 0.99609375, 0.03515625},
	} {
		p := PairedTest(table2x2(c.a, c.hb, c.bb, c.d), meanR, 0.95)
		if !near(p.PRegress, c.pr, 1e-12) || !near(p.PImprove, c.pi, 1e-12) {
			t.Errorf("%v: p = %v, %v, want %v, %v", c, p.PRegress, p.PImprove, c.pr, c.pi)
		}
		if p.Method != "exact McNemar" || p.Discordant != c.hb+c.bb || p.Samples != c.a+c.hb+c.bb+c.d {
			t.Errorf("%v: method %q, %d discordant of %d", c, p.Method, p.Discordant, p.Samples)
		}
		// The same through the all reducer: one attempt scores the same.
		q := PairedTest(table2x2(c.a, c.hb, c.bb, c.d), allR, 0.95)
		if q.PRegress != p.PRegress || q.PImprove != p.PImprove {
			t.Errorf("%v: reducer all gives %v, %v", c, q.PRegress, q.PImprove)
		}
	}
}

func TestPairedNewcombe(t *testing.T) {
	// testdata/reference.py newcombe10: Newcombe (1998) method 10 in Python
	// (Wilson limits per margin, square-and-add with his corrected φ).
	for _, c := range []struct {
		a, hb, bb, d        int
		conf, delta, lo, hi float64
	}{
		{20, 12, 2, 16, 0.95, 0.2, 0.056156424841748265, 0.3292069954001405},
		{1, 1, 7, 12, 0.95, -0.2857142857142857, -0.506920226686141, -0.02555912416485978},
		{8, 3, 1, 2, 0.95, 0.1428571428571428, -0.15743724954009336, 0.41363941708556246},
		{7, 25, 2, 68, 0.95, 0.22549019607843135, 0.1329487072582856, 0.3184751496655259},
		{36, 12, 2, 0, 0.95, 0.19999999999999996, 0.05692958400323869, 0.3404276029749407},
		{30, 2, 8, 0, 0.95, -0.1499999999999999, -0.30592185720485476, 0.007372658461636761},
		{0, 0, 6, 4, 0.95, -0.6, -0.8318196702937638, -0.20052432164297995},
		{40, 0, 0, 0, 0.95, 0.0, -0.08762160119728646, 0.08762160119728646},
		{15, 3, 9, 13, 0.9, -0.14999999999999997, -0.2833099371128086, -0.006162985919715702},
	} {
		p := PairedTest(table2x2(c.a, c.hb, c.bb, c.d), meanR, c.conf)
		if !near(p.Delta, c.delta, 1e-12) || !near(p.Interval.Lo, c.lo, 1e-12) || !near(p.Interval.Hi, c.hi, 1e-12) {
			t.Errorf("%v: Δ %v [%v, %v], want %v [%v, %v]", c, p.Delta, p.Interval.Lo, p.Interval.Hi, c.delta, c.lo, c.hi)
		}
	}
	// Published values, to the digits printed: Newcombe (1998) Stat Med
	// 17:2635, example (b) 20/12/2/16, method 10: 0.0562 to 0.3292;
	// Fagerland, Lydersen and Laake (2014) 1/1/7/12: −0.507 to −0.026; Tang,
	// Ling and Tian (2010) 8/3/1/2: −0.1574 to 0.4136 (as reproduced in the
	// test suite of the R package ratesci, pairbinci MOVER_newc, wilson).
	for _, c := range []struct {
		a, hb, bb, d int
		digits       float64
		lo, hi       float64
	}{
		{20, 12, 2, 16, 1e4, 0.0562, 0.3292},
		{1, 1, 7, 12, 1e3, -0.507, -0.026},
		{8, 3, 1, 2, 1e4, -0.1574, 0.4136},
	} {
		p := PairedTest(table2x2(c.a, c.hb, c.bb, c.d), meanR, 0.95)
		if math.Round(p.Interval.Lo*c.digits)/c.digits != c.lo || math.Round(p.Interval.Hi*c.digits)/c.digits != c.hi {
			t.Errorf("%v: [%v, %v], published [%v, %v]", c, p.Interval.Lo, p.Interval.Hi, c.lo, c.hi)
		}
	}
}

func TestPairedMoverClustered(t *testing.T) {
	// testdata/reference.py mover_scores: 3 attempts a side, mean reducer.
	for _, c := range []struct {
		hp, bp        []int
		delta, lo, hi float64
	}{
		{[]int{3, 2, 3, 0, 1, 3, 3, 2, 2, 3}, []int{3, 3, 3, 1, 1, 3, 2, 3, 3, 3}, -0.09999999999999998, -0.33334458969906433, 0.13862874828762928},
		{[]int{1, 2, 0, 3, 3, 1}, []int{2, 2, 1, 3, 2, 0}, 1.1102230246251565e-16, -0.34290008147551526, 0.3362434586893413},
	} {
		var s []PairedSample
		for i := range c.hp {
			s = append(s, PairedSample{HeadOnly: Tally{c.hp[i], 3}, BaseOnly: Tally{c.bp[i], 3}})
		}
		p := PairedTest(s, meanR, 0.95)
		if !near(p.Delta, c.delta, 1e-12) || !near(p.Interval.Lo, c.lo, 1e-9) || !near(p.Interval.Hi, c.hi, 1e-9) {
			t.Errorf("%v v %v: Δ %v [%v, %v], want %v [%v, %v]", c.hp, c.bp, p.Delta, p.Interval.Lo, p.Interval.Hi, c.delta, c.lo, c.hi)
		}
	}
}

func TestPairedExactPermutation(t *testing.T) {
	for _, c := range []struct {
		name, reducer string
		rows          [][8]int
		pr, pi        float64
	}{
		{"3 v 3, mean", "mean", [][8]int{{0, 0, 3, 3, 1, 3, 0, 0}, {0, 0, 2, 3, 3, 3, 0, 0}, {0, 0, 0, 3, 2, 3, 0, 0}}, 0.5, 0.84},
		{"3 v 3, regression, mean", "mean", [][8]int{{0, 0, 1, 3, 3, 3, 0, 0}, {0, 0, 0, 3, 2, 3, 0, 0}, {0, 0, 2, 3, 3, 3, 0, 0}, {0, 0, 1, 3, 2, 3, 0, 0}}, 0.017, 0.999},
		{"unequal and shared, mean", "mean", [][8]int{{1, 1, 1, 2, 3, 3, 0, 0}, {0, 0, 0, 1, 2, 4, 0, 0}, {0, 0, 2, 2, 0, 2, 0, 0}, {2, 2, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 3, 1, 1, 0, 0}}, 0.35333333333333333, 0.6666666666666666},
		{"unequal, all", "all", [][8]int{{0, 0, 2, 2, 1, 3, 0, 0}, {0, 0, 1, 2, 3, 3, 0, 0}, {0, 0, 0, 2, 3, 3, 0, 0}, {0, 0, 2, 2, 3, 3, 0, 0}}, 0.226, 0.948},
		{"extra after 1 v 1, mean", "mean", [][8]int{{0, 0, 0, 1, 1, 1, 0, 2}, {0, 0, 0, 1, 1, 1, 1, 2}, {0, 0, 1, 1, 0, 1, 2, 2}, {0, 0, 0, 1, 1, 1, 0, 4}, {0, 0, 1, 1, 1, 1, 0, 0}}, 0.3125, 0.875},
		{"extra after 3 v 3 with shared, mean", "mean", [][8]int{{1, 1, 1, 2, 2, 3, 1, 2}, {0, 0, 3, 3, 1, 3, 2, 2}, {0, 0, 0, 3, 2, 3, 0, 2}}, 0.5485008818342152, 0.673721340388007},
	} {
		red := meanR
		if c.reducer == "all" {
			red = allR
		}
		p := PairedTest(mk(c.rows), red, 0.95)
		if !near(p.PRegress, c.pr, 1e-12) || !near(p.PImprove, c.pi, 1e-12) {
			t.Errorf("%s: p = %v, %v, want %v, %v", c.name, p.PRegress, p.PImprove, c.pr, c.pi)
		}
		if p.Method != "exact stratified permutation" {
			t.Errorf("%s: method %q", c.name, p.Method)
		}
	}
}

func TestPairedMonteCarlo(t *testing.T) {
	check := func(name string, s []PairedSample, red Reducer, pr, pi float64) {
		t.Helper()
		p := PairedTest(s, red, 0.95)
		if !strings.Contains(p.Method, "Monte Carlo") || p.Draws != MonteCarloDraws {
			t.Fatalf("%s: method %q, %d draws", name, p.Method, p.Draws)
		}
		b := float64(MonteCarloDraws)
		for _, x := range []struct{ got, want float64 }{{p.PRegress, pr}, {p.PImprove, pi}} {
			se := math.Sqrt(x.want * (1 - x.want) / b)
			if math.Abs(x.got-x.want) > 4*se+1/b {
				t.Errorf("%s: Monte Carlo p %v, exact %v (4 SE = %v)", name, x.got, x.want, 4*se)
			}
		}
		for range 3 {
			if q := PairedTest(s, red, 0.95); q.PRegress != p.PRegress || q.PImprove != p.PImprove {
				t.Errorf("%s: a second call gives %v, %v after %v, %v", name, q.PRegress, q.PImprove, p.PRegress, p.PImprove)
			}
		}
	}
	// An irrational reducer: brute force in reference.py.
	check("sqrt reducer", mk([][8]int{{0, 0, 0, 2, 2, 2, 0, 0}, {0, 0, 1, 2, 2, 2, 0, 0}, {0, 0, 1, 2, 1, 2, 0, 0}, {0, 0, 0, 2, 1, 2, 0, 0}, {0, 0, 2, 2, 1, 2, 0, 0}, {0, 0, 0, 2, 2, 2, 0, 0}}),
		sqrtR, 0.023726851851851853, 0.9901620370370371)
	// Mean of 41 head and 67 base attempts: the grid 1/2747 is too fine.
	var s []PairedSample
	for _, r := range [][4]int{{30, 41, 55, 67}, {20, 41, 40, 67}, {35, 41, 60, 67}} {
		s = append(s, PairedSample{HeadOnly: Tally{r[0], r[1]}, BaseOnly: Tally{r[2], r[3]}})
	}
	check("41 v 67 mean", s, meanR, 0.06260263999056621, 0.9644418706462333)
}

func TestPairedFineGridIsExact(t *testing.T) {
	// Mean of 7 head and 11 base attempts: on the grid 1/77, enumerated.
	var s []PairedSample
	for _, r := range [][4]int{{5, 7, 10, 11}, {3, 7, 6, 11}, {7, 7, 11, 11}, {2, 7, 8, 11}, {6, 7, 7, 11}, {4, 7, 9, 11}} {
		s = append(s, PairedSample{HeadOnly: Tally{r[0], r[1]}, BaseOnly: Tally{r[2], r[3]}})
	}
	p := PairedTest(s, meanR, 0.95)
	if p.Method != "exact stratified permutation" || !near(p.PRegress, 0.0947602455470371, 1e-12) || !near(p.PImprove, 0.9618866482627311, 1e-12) {
		t.Errorf("7 v 11: %s %v, %v; want exact 0.0947602455470371, 0.9618866482627311", p.Method, p.PRegress, p.PImprove)
	}
}

func TestPairedCarried(t *testing.T) {
	// Samples whose every attempt is shared change by 0 and are not tested.
	s := mk([][8]int{{1, 1, 0, 0, 0, 0, 0, 0}, {0, 1, 0, 0, 0, 0, 0, 0}, {3, 3, 0, 0, 0, 0, 0, 0}})
	p := PairedTest(s, meanR, 0.95)
	if p.Carried != 3 || p.Delta != 0 || p.Interval != (Interval{0, 0}) || p.PRegress != 1 || p.PImprove != 1 || p.Method != "every result carried" {
		t.Errorf("all carried: %+v", p)
	}
	// Mixed with tested samples: the carried ones scale the interval by
	// the tested fraction, and leave the p-values alone.
	tested := table2x2(0, 1, 7, 2)
	p1 := PairedTest(tested, meanR, 0.95)
	p2 := PairedTest(append(append([]PairedSample{}, tested...), PairedSample{Shared: Tally{1, 1}}, PairedSample{Shared: Tally{0, 1}}), meanR, 0.95)
	if p2.PRegress != p1.PRegress || p2.Carried != 2 || !near(p2.Interval.Lo, p1.Interval.Lo*10/12, 1e-15) || !near(p2.Delta, p1.Delta*10/12, 1e-15) {
		t.Errorf("with carried samples: %+v, without: %+v", p2, p1)
	}
	if p2.Method != "exact McNemar" {
		t.Errorf("carried samples change the method to %q", p2.Method)
	}
	if p := PairedTest(nil, meanR, 0.95); p.Method != "no samples" || p.Interval != (Interval{-1, 1}) {
		t.Errorf("no samples: %+v", p)
	}
}

// TestExtraAttemptsKeepTheLevel computes, by exact enumeration of every
// outcome of a small decide design under the null, the chance that the
// second look's p-value is at most a, for every a it attains: a valid test
// has P(p ≤ a) ≤ a. Each of 5 samples has one attempt a side; a sample whose
// two attempts disagree (Uncertain) gets 2 more head attempts. Recorded as
// Extra, the test keeps its level; recorded as plain head attempts (the
// naive hypergeometric), it does not.
func TestExtraAttemptsKeepTheLevel(t *testing.T) {
	type outcome struct {
		s PairedSample
		w float64
	}
	for _, prob := range []float64{0.3, 0.5, 0.8} {
		q := 1 - prob
		var per []outcome
		per = append(per, outcome{PairedSample{HeadOnly: Tally{1, 1}, BaseOnly: Tally{1, 1}}, prob * prob})
		per = append(per, outcome{PairedSample{HeadOnly: Tally{0, 1}, BaseOnly: Tally{0, 1}}, q * q})
		for _, hb := range [][2]int{{1, 0}, {0, 1}} {
			for y, wy := range []float64{q * q, 2 * prob * q, prob * prob} {
				per = append(per, outcome{PairedSample{HeadOnly: Tally{hb[0], 1}, BaseOnly: Tally{hb[1], 1}, Extra: Tally{y, 2}}, prob * q * wy})
			}
		}
		const k = 5
		type pw struct{ adj, naive, w float64 }
		var all []pw
		idx := make([]int, k)
		for {
			s := make([]PairedSample, k)
			naive := make([]PairedSample, k)
			w := 1.0
			for i, j := range idx {
				s[i] = per[j].s
				naive[i] = PairedSample{HeadOnly: per[j].s.HeadOnly.Add(per[j].s.Extra), BaseOnly: per[j].s.BaseOnly}
				w *= per[j].w
			}
			all = append(all, pw{PairedTest(s, meanR, 0.95).PRegress, PairedTest(naive, meanR, 0.95).PRegress, w})
			i := 0
			for ; i < k; i++ {
				idx[i]++
				if idx[i] < len(per) {
					break
				}
				idx[i] = 0
			}
			if i == k {
				break
			}
		}
		worst := func(get func(pw) float64) float64 {
			sort.Slice(all, func(i, j int) bool { return get(all[i]) < get(all[j]) })
			var cum, w float64
			for i, a := range all {
				cum += a.w
				if i+1 < len(all) && get(all[i+1]) <= get(a)+1e-12 {
					continue // P(p ≤ a) counts every tie
				}
				if get(a) < 0.5 {
					w = math.Max(w, cum/get(a))
				}
			}
			return w
		}
		worstAdj := worst(func(x pw) float64 { return x.adj })
		worstNaive := worst(func(x pw) float64 { return x.naive })
		if worstAdj > 1+1e-9 {
			t.Errorf("p = %v: with Extra, P(p ≤ a)/a reaches %v > 1", prob, worstAdj)
		}
		t.Logf("p = %v: max of P(p ≤ a)/a over a < 0.5: %.3f with Extra, %.3f naive", prob, worstAdj, worstNaive)
	}
}

func TestJudge(t *testing.T) {
	iv := func(lo, hi float64) Interval { return Interval{lo, hi} }
	for _, c := range []struct {
		name                string
		p                   Paired
		pr, pi, alpha, effN float64
		want                Verdict
	}{
		{"no samples", Paired{}, 0, 1, 0.05, 0.05, Inconclusive},
		{"significant drop beyond min-effect", Paired{Samples: 50, Delta: -0.12, Interval: iv(-0.2, -0.04)}, 0.001, 0.999, 0.05, 0.05, Regressed},
		{"drop exactly min-effect", Paired{Samples: 50, Delta: -0.05, Interval: iv(-0.09, -0.01)}, 0.01, 0.99, 0.05, 0.05, Regressed},
		{"significant but smaller than min-effect, interval inside", Paired{Samples: 900, Delta: -0.03, Interval: iv(-0.045, -0.015)}, 0.001, 0.999, 0.05, 0.05, Unchanged},
		{"significant but smaller than min-effect, interval wide", Paired{Samples: 90, Delta: -0.04, Interval: iv(-0.08, -0.001)}, 0.01, 0.99, 0.05, 0.05, Inconclusive},
		{"p exactly alpha/2 is not significant", Paired{Samples: 50, Delta: -0.1, Interval: iv(-0.2, 0.01)}, 0.025, 0.99, 0.05, 0.05, Inconclusive},
		{"p just under alpha/2", Paired{Samples: 50, Delta: -0.1, Interval: iv(-0.2, -0.001)}, 0.0249, 0.99, 0.05, 0.05, Regressed},
		{"a look's smaller alpha", Paired{Samples: 50, Delta: -0.1, Interval: iv(-0.2, -0.001)}, 0.02, 0.99, 0.0179, 0.05, Inconclusive},
		{"improvement", Paired{Samples: 50, Delta: 0.1, Interval: iv(0.02, 0.2)}, 0.999, 0.003, 0.05, 0.05, Improved},
		{"improvement smaller than min-effect", Paired{Samples: 50, Delta: 0.04, Interval: iv(0.01, 0.09)}, 0.999, 0.003, 0.05, 0.05, Inconclusive},
		{"unchanged: interval inside ±min-effect", Paired{Samples: 400, Delta: 0.0, Interval: iv(-0.04, 0.045)}, 0.5, 0.5, 0.05, 0.05, Unchanged},
		{"interval touches min-effect", Paired{Samples: 400, Delta: 0.0, Interval: iv(-0.05, 0.04)}, 0.5, 0.5, 0.05, 0.05, Unchanged},
		{"interval beyond min-effect", Paired{Samples: 400, Delta: 0.0, Interval: iv(-0.051, 0.04)}, 0.5, 0.5, 0.05, 0.05, Inconclusive},
		{"not significant and wide", Paired{Samples: 20, Delta: -0.1, Interval: iv(-0.3, 0.1)}, 0.2, 0.9, 0.05, 0.05, Inconclusive},
		{"min-effect 0: any significant drop", Paired{Samples: 50, Delta: -0.01, Interval: iv(-0.02, -0.001)}, 0.01, 0.99, 0.05, 0, Regressed},
		{"min-effect 0: unchanged only when every result was carried", Paired{Samples: 50, Carried: 50, Interval: iv(0, 0)}, 1, 1, 0.05, 0, Unchanged},
		{"min-effect 0: a narrow interval is not unchanged", Paired{Samples: 50, Interval: iv(-0.001, 0.001)}, 0.5, 0.5, 0.05, 0, Inconclusive},
		{"Holm-adjusted p given in place of the comparison's", Paired{Samples: 50, Delta: -0.12, Interval: iv(-0.2, -0.04), PRegress: 0.001}, 0.04, 1, 0.05, 0.05, Inconclusive},
	} {
		if got := Judge(c.p, c.pr, c.pi, c.alpha, c.effN); got != c.want {
			t.Errorf("%s: Judge = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestUncertain(t *testing.T) {
	for _, c := range []struct {
		name string
		s    PairedSample
		red  Reducer
		want bool
	}{
		{"concordant pass", PairedSample{HeadOnly: Tally{1, 1}, BaseOnly: Tally{1, 1}}, meanR, false},
		{"concordant fail", PairedSample{HeadOnly: Tally{0, 1}, BaseOnly: Tally{0, 1}}, meanR, false},
		{"discordant", PairedSample{HeadOnly: Tally{0, 1}, BaseOnly: Tally{1, 1}}, meanR, true},
		{"all attempts pass", PairedSample{HeadOnly: Tally{3, 3}, BaseOnly: Tally{3, 3}}, meanR, false},
		{"mixed head", PairedSample{HeadOnly: Tally{2, 3}, BaseOnly: Tally{3, 3}}, meanR, true},
		{"mixed on both, same score", PairedSample{HeadOnly: Tally{2, 3}, BaseOnly: Tally{2, 3}}, meanR, true},
		{"mixed base, reducer all scores both 0", PairedSample{HeadOnly: Tally{0, 3}, BaseOnly: Tally{1, 3}}, allR, true},
		{"every attempt shared", PairedSample{Shared: Tally{1, 2}}, meanR, false},
		{"shared mixed, own attempts agree", PairedSample{Shared: Tally{1, 2}, HeadOnly: Tally{1, 1}, BaseOnly: Tally{1, 1}}, meanR, true},
		{"shared and own all pass", PairedSample{Shared: Tally{2, 2}, HeadOnly: Tally{1, 1}, BaseOnly: Tally{1, 1}}, meanR, false},
		{"extra attempts keep a sample uncertain", PairedSample{HeadOnly: Tally{1, 1}, BaseOnly: Tally{0, 1}, Extra: Tally{2, 2}}, meanR, true},
		{"unequal counts, all fail", PairedSample{HeadOnly: Tally{0, 2}, BaseOnly: Tally{0, 5}}, meanR, false},
	} {
		if got := Uncertain(c.s, c.red); got != c.want {
			t.Errorf("%s: Uncertain = %v, want %v", c.name, got, c.want)
		}
	}
}
