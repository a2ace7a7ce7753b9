package stats

import (
	"math"
	"testing"
)

// The reference values in these tables were computed once with Debian's
// python3 (SciPy 1.10.1, statsmodels 0.13.5):
//
//	/usr/bin/python3 internal/stats/testdata/reference.py
//
// and copied from its output.

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestWilson(t *testing.T) {
	// statsmodels.stats.proportion.proportion_confint(k, n, alpha=1-conf, method="wilson")
	for _, c := range []struct{ k, n, conf, lo, hi float64 }{
		{0.0, 10.0, 0.95, 0.0, 0.2775327998628892},
		{10.0, 10.0, 0.95, 0.7224672001371107, 0.9999999999999999},
		{0.0, 1.0, 0.95, 0.0, 0.7934506856227626},
		{1.0, 1.0, 0.95, 0.20654931437723745, 1.0},
		{3.0, 7.0, 0.95, 0.15821985525146975, 0.7495416354723428},
		{31.0, 40.0, 0.95, 0.6249690325768998, 0.8768390867645927},
		{32.0, 40.0, 0.95, 0.652426936536005, 0.895000102745623},
		{1.0, 20.0, 0.9, 0.011234816850851634, 0.19600723677401644},
		{19.0, 20.0, 0.99, 0.6817028880857628, 0.9941022509253589},
		{250.0, 500.0, 0.95, 0.4563412653024843, 0.5436587346975157},
		{2.5, 7.5, 0.95, 0.10968574550953841, 0.6698840576767686},
		{59.0, 61.3, 0.95, 0.8816025236829956, 0.9888108969938463},
		{0.0, 2.7, 0.95, 0.0, 0.58724803228013},
		{4.2, 4.2, 0.8, 0.7188857990869282, 1.0},
	} {
		got := Wilson(c.k, c.n, c.conf)
		if !near(got.Lo, c.lo, 1e-12) || !near(got.Hi, c.hi, 1e-12) {
			t.Errorf("Wilson(%v, %v, %v) = %+v, want [%v, %v]", c.k, c.n, c.conf, got, c.lo, c.hi)
		}
	}
	if got := Wilson(0, 0, 0.95); got != (Interval{0, 1}) {
		t.Errorf("Wilson(0, 0) = %+v, want [0, 1]", got)
	}
}

func TestNormalQuantile(t *testing.T) {
	// scipy.stats.norm.ppf(p)
	for _, c := range []struct{ p, z float64 }{
		{0.5, 0.0},
		{0.975, 1.959963984540054},
		{0.995, 2.5758293035489004},
		{0.95, 1.6448536269514722},
		{0.9, 1.2815515655446004},
		{0.025, -1.9599639845400545},
		{0.001, -3.090232306167813},
		{1e-06, -4.753424308822899},
		{0.999999, 4.753424308817087},
	} {
		if got := NormalQuantile(c.p); !near(got, c.z, 1e-9) {
			t.Errorf("NormalQuantile(%v) = %v, want %v", c.p, got, c.z)
		}
		if got := NormalCDF(c.z); !near(got, c.p, 1e-12) {
			t.Errorf("NormalCDF(%v) = %v, want %v", c.z, got, c.p)
		}
	}
}

func TestBinomialTail(t *testing.T) {
	// scipy.stats.binomtest(x, n, 0.5, alternative="greater").pvalue
	for _, c := range []struct {
		x, n int
		p    float64
	}{
		{0, 5, 1.0},
		{1, 1, 0.5},
		{5, 5, 0.03125},
		{3, 5, 0.5},
		{7, 10, 0.171875},
		{12, 14, 0.0064697265625},
		{1, 20, 0.9999990463256836},
		{30, 40, 0.0011107168866146822},
		{60, 100, 0.02844396682049044},
		{0, 0, 1.0},
	} {
		if got := BinomialTail(c.x, c.n); !near(got, c.p, 1e-12*math.Max(1, c.p)) {
			t.Errorf("BinomialTail(%d, %d) = %v, want %v", c.x, c.n, got, c.p)
		}
	}
	if got := BinomialTail(6, 5); got != 0 {
		t.Errorf("BinomialTail(6, 5) = %v, want 0", got)
	}
}

