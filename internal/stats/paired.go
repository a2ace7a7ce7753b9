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
type PairedSample struct {
	Shared, HeadOnly, BaseOnly Tally
}

// Head is everything head judged of the sample.
func (s PairedSample) Head() Tally { return s.Shared.Add(s.HeadOnly) }

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
// passes is hypergeometric. The statistic is the sum of per-sample score
// changes, with scores from reduce. With one attempt per side and a 0/1
// score this is McNemar's exact test (only discordant samples can move).
// The distribution is enumerated exactly when the scores lie on a small
// grid, else drawn MonteCarloDraws times from a generator seeded by the
// data (the same data always gives the same p-value), with the (1+k)/(1+B)
// correction that keeps a Monte Carlo p-value valid.
//
// The interval is MOVER (Zou and Donner 2008): each side's Wilson interval
// (RateOf) recovered into an interval for the difference using the
// correlation of per-sample scores; for one 0/1 attempt per side it is
// Newcombe's hybrid score interval for paired proportions (his method 10,
// without a continuity correction). Samples whose every attempt is shared
// change by exactly 0 and only scale the interval of the rest.
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
		if s.HeadOnly.N == 0 && s.BaseOnly.N == 0 {
			p.Carried++
			continue
		}
		hNew, bNew = append(hNew, hs), append(bNew, bs)
		hNewAtt, bNewAtt = hNewAtt+h.N, bNewAtt+b.N
		st := strataOf(s, reduce)
		strata = append(strata, st)
		if s.Shared.N != 0 || s.HeadOnly.N != 1 || s.BaseOnly.N != 1 || !binaryReducer(reduce) {
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

// strataOf is the permutation distribution of one sample's change.
func strataOf(s PairedSample, reduce Reducer) stratum {
	h, b := s.HeadOnly.N, s.BaseOnly.N
	total, passes := h+b, s.HeadOnly.Pass+s.BaseOnly.Pass
	score := func(x int) float64 {
		return reduce(s.Shared.Pass+x, s.Shared.N+h) - reduce(s.Shared.Pass+passes-x, s.Shared.N+b)
	}
	st := stratum{obs: score(s.HeadOnly.Pass)}
	lo, hi := max(0, passes-b), min(h, passes)
	for x := lo; x <= hi; x++ {
		lp := logChoose(passes, x) + logChoose(total-passes, h-x) - logChoose(total, h)
		st.vals = append(st.vals, score(x))
		st.probs = append(st.probs, math.Exp(lp))
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
		lo, hi := minMax(st.vals)
		width += int(math.Round((hi - lo) * scale))
		work += width * len(st.vals)
	}
	if work > 40_000_000 {
		return nil, 0, 0, false
	}
	dist = []float64{1}
	for _, st := range strata {
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

// gridScale finds a small integer s such that every value × s is whole.
func gridScale(strata []stratum) (float64, bool) {
	whole := func(s float64) bool {
		for _, st := range strata {
			for _, v := range st.vals {
				x := v * s
				if math.Abs(x-math.Round(x)) > 1e-7 {
					return false
				}
			}
		}
		return true
	}
	for _, s := range []float64{1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30, 40, 60, 120, 360, 840, 2520} {
		if whole(s) {
			return s, true
		}
	}
	return 0, false
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
// per-sample scores.
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

// correlation is Pearson's r, 0 when either side does not vary.
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
	return sxy / math.Sqrt(sxx*syy)
}
