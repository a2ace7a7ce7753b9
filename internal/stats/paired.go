package stats

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Tally is passes out of judged attempts.
type Tally struct {
	Pass int `json:"passed"`
	N    int `json:"judged"`
}

// Add sums two tallies.
func (t Tally) Add(o Tally) Tally { return Tally{t.Pass + o.Pass, t.N + o.N} }

// PairedSample is one sample judged on both sides. Shared are the attempts
// both sides hold (head carried them from base, or both carried them from
// one run): the same observations, so they enter both sides' scores and are
// never permuted. HeadOnly and BaseOnly are each side's own attempts.
//
// Extra are head attempts added after a look because the sample was
// Uncertain (decide's rounds). They are head's own attempts too, but they
// exist only because the sample's first-look attempts disagreed, and the
// test must know it: under the null that selection makes the first-look
// attempts and the extra ones no longer exchangeable (given a pooled count,
// a sample whose extra attempts all failed is more likely, not less, to
// have had a passing base attempt than a plain hypergeometric draw says).
// PairedTest conditions on the selection; putting such attempts in HeadOnly
// instead would make later looks anti-conservative. Attempts added whatever
// the data (planned attempts, a confirm run of every sample) go in
// HeadOnly.
type PairedSample struct {
	Shared, HeadOnly, BaseOnly Tally
	Extra                      Tally
}

// Head is everything head judged of the sample.
func (s PairedSample) Head() Tally { return s.Shared.Add(s.HeadOnly).Add(s.Extra) }

// own says whether either side has attempts of its own (a sample whose
// every attempt both sides share changes by exactly 0).
func (s PairedSample) own() bool { return s.HeadOnly.N+s.BaseOnly.N+s.Extra.N > 0 }

// Base is everything base judged of the sample.
func (s PairedSample) Base() Tally { return s.Shared.Add(s.BaseOnly) }

// Reducer turns a sample's passes out of judged attempts into its score in
// [0, 1]. It is called only with n ≥ 1.
type Reducer func(pass, n int) float64

// Paired is the paired comparison of head against base over the samples
// both sides judged.
type Paired struct {
	// Samples is how many samples were compared; Carried how many of them
	// head and base share every attempt of (their change is exactly 0);
	// Discordant how many scored differently.
	Samples    int `json:"samples"`
	Carried    int `json:"carried"`
	Discordant int `json:"discordant"`
	// Head and Base are the two sides' rates over these samples.
	Head Rate `json:"head"`
	Base Rate `json:"base"`
	// Delta is head − base (the mean per-sample change) and Interval its
	// confidence interval.
	Delta    float64  `json:"delta"`
	Interval Interval `json:"interval"`
	// PRegress is the one-sided p-value for "head is worse", PImprove for
	// "head is better", under the null that each sample's head and base
	// attempts are exchangeable (nothing changed).
	PRegress float64 `json:"p_regress"`
	PImprove float64 `json:"p_improve"`
	// Method names the test: "exact McNemar", "exact stratified
	// permutation", or "stratified permutation (Monte Carlo, N draws)".
	Method string `json:"method"`
	Draws  int    `json:"draws,omitempty"`
}

// MonteCarloDraws is how many draws the permutation test takes when the
// exact distribution is too large to enumerate.
const MonteCarloDraws = 20000

// stratum is one sample's contribution to the permutation distribution:
// its possible values (head score − base score) and their probabilities.
type stratum struct {
	vals  []float64
	probs []float64
	obs   float64
}

