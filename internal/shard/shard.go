// Package shard splits an eval set's work across matrix jobs (--shard i/n):
// a pure, deterministic assignment, balanced by expected cost, that never
// splits units bound together (a group's lane, tasks sharing a lease key).
package shard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// MaxShards bounds n in Parse: far beyond any CI matrix, low enough to catch
// a typo.
const MaxShards = 1024

// Unit is one piece of work in discovery order: usually one attempt or one
// sample ("task/sample").
type Unit struct {
	// Key names the unit; it breaks ties between equal costs, so that the
	// assignment does not depend on where a unit sits in the eval set.
	Key string
	// Cost is the unit's expected cost (seconds from the record's history, or
	// 1 per attempt when there is none). Negative or non-finite costs count as 1.
	Cost float64
	// Bind ties units together: all units with the same non-empty Bind land in
	// the same shard (a group's lane, or every task sharing a lease key).
	Bind string
}

// Parse reads "i/n" (1-based i): "2/4" is the second of four shards.
func Parse(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("parse shard %q: want i/n, e.g. 2/4 for the second of four shards", s)
	}
	i, err = strconv.Atoi(strings.TrimSpace(a))
	if err != nil {
		return 0, 0, fmt.Errorf("parse shard %q: index %q is not a whole number", s, a)
	}
	n, err = strconv.Atoi(strings.TrimSpace(b))
	if err != nil {
		return 0, 0, fmt.Errorf("parse shard %q: count %q is not a whole number", s, b)
	}
	switch {
	case n < 1:
		return 0, 0, fmt.Errorf("parse shard %q: the shard count must be at least 1", s)
	case n > MaxShards:
		return 0, 0, fmt.Errorf("parse shard %q: the shard count must be at most %d", s, MaxShards)
	case i < 1 || i > n:
		return 0, 0, fmt.Errorf("parse shard %q: the index must be between 1 and %d (shards count from 1)", s, n)
	}
	return i, n, nil
}

func unitCost(c float64) float64 {
	if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return 1
	}
	return c
}

type bundle struct {
	key   string // Bind, or the unit's Key when unbound
	first int    // discovery index of its first unit
	units []int
	cost  float64
}

// Assign returns, for each unit, the 0-based index of its shard among n.
// Units sharing a non-empty Bind form one bundle; bundles are placed by a
// greedy longest-processing-time-first rule: heaviest bundle first onto the
// least loaded shard. Ties are broken by key, then discovery order (bundles),
// and by fewer units, then lower index (shards), so the same input always
// gives the same answer. n < 1 is treated as 1.
func Assign(units []Unit, n int) []int {
	out := make([]int, len(units))
	if n <= 1 || len(units) == 0 {
		return out
	}
	byBind := map[string]int{}
	var bundles []*bundle
	for i, u := range units {
		if u.Bind != "" {
			if k, ok := byBind[u.Bind]; ok {
				b := bundles[k]
				b.units = append(b.units, i)
				b.cost += unitCost(u.Cost)
				continue
			}
			byBind[u.Bind] = len(bundles)
		}
		key := u.Key
		if u.Bind != "" {
			key = "\x00" + u.Bind // a bind never ties with a key by accident
		}
		bundles = append(bundles, &bundle{key: key, first: i, units: []int{i}, cost: unitCost(u.Cost)})
	}
	sort.SliceStable(bundles, func(a, b int) bool {
		x, y := bundles[a], bundles[b]
		if x.cost != y.cost {
			return x.cost > y.cost
		}
		if x.key != y.key {
			return x.key < y.key
		}
		return x.first < y.first
	})
	load := make([]float64, n)
	count := make([]int, n)
	for _, b := range bundles {
		best := 0
		for s := 1; s < n; s++ {
			if load[s] < load[best] || (load[s] == load[best] && count[s] < count[best]) {
				best = s
			}
		}
		load[best] += b.cost
		count[best] += len(b.units)
		for _, i := range b.units {
			out[i] = best
		}
	}
	return out
}

// Select returns the discovery-order indexes of the units in shard i of n
// (1-based i, as Parse returns it).
func Select(units []Unit, i, n int) []int {
	var idx []int
	for k, s := range Assign(units, n) {
		if s == i-1 {
			idx = append(idx, k)
		}
	}
	return idx
}

// Loads sums the cost per shard of an assignment (for reports and tests).
func Loads(units []Unit, assignment []int, n int) []float64 {
	load := make([]float64, n)
	for k, s := range assignment {
		load[s] += unitCost(units[k].Cost)
	}
	return load
}
