package shard

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		i, n int
	}{{"1/1", 1, 1}, {"2/4", 2, 4}, {" 4/4 ", 4, 4}, {"8 / 8", 8, 8}}
	for _, c := range good {
		i, n, err := Parse(c.in)
		if err != nil || i != c.i || n != c.n {
			t.Errorf("Parse(%q) = %d, %d, %v", c.in, i, n, err)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "want i/n"},
		{"3", "want i/n"},
		{"a/4", `index "a" is not a whole number`},
		{"1/b", `count "b" is not a whole number`},
		{"0/4", "between 1 and 4 (shards count from 1)"},
		{"5/4", "between 1 and 4"},
		{"-1/4", "between 1 and 4"},
		{"1/0", "at least 1"},
		{"1/-2", "at least 1"},
		{"1/99999", "at most 1024"},
		{"1/2/3", `count "2/3" is not a whole number`},
	}
	for _, c := range bad {
		_, _, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "parse shard ") {
			t.Errorf("Parse(%q) error = %v, want it to mention %q", c.in, err, c.msg)
		}
	}
}

// evalSet builds units like a plan would: tasks × samples × attempts, some
// samples in groups, some tasks sharing a lease key, varied costs.
func evalSet(rng *rand.Rand, tasks int) []Unit {
	var units []Unit
	for ti := 0; ti < tasks; ti++ {
		task := fmt.Sprintf("task%02d", ti)
		lease := ""
		if ti%4 == 1 {
			lease = "lease:db" // tasks 1, 5, 9, … share a key
		}
		samples := 1 + rng.Intn(12)
		attempts := 1 + rng.Intn(3)
		for s := 0; s < samples; s++ {
			bind := lease
			if bind == "" && s%5 == 0 && s > 0 {
				bind = fmt.Sprintf("group:%s/g%d", task, s/5)
			}
			for a := 0; a < attempts; a++ {
				units = append(units, Unit{
					Key:  fmt.Sprintf("%s/s%02d#%d", task, s, a+1),
					Cost: float64(1 + rng.Intn(20)),
					Bind: bind,
				})
			}
		}
	}
	return units
}

func TestEveryUnitInExactlyOneShard(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 20; trial++ {
		units := evalSet(rng, 1+rng.Intn(12))
		for n := 1; n <= 8; n++ {
			seen := make([]int, len(units))
			for i := 1; i <= n; i++ {
				for _, k := range Select(units, i, n) {
					seen[k]++
				}
			}
			for k, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d: unit %s is in %d shards", n, units[k].Key, c)
				}
			}
			for k, s := range Assign(units, n) {
				if s < 0 || s >= n {
					t.Fatalf("n=%d: unit %d assigned to shard %d", n, k, s)
				}
			}
		}
	}
}

func TestBoundUnitsNeverSplit(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 20; trial++ {
		units := evalSet(rng, 2+rng.Intn(12))
		for n := 1; n <= 8; n++ {
			a := Assign(units, n)
			where := map[string]int{}
			for k, u := range units {
				if u.Bind == "" {
					continue
				}
				if s, ok := where[u.Bind]; ok && s != a[k] {
					t.Fatalf("n=%d: bind %q split across shards %d and %d", n, u.Bind, s, a[k])
				}
				where[u.Bind] = a[k]
			}
		}
	}
}

func TestBalance(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 50; trial++ {
		units := evalSet(rng, 4+rng.Intn(20))
		// Bundle costs, for the bounds.
		bundles := map[string]float64{}
		for _, u := range units {
			k := u.Bind
			if k == "" {
				k = "unit:" + u.Key
			}
			bundles[k] += u.Cost
		}
		var total, biggest float64
		for _, c := range bundles {
			total += c
			biggest = math.Max(biggest, c)
		}
		for n := 1; n <= 8; n++ {
			loads := Loads(units, Assign(units, n), n)
			var maxLoad, sum float64
			for _, l := range loads {
				maxLoad = math.Max(maxLoad, l)
				sum += l
			}
			if math.Abs(sum-total) > 1e-9 {
				t.Fatalf("loads sum to %v, want %v", sum, total)
			}
			// Greedy placement of the heaviest first is never worse than the
			// average plus one bundle, and never below the lower bound.
			lower := math.Max(total/float64(n), biggest)
			if maxLoad > total/float64(n)+biggest+1e-9 {
				t.Errorf("n=%d: max load %v exceeds average %v + biggest bundle %v", n, maxLoad, total/float64(n), biggest)
			}
			// And within 4/3 of the optimum's lower bound plus one bundle's slack
			// (LPT's guarantee is 4/3 of the optimum).
			if maxLoad > 4.0/3.0*lower+biggest/3+1e-9 {
				t.Errorf("n=%d: max load %v too far above lower bound %v", n, maxLoad, lower)
			}
		}
	}
	// Many equal units split evenly: shards differ by at most one unit.
	units := make([]Unit, 101)
	for i := range units {
		units[i] = Unit{Key: fmt.Sprintf("t/s%03d", i), Cost: 1}
	}
	for n := 1; n <= 8; n++ {
		loads := Loads(units, Assign(units, n), n)
		lo, hi := loads[0], loads[0]
		for _, l := range loads {
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
		if hi-lo > 1 {
			t.Errorf("n=%d: equal units split unevenly: %v", n, loads)
		}
	}
	// Zero-cost units (all carried) still spread by count.
	for i := range units {
		units[i].Cost = 0
	}
	a := Assign(units, 4)
	counts := make([]int, 4)
	for _, s := range a {
		counts[s]++
	}
	for _, c := range counts {
		if c < 25 || c > 26 {
			t.Errorf("zero-cost units by count: %v", counts)
			break
		}
	}
}

func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	units := evalSet(rng, 15)
	for n := 1; n <= 8; n++ {
		first := Assign(units, n)
		for k := 0; k < 5; k++ {
			// A fresh copy: nothing depends on map order or hidden state.
			cp := append([]Unit(nil), units...)
			if got := Assign(cp, n); !reflect.DeepEqual(got, first) {
				t.Fatalf("n=%d: assignment changed between calls", n)
			}
		}
	}
	// Ties are broken by key, not position: reversing equal-cost unbound units
	// keeps each one in its shard.
	var eq []Unit
	for i := 0; i < 12; i++ {
		eq = append(eq, Unit{Key: fmt.Sprintf("k%02d", i), Cost: 2})
	}
	fwd := Assign(eq, 3)
	rev := make([]Unit, len(eq))
	for i := range eq {
		rev[len(eq)-1-i] = eq[i]
	}
	back := Assign(rev, 3)
	for i := range eq {
		if fwd[i] != back[len(eq)-1-i] {
			t.Fatalf("unit %s moved shard when the order changed: %d vs %d", eq[i].Key, fwd[i], back[len(eq)-1-i])
		}
	}
}

func TestBadCostsCountAsOne(t *testing.T) {
	units := []Unit{{Key: "a", Cost: math.NaN()}, {Key: "b", Cost: math.Inf(1)}, {Key: "c", Cost: -3}, {Key: "d", Cost: 1}}
	loads := Loads(units, Assign(units, 2), 2)
	if loads[0] != 2 || loads[1] != 2 {
		t.Errorf("loads %v, want [2 2]", loads)
	}
	if got := Assign(nil, 3); len(got) != 0 {
		t.Errorf("no units: %v", got)
	}
	if got := Assign(units, 0); !reflect.DeepEqual(got, []int{0, 0, 0, 0}) {
		t.Errorf("n=0 treated as 1: %v", got)
	}
}