// PairedTest compares head with base sample by sample. Samples must be
// judged on both sides (Head().N ≥ 1 and Base().N ≥ 1).
//
// The test is an exact conditional permutation test stratified by sample:
// under the null, a sample's own head attempts and own base attempts are
// exchangeable, so given how many of them passed, which side holds the
// passes is hypergeometric. When the sample has Extra attempts the
// distribution is also conditioned on the sample having been Uncertain at
// the first look (its pooled first-look attempts disagreed), which is what
// selected it for more attempts: a hypergeometric mixture over the
// first-look pass count, truncated to the counts that would have selected
// it. The statistic is the sum of per-sample score changes, with scores
// from reduce. With one attempt per side and a 0/1 score this is McNemar's
// exact test (only discordant samples can move). The test is exact in the
// sense that its level is at most alpha (a discrete test is conservative),
// for any mix of shared, own and extra attempts and unequal counts; it
// assumes a sample's attempts on one side are independent draws given the
// sample. The distribution is enumerated exactly when the scores lie on a
// grid of step 1/s, s ≤ 2520 (and the convolution is small enough), else
// drawn MonteCarloDraws times from a generator seeded by the
// data (the same data always gives the same p-value), with the (1+k)/(1+B)
// correction that keeps a Monte Carlo p-value valid.
//
// The interval is MOVER (Zou and Donner 2008): each side's Wilson interval
// (RateOf) recovered into an interval for the difference using the
// correlation of per-sample scores (with Newcombe's correction of it); for
// one 0/1 attempt per side it is Newcombe's hybrid score interval for
// paired proportions (his 1998 method 10, which has no continuity
// correction of the Wilson limits; method 11 adds one). Samples whose
// every attempt is shared change by exactly 0 and only scale the interval
// of the rest.
func PairedTest(samples []PairedSample, reduce Reducer, confidence float64) Paired {
	p := Paired{Samples: len(samples), PRegress: 1, PImprove: 1}
	var heads, bases, hNew, bNew []float64
	hAtt, bAtt, hNewAtt, bNewAtt := 0, 0, 0, 0
	var strata []stratum
	mcnemar := true
	for _, s := range samples {
		h, b := s.Head(), s.Base()
		hs, bs := reduce(h.Pass, h.N), reduce(b.Pass, b.N)
		heads, bases = append(heads, hs), append(bases, bs)
		hAtt, bAtt = hAtt+h.N, bAtt+b.N
		if math.Abs(hs-bs) > 1e-12 {
			p.Discordant++
		}
		if !s.own() {
			p.Carried++
			continue
		}
		hNew, bNew = append(hNew, hs), append(bNew, bs)
		hNewAtt, bNewAtt = hNewAtt+h.N, bNewAtt+b.N
		st := strataOf(s, reduce)
		strata = append(strata, st)
		if s.Shared.N != 0 || s.HeadOnly.N != 1 || s.BaseOnly.N != 1 || s.Extra.N != 0 || !binaryReducer(reduce) {
			mcnemar = false
		}
	}
	p.Head = RateOf(heads, hAtt, confidence)
	p.Base = RateOf(bases, bAtt, confidence)
	p.Delta = p.Head.Mean - p.Base.Mean
	if len(samples) == 0 {
		p.Interval, p.Method = Interval{-1, 1}, "no samples"
		return p
	}
	if len(hNew) == 0 {
		p.Interval, p.Method = Interval{0, 0}, "every result carried"
		return p
	}
	frac := float64(len(hNew)) / float64(len(samples))
	lo, hi := mover(hNew, bNew, hNewAtt, bNewAtt, confidence)
	p.Interval = Interval{Lo: math.Max(-1, frac*lo), Hi: math.Min(1, frac*hi)}

	dist, offset, scale, exact := exactDistribution(strata)
	var obs float64
	for _, st := range strata {
		obs += st.obs
	}
	if exact {
		k := int(math.Round(obs * scale))
		var le, ge float64
		for i, q := range dist {
			if v := i + offset; v <= k {
				le += q
			}
			if v := i + offset; v >= k {
				ge += q
			}
		}
		p.PRegress, p.PImprove = math.Min(1, le), math.Min(1, ge)
		p.Method = "exact stratified permutation"
		if mcnemar {
			p.Method = "exact McNemar"
		}
		return p
	}
	p.PRegress, p.PImprove = monteCarlo(strata, obs, MonteCarloDraws, seedOf(samples))
	p.Draws = MonteCarloDraws
	p.Method = "stratified permutation (Monte Carlo)"
	return p
}

