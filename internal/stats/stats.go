// Package stats holds the statistics the verdict rests on: intervals for
// rates (Wilson, with a design effect for correlated attempts), the paired
// test of head against base (an exact stratified permutation test, which is
// McNemar's exact test when each side has one attempt per sample), an
// interval for the paired change (MOVER), Holm's step-down adjustment,
// alpha spending over a fixed number of looks, and the unbiased pass@k.
//
// Everything is a pure function of its arguments: no clock, no randomness
// that is not seeded from the data, no I/O. The reference values the tests
// check were computed with SciPy and statsmodels (testdata/reference.py).
package stats

import (
	"math"
)

// Interval is a two-sided confidence interval [Lo, Hi].
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// Contains says whether x lies in the interval.
func (i Interval) Contains(x float64) bool { return i.Lo <= x && x <= i.Hi }

// NormalQuantile is the inverse of the standard normal CDF.
func NormalQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// NormalCDF is the standard normal CDF.
func NormalCDF(x float64) float64 {
	return 0.5 * math.Erfc(-x/math.Sqrt2)
}

// Wilson is the Wilson score interval for k successes in n trials at the
// given two-sided confidence (0.95 for 95 %). n may be an effective sample
// size (not a whole number). n ≤ 0 gives [0, 1].
func Wilson(k, n, confidence float64) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	z := NormalQuantile(1 - (1-confidence)/2)
	p := k / n
	z2 := z * z
	den := 1 + z2/n
	centre := (p + z2/(2*n)) / den
	half := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / den
	return Interval{Lo: clamp01(centre - half), Hi: clamp01(centre + half)}
}

func clamp01(x float64) float64 { return math.Min(1, math.Max(0, x)) }

// Rate is the mean of per-sample scores in [0, 1] with its interval.
type Rate struct {
	Mean float64 `json:"rate"`
	// Samples is how many samples were scored; Attempts how many judged
	// attempts their scores came from.
	Samples  int `json:"samples"`
	Attempts int `json:"attempts"`
	// NEff is the effective number of independent trials the interval uses
	// (Samples for one attempt per sample, more when several attempts of a
	// sample disagree, never more than Attempts).
	NEff     float64  `json:"n_eff"`
	Interval Interval `json:"interval"`
}

// RateOf is the rate of per-sample scores (each in [0, 1]) and a
// confidence interval that treats the sample as the unit: a sample's
// attempts are correlated, so the variance is that of the per-sample scores
// (clustered by sample). The interval is Wilson's at the effective sample
// size p(1−p)/Var(mean) (Korn and Graubard's effective n for a clustered
// proportion), which is exactly Wilson(k, n) when every score is 0 or 1 and
// stays inside [0, 1] near the edges. attempts is the number of judged
// attempts behind the scores (it caps the effective n).
func RateOf(scores []float64, attempts int, confidence float64) Rate {
	n := len(scores)
	r := Rate{Samples: n, Attempts: attempts}
	if n == 0 {
		r.Interval = Interval{0, 1}
		return r
	}
	var sum float64
	for _, s := range scores {
		sum += s
	}
	m := sum / float64(n)
	var ss float64
	binary := true
	for _, s := range scores {
		ss += (s - m) * (s - m)
		binary = binary && (s == 0 || s == 1)
	}
	v := ss / float64(n*n) // plug-in variance of the mean
	capN := float64(max(attempts, n))
	neff := float64(n)
	switch {
	case binary:
		// p(1−p)/v is n in exact arithmetic: say so, so that the interval
		// is Wilson(k, n) to the last bit.
	case v > 1e-15:
		neff = m * (1 - m) / v
	case m > 1e-12 && m < 1-1e-12:
		// Every sample has the same fractional score: the attempts are all
		// the information there is.
		neff = capN
	}
	neff = math.Min(math.Max(neff, float64(n)), capN)
	r.Mean, r.NEff = m, neff
	r.Interval = Wilson(m*neff, neff, confidence)
	return r
}

// Holm adjusts p-values for the family-wise error rate by Holm's step-down
// procedure (never less powerful than Bonferroni). The result is in the
// input's order.
func Holm(p []float64) []float64 {
	m := len(p)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	// insertion sort: families are small (one p-value per task)
	for i := 1; i < m; i++ {
		for j := i; j > 0 && p[idx[j]] < p[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	out := make([]float64, m)
	running := 0.0
	for rank, i := range idx {
		adj := math.Min(1, float64(m-rank)*p[i])
		running = math.Max(running, adj)
		out[i] = running
	}
	return out
}

// SpendPocock is the Lan–DeMets Pocock-type alpha-spending function
// α·ln(1 + (e − 1)·t) at information fraction t in [0, 1].
func SpendPocock(alpha, t float64) float64 {
	t = math.Min(1, math.Max(0, t))
	return alpha * math.Log(1+(math.E-1)*t)
}

// FirstLookShare is the share of alpha decide's first look (the planned
// run) spends; the rounds after it share the rest equally.
const FirstLookShare = 0.8

// LookAlpha is the level spent at look j (1-based) of k looks fixed in
// advance: FirstLookShare·alpha at the first (the planned run, which every
// pull request has), and (1 − FirstLookShare)·alpha/(k − 1) at each later
// one (decide's rounds). Testing look j at this level keeps the chance of
// any false alarm over all k looks at most alpha, whatever the dependence
// between looks and whenever one stops (a union bound over levels that sum
// to alpha). One look spends alpha. The simulation (docs/judging.md)
// chose this front-loading over Pocock-type spending (LookAlphaPocock): a
// decide that spends little at the first look loses more power there than
// its rounds win back.
func LookAlpha(alpha float64, j, k int) float64 {
	if k <= 1 {
		return alpha
	}
	if j <= 1 {
		return FirstLookShare * alpha
	}
	return (1 - FirstLookShare) * alpha / float64(k-1)
}

// LookAlphaPocock is the level of look j of k equally spaced looks under
// Pocock-type spending: SpendPocock(j/k) − SpendPocock((j−1)/k).
func LookAlphaPocock(alpha float64, j, k int) float64 {
	if k <= 1 {
		return alpha
	}
	j = min(max(j, 1), k)
	return SpendPocock(alpha, float64(j)/float64(k)) - SpendPocock(alpha, float64(j-1)/float64(k))
}

// PassAtK is the unbiased estimator of pass@k from n attempts with c
// passes (Chen et al. 2021): 1 − C(n−c, k)/C(n, k), as the stable product
// 1 − Π_{i=n−c+1..n} (1 − k/i). It needs n ≥ k; with fewer attempts it is
// the chance that any of the n passed (pass@n).
func PassAtK(n, c, k int) float64 {
	if n <= 0 {
		return 0
	}
	if k > n {
		k = n
	}
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}

// BinomialTail is P(X ≥ x) for X ~ Binomial(n, ½): the exact one-sided
// McNemar p-value for x discordant pairs of one kind out of n.
func BinomialTail(x, n int) float64 {
	if x <= 0 {
		return 1
	}
	if x > n {
		return 0
	}
	var s float64
	for i := x; i <= n; i++ {
		s += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return math.Min(1, s)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