func TestHolm(t *testing.T) {
	// statsmodels.stats.multitest.multipletests(p, method="holm")[1]
	for _, c := range []struct{ p, adj []float64 }{
		{[]float64{0.01, 0.04, 0.03, 0.005}, []float64{0.03, 0.06, 0.06, 0.02}},
		{[]float64{0.5}, []float64{0.5}},
		{[]float64{0.02, 0.02, 0.9}, []float64{0.06, 0.06, 0.9}},
		{[]float64{0.001, 0.2, 0.04, 0.04, 0.3, 0.011}, []float64{0.006, 0.4, 0.16, 0.16, 0.4, 0.05499999999999999}},
		{[]float64{0.6, 0.7, 0.01}, []float64{1.0, 1.0, 0.03}},
	} {
		got := Holm(c.p)
		for i := range c.adj {
			if !near(got[i], c.adj[i], 1e-12) {
				t.Errorf("Holm(%v) = %v, want %v", c.p, got, c.adj)
				break
			}
		}
	}
	if got := Holm(nil); len(got) != 0 {
		t.Errorf("Holm(nil) = %v", got)
	}
}

func TestPassAtK(t *testing.T) {
	// 1 - Fraction(math.comb(n-c, k), math.comb(n, k))
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{1, 0, 1, 0.0},
		{1, 1, 1, 1.0},
		{5, 0, 1, 0.0},
		{5, 2, 1, 0.4},
		{5, 2, 2, 0.7},
		{5, 2, 3, 0.9},
		{5, 2, 4, 1.0},
		{10, 3, 5, 0.9166666666666666},
		{10, 9, 2, 1.0},
		{3, 1, 2, 0.6666666666666666},
		{200, 7, 10, 0.3055988116177335},
		{20, 0, 5, 0.0},
	} {
		if got := PassAtK(c.n, c.c, c.k); !near(got, c.want, 1e-12) {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", c.n, c.c, c.k, got, c.want)
		}
	}
	// Fewer attempts than k: pass@n, the chance any of the n passed.
	if got := PassAtK(2, 1, 5); got != 1 {
		t.Errorf("PassAtK(2, 1, 5) = %v, want 1", got)
	}
	if got := PassAtK(2, 0, 5); got != 0 {
		t.Errorf("PassAtK(2, 0, 5) = %v, want 0", got)
	}
	if got := PassAtK(0, 0, 1); got != 0 {
		t.Errorf("PassAtK(0, 0, 1) = %v, want 0", got)
	}
}

func TestSpending(t *testing.T) {
	// alpha * math.log(1 + (math.e - 1) * t)
	for _, c := range []struct{ alpha, t, want float64 }{
		{0.05, 0.0, 0.0},
		{0.05, 0.25, 0.01786870097543942},
		{0.05, 0.5, 0.031005725347913876},
		{0.05, 1.0, 0.05},
		{0.1, 0.3333333333333333, 0.04528324252639413},
		{0.05, 1.5, 0.05}, // t is clipped to [0, 1]
		{0.05, -1, 0},
	} {
		if got := SpendPocock(c.alpha, c.t); !near(got, c.want, 1e-15) {
			t.Errorf("SpendPocock(%v, %v) = %v, want %v", c.alpha, c.t, got, c.want)
		}
	}
	want := []float64{0.01786870097543942, 0.013137024372474455, 0.010393721614229613, 0.008600553037856512}
	var sum float64
	for j := 1; j <= 4; j++ {
		got := LookAlphaPocock(0.05, j, 4)
		if !near(got, want[j-1], 1e-15) {
			t.Errorf("LookAlphaPocock(0.05, %d, 4) = %v, want %v", j, got, want[j-1])
		}
		sum += got
	}
	if !near(sum, 0.05, 1e-15) {
		t.Errorf("the looks spend %v in all, want 0.05", sum)
	}
	for _, k := range []int{2, 3, 5, 10} {
		var s, sp float64
		for j := 1; j <= k; j++ {
			s += LookAlpha(0.1, j, k)
			sp += LookAlphaPocock(0.1, j, k)
		}
		if !near(s, 0.1, 1e-15) || !near(sp, 0.1, 1e-15) {
			t.Errorf("the looks over %d looks sum to %v (front-loaded) and %v (Pocock), want 0.1", k, s, sp)
		}
	}
	// Front-loaded: 0.04 at the first of four looks, 0.01/3 at each later one.
	for j, want := range []float64{0.04, 0.01 / 3, 0.01 / 3, 0.01 / 3} {
		if got := LookAlpha(0.05, j+1, 4); !near(got, want, 1e-15) {
			t.Errorf("LookAlpha(0.05, %d, 4) = %v, want %v", j+1, got, want)
		}
	}
	if got := LookAlpha(0.05, 1, 1); got != 0.05 {
		t.Errorf("one look spends %v, want 0.05", got)
	}
}

