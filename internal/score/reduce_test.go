package score

import (
	"math"
	"strings"
	"testing"
)

func TestReducerScore(t *testing.T) {
	// pass_at values: 1 - Fraction(math.comb(n-c, k), math.comb(n, k)),
	// from /usr/bin/python3 internal/stats/testdata/reference.py.
	for _, c := range []struct {
		r       Reducer
		pass, n int
		want    float64
	}{
		{Reducer{}, 2, 3, 2.0 / 3}, // the zero value is mean
		{Reducer{Kind: ReduceMean}, 0, 3, 0},
		{Reducer{Kind: ReduceMean}, 3, 3, 1},
		{Reducer{Kind: ReduceMean}, 1, 4, 0.25},
		{Reducer{Kind: ReduceAll}, 3, 3, 1},
		{Reducer{Kind: ReduceAll}, 2, 3, 0},
		{Reducer{Kind: ReduceAny}, 1, 3, 1},
		{Reducer{Kind: ReduceAny}, 0, 3, 0},
		{Reducer{Kind: ReduceMajority}, 2, 3, 1},
		{Reducer{Kind: ReduceMajority}, 1, 3, 0},
		{Reducer{Kind: ReduceMajority}, 2, 4, 0}, // a tie is not a majority
		{Reducer{Kind: ReduceMajority}, 3, 4, 1},
		{Reducer{Kind: ReduceAtLeast, K: 2}, 2, 5, 1},
		{Reducer{Kind: ReduceAtLeast, K: 2}, 1, 5, 0},
		{Reducer{Kind: ReducePassAt, K: 1}, 2, 5, 0.4},
		{Reducer{Kind: ReducePassAt, K: 2}, 2, 5, 0.7},
		{Reducer{Kind: ReducePassAt, K: 3}, 2, 5, 0.9},
		{Reducer{Kind: ReducePassAt, K: 4}, 2, 5, 1.0},
		{Reducer{Kind: ReducePassAt, K: 5}, 3, 10, 0.9166666666666666},
		{Reducer{Kind: ReducePassAt, K: 2}, 1, 3, 0.6666666666666666},
		{Reducer{Kind: ReducePassAt, K: 2}, 0, 3, 0},
		{Reducer{Kind: ReduceAll}, 0, 0, 0}, // nothing judged scores 0
		{Reducer{Kind: ReduceAny}, 0, 0, 0},
	} {
		if got := c.r.Score(c.pass, c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s.Score(%d, %d) = %v, want %v", c.r, c.pass, c.n, got, c.want)
		}
		if got := c.r.Func()(c.pass, c.n); got != c.r.Score(c.pass, c.n) {
			t.Errorf("%s.Func() disagrees with Score", c.r)
		}
	}
	// With one attempt every reducer scores the attempt (0 or 1): the paired
	// test is then McNemar's.
	for _, r := range []Reducer{{Kind: ReduceMean}, {Kind: ReduceAll}, {Kind: ReduceAny}, {Kind: ReduceMajority}, {Kind: ReduceAtLeast, K: 1}, {Kind: ReducePassAt, K: 1}} {
		if r.Score(0, 1) != 0 || r.Score(1, 1) != 1 {
			t.Errorf("%s scores one attempt %v, %v", r, r.Score(0, 1), r.Score(1, 1))
		}
	}
}

func TestReducerParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Reducer
		str  string
		err  string
	}{
		{"", Default, "mean", ""},
		{"mean", Reducer{Kind: ReduceMean}, "mean", ""},
		{" all ", Reducer{Kind: ReduceAll}, "all", ""},
		{"any", Reducer{Kind: ReduceAny}, "any", ""},
		{"majority", Reducer{Kind: ReduceMajority}, "majority", ""},
		{"at_least: 2", Reducer{Kind: ReduceAtLeast, K: 2}, "at_least: 2", ""},
		{"pass_at:3", Reducer{Kind: ReducePassAt, K: 3}, "pass_at: 3", ""},
		{"pass_at: 0", Reducer{}, "", "needs a whole number"},
		{"at_least", Reducer{}, "", "needs a whole number"},
		{"at_least: two", Reducer{}, "", "needs a whole number"},
		{"mean: 2", Reducer{}, "", "takes no argument"},
		{"median", Reducer{}, "", "unknown reducer"},
	} {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) error %v, want one saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("Parse(%q) = %+v (%q), %v; want %+v (%q)", c.in, got, got.String(), err, c.want, c.str)
		}
		if back, err := Parse(got.String()); err != nil || back.Norm() != got.Norm() {
			t.Errorf("Parse(%q.String()) = %+v, %v", c.in, back, err)
		}
	}
}

func TestReducerCheck(t *testing.T) {
	for _, c := range []struct {
		r        Reducer
		attempts int
		ok       bool
	}{
		{Reducer{}, 1, true},
		{Reducer{Kind: ReduceAll}, 1, true},
		{Reducer{Kind: ReduceAtLeast, K: 2}, 3, true},
		{Reducer{Kind: ReduceAtLeast, K: 3}, 2, false},
		{Reducer{Kind: ReducePassAt, K: 3}, 3, true},
		{Reducer{Kind: ReducePassAt, K: 4}, 3, false},
	} {
		if err := c.r.Check(c.attempts); (err == nil) != c.ok {
			t.Errorf("%s.Check(%d) = %v, want ok %v", c.r, c.attempts, err, c.ok)
		}
	}
	if (Reducer{}).Norm() != Default || Default.Kind != ReduceMean {
		t.Errorf("the default reducer is %+v, want mean", Reducer{}.Norm())
	}
}