// binaryReducer says whether reduce scores a single attempt 0 or 1 (every
// reducer does; a custom one might not).
func binaryReducer(reduce Reducer) bool {
	return reduce(0, 1) == 0 && reduce(1, 1) == 1
}

// strataOf is the permutation distribution of one sample's change: the
// distribution of β, base's own passes, given the sample's pooled own
// passes (and, with Extra attempts, given that the first look selected it).
func strataOf(s PairedSample, reduce Reducer) stratum {
	h1, b, e := s.HeadOnly.N, s.BaseOnly.N, s.Extra.N
	n1 := h1 + b                            // own first-look attempts
	t1 := s.HeadOnly.Pass + s.BaseOnly.Pass // their passes
	total := t1 + s.Extra.Pass              // every own pass
	hN, bN := s.Shared.N+h1+e, s.Shared.N+b
	score := func(beta int) float64 {
		return reduce(s.Shared.Pass+total-beta, hN) - reduce(s.Shared.Pass+beta, bN)
	}
	// selected: the first look's pooled attempts (shared and own) disagree,
	// which is when Uncertain is true and decide adds attempts.
	selected := func(t int) bool {
		pooled := s.Shared.Pass + t
		return pooled > 0 && pooled < s.Shared.N+n1
	}
	truncate := e > 0 && selected(t1)
	st := stratum{obs: score(s.BaseOnly.Pass)}
	blo, bhi := max(0, total-h1-e), min(b, total)
	probs := make([]float64, bhi-blo+1)
	ref := logChoose(n1+e, total) + logChoose(n1, b)
	for t := max(0, total-e); t <= min(n1, total); t++ {
		if truncate && !selected(t) {
			continue
		}
		w := logChoose(n1, t) + logChoose(e, total-t) - ref
		for beta := max(0, t-h1); beta <= min(b, t); beta++ {
			probs[beta-blo] += math.Exp(w + logChoose(t, beta) + logChoose(n1-t, b-beta))
		}
	}
	var sum float64
	for _, q := range probs {
		sum += q
	}
	for i, q := range probs {
		if q > 0 {
			st.vals = append(st.vals, score(blo+i))
			st.probs = append(st.probs, q/sum)
		}
	}
	return st
}

// exactDistribution convolves the strata's distributions when every value,
// multiplied by one small integer scale, is a whole number. It returns the
// probabilities of the sums offset, offset+1, … (in units of 1/scale).
func exactDistribution(strata []stratum) (dist []float64, offset int, scale float64, ok bool) {
	scale, ok = gridScale(strata)
	if !ok {
		return nil, 0, 0, false
	}
	// Bound the work: the convolution costs about width × support per stratum.
	width, work := 1, 0
	for _, st := range strata {
		if len(st.vals) == 1 {
			continue
		}
		lo, hi := minMax(st.vals)
		width += int(math.Round((hi - lo) * scale))
		work += width * len(st.vals)
	}
	if work > 40_000_000 {
		return nil, 0, 0, false
	}
	dist = []float64{1}
	for _, st := range strata {
		if len(st.vals) == 1 { // a sample that cannot move only shifts the sum
			offset += int(math.Round(st.vals[0] * scale))
			continue
		}
		lo, hi := minMax(st.vals)
		ilo, ihi := int(math.Round(lo*scale)), int(math.Round(hi*scale))
		next := make([]float64, len(dist)+ihi-ilo)
		for j, v := range st.vals {
			d := int(math.Round(v*scale)) - ilo
			q := st.probs[j]
			for i, w := range dist {
				if w != 0 {
					next[i+d] += w * q
				}
			}
		}
		dist, offset = next, offset+ilo
	}
	return dist, offset, scale, true
}