func TestRateOfBinaryIsWilson(t *testing.T) {
	for _, c := range []struct{ k, n, perSample int }{
		{0, 10, 1}, {10, 10, 1}, {1, 1, 1}, {0, 1, 1}, {31, 40, 1}, {7, 13, 1},
		{31, 40, 3}, {1, 20, 3}, {19, 20, 5}, {250, 500, 3}, // 0/1 scores from several attempts (reducer all/any/...)
	} {
		scores := make([]float64, c.n)
		for i := range c.k {
			scores[i] = 1
		}
		got := RateOf(scores, c.n*c.perSample, 0.95)
		want := Wilson(float64(c.k), float64(c.n), 0.95)
		if got.Interval != want || got.NEff != float64(c.n) || got.Mean != float64(c.k)/float64(c.n) {
			t.Errorf("RateOf(%d of %d, %d attempts) = %+v, want Wilson %+v exactly", c.k, c.n, c.n*c.perSample, got, want)
		}
	}
	if got := RateOf(nil, 0, 0.95); got.Interval != (Interval{0, 1}) || got.Samples != 0 {
		t.Errorf("RateOf(nil) = %+v", got)
	}
}

func TestRateOfClustered(t *testing.T) {
	// testdata/reference.py rate_of: the documented formula in Python, the
	// interval from statsmodels' Wilson at the effective n.
	for _, c := range []struct {
		passes             []int
		k                  int
		mean, neff, lo, hi float64
	}{
		{[]int{3, 2, 3, 0, 1, 3, 3, 2}, 3, 0.7083333333333334, 13.40845070422535, 0.4424836143030215, 0.8813937052865708},
		{[]int{3, 3, 3, 3, 3, 3, 3, 3, 3, 2}, 3, 0.9666666666666666, 30.0, 0.8332960900859081, 0.9940914096183875},
		{[]int{1, 1, 2, 1, 1}, 2, 0.6, 10.0, 0.31267376973365824, 0.8318196702937638},
		{[]int{0, 0, 0, 1, 0, 0}, 5, 0.03333333333333333, 30.0, 0.005908590381612455, 0.16670390991409173},
		{[]int{2, 2, 2}, 4, 0.5, 12.0, 0.2537815976337061, 0.7462184023662939},
	} {
		scores := make([]float64, len(c.passes))
		for i, p := range c.passes {
			scores[i] = float64(p) / float64(c.k)
		}
		got := RateOf(scores, c.k*len(c.passes), 0.95)
		if !near(got.Mean, c.mean, 1e-12) || !near(got.NEff, c.neff, 1e-9) || !near(got.Interval.Lo, c.lo, 1e-9) || !near(got.Interval.Hi, c.hi, 1e-9) {
			t.Errorf("RateOf(%v / %d) = %+v, want mean %v n_eff %v [%v, %v]", c.passes, c.k, got, c.mean, c.neff, c.lo, c.hi)
		}
		if got.NEff < float64(got.Samples) || got.NEff > float64(got.Attempts) {
			t.Errorf("n_eff %v outside [samples %d, attempts %d]", got.NEff, got.Samples, got.Attempts)
		}
	}
}