// gridScale finds the smallest integer s ≤ 2520 such that every value × s
// is whole: the least common multiple of the values' denominators.
func gridScale(strata []stratum) (float64, bool) {
	const most = 2520
	whole := func(x float64) bool { return math.Abs(x-math.Round(x)) <= 1e-7 }
	seen := map[float64]bool{}
	l := 1
	for _, st := range strata {
		for _, v := range st.vals {
			if seen[v] || whole(v*float64(l)) {
				continue
			}
			seen[v] = true
			d := 1
			for ; d <= most && !whole(v*float64(d)); d++ {
			}
			if d > most {
				return 0, false
			}
			if l = l / gcd(l, d) * d; l > most {
				return 0, false
			}
		}
	}
	return float64(l), true
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func minMax(v []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// monteCarlo draws the permutation distribution of the summed change.
func monteCarlo(strata []stratum, obs float64, draws int, seed uint64) (pRegress, pImprove float64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	type cdf struct {
		vals, cum []float64
	}
	var fixed float64
	var moving []cdf
	for _, st := range strata {
		if len(st.vals) == 1 {
			fixed += st.vals[0]
			continue
		}
		c := cdf{vals: st.vals, cum: make([]float64, len(st.probs))}
		var acc float64
		for i, q := range st.probs {
			acc += q
			c.cum[i] = acc
		}
		moving = append(moving, c)
	}
	const eps = 1e-9
	le, ge := 0, 0
	for range draws {
		sum := fixed
		for _, c := range moving {
			u := rng.Float64() * c.cum[len(c.cum)-1]
			i := 0
			for i < len(c.cum)-1 && c.cum[i] < u {
				i++
			}
			sum += c.vals[i]
		}
		if sum <= obs+eps {
			le++
		}
		if sum >= obs-eps {
			ge++
		}
	}
	return float64(1+le) / float64(1+draws), float64(1+ge) / float64(1+draws)
}

// seedOf hashes the samples' tallies: the same data gives the same draws.
func seedOf(samples []PairedSample) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(v int) {
		for i := range b {
			b[i] = byte(uint64(v) >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, s := range samples {
		for _, t := range []Tally{s.Shared, s.HeadOnly, s.BaseOnly} {
			put(t.Pass)
			put(t.N)
		}
	}
	return h.Sum64()
}

// mover is the MOVER interval for mean(head) − mean(base) over paired
// per-sample scores, with Newcombe's correction of the correlation: the
// cross-product sum Σ(hᵢ − h̄)(bᵢ − b̄) (which is (AD − BC)/n for a 2×2
// table) is lowered by ½ when above ½, set to 0 between 0 and ½ and left
// alone when negative. For 0/1 scores this is Newcombe's (1998) method 10.
func mover(heads, bases []float64, hAtt, bAtt int, confidence float64) (lo, hi float64) {
	h, b := RateOf(heads, hAtt, confidence), RateOf(bases, bAtt, confidence)
	r := correlation(heads, bases)
	d := h.Mean - b.Mean
	l1, u1 := h.Mean-h.Interval.Lo, h.Interval.Hi-h.Mean
	l2, u2 := b.Mean-b.Interval.Lo, b.Interval.Hi-b.Mean
	lo = d - math.Sqrt(math.Max(0, l1*l1+u2*u2-2*r*l1*u2))
	hi = d + math.Sqrt(math.Max(0, u1*u1+l2*l2-2*r*u1*l2))
	return lo, hi
}

// correlation is Newcombe's corrected φ (Pearson's r with the cross-product
// sum shrunk towards 0 by ½, never across it), 0 when either side does not
// vary.
func correlation(x, y []float64) float64 {
	n := float64(len(x))
	if n < 2 {
		return 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx < 1e-15 || syy < 1e-15 {
		return 0
	}
	switch {
	case sxy > 0.5:
		sxy -= 0.5
	case sxy >= 0:
		sxy = 0
	}
	return sxy / math.Sqrt(sxx*syy)
}
