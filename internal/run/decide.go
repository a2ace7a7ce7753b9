package run

import (
	"fmt"
	"sort"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/shard"
)

// The supervisor's pure decisions: no I/O, no clock, no locks. Each has a
// table test (decide_test.go).

// schedPlan is the plan's attempts to run as scheduler items.
type schedPlan struct {
	items  []sched.Item
	seqOf  []int       // item id -> attempt seq
	itemOf map[int]int // attempt seq -> item id
	order  []int       // item ids in dispatch order: task by task, each in its Order
}

// schedItems turns the attempts that run (carried and skipped ones do not)
// into scheduler items; a local exclusive task's items share one slot.
func schedItems(p *plan.Plan, exclusive []string) schedPlan {
	sp := schedPlan{itemOf: map[int]int{}}
	for _, a := range p.Attempts {
		if a.Action != plan.ActionRun {
			continue
		}
		it := sched.Item{ID: len(sp.items), Task: a.Task, Lane: a.Lane}
		// One at a time per exclusive provider (its name; "" = not exclusive).
		it.Exclusive = exclusive[a.Task]
		sp.itemOf[a.Seq] = it.ID
		sp.items = append(sp.items, it)
		sp.seqOf = append(sp.seqOf, a.Seq)
	}
	for _, t := range p.Tasks {
		for _, seq := range t.Order {
			if id, ok := sp.itemOf[seq]; ok {
				sp.order = append(sp.order, id)
			}
		}
	}
	return sp
}

// budgetFor is the sandbox budget and where it comes from (the PLAN line's
// "from …"): --max-concurrency, then max_sandboxes, then the tightest
// provider default among providers that bound the fleet. An exclusive
// provider bounds nothing but itself, unless every task is exclusive (1).
// 0 is unbounded.
func budgetFor(flag, config int, caps map[string]sandbox.Capacity, allExclusive bool) (int, string) {
	switch {
	case flag > 0:
		return flag, "from flag"
	case config > 0:
		return config, "from config"
	}
	budget, src := 0, "from the providers' defaults"
	names := make([]string, 0, len(caps))
	for n := range caps {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 && caps[names[0]].Source != "" {
		src = "from " + caps[names[0]].Source
	}
	// The tightest default among providers that bound the fleet; an
	// exclusive provider (local) bounds it to 1 only when every task is exclusive.
	for _, n := range names {
		c := caps[n]
		if c.Exclusive {
			if allExclusive && budget == 0 {
				budget, src = 1, "from "+c.Source
			}
			continue
		}
		if c.Limit > 0 && (budget == 0 || c.Limit < budget) {
			budget, src = c.Limit, "from "+c.Source
		}
	}
	if budget == 0 {
		// An elastic provider (kubernetes) says why nothing bounds the fleet.
		for _, n := range names {
			if c := caps[n]; !c.Exclusive && c.Limit == 0 && c.Source != "" {
				src = "from " + c.Source
			}
		}
	}
	return budget, src
}

// shardKey names a shard unit: one sample of one task (its attempts stay together).
type shardKey struct {
	task   int
	sample string
}

// selectShard says which attempts (by seq) shard i of n keeps. A sample's
// attempts stay together; group lanes and tasks sharing a lease key never
// split. Units are balanced by expected cost: hist maps "task/sample#n" to
// the seconds its newest run took; attempts without history cost the mean
// (every attempt costs 1 when there is no history at all).
func selectShard(p *plan.Plan, i, n int, hist map[string]float64) map[int]bool {
	var units []shard.Unit
	unitOf := map[shardKey]int{}
	for _, a := range p.Attempts {
		k := shardKey{a.Task, a.Sample.ID}
		u, ok := unitOf[k]
		if !ok {
			t := p.Tasks[a.Task].Task
			bind := a.Lane
			if t.SharedState.Key != "" {
				bind = "lease:" + t.SharedState.Key
			}
			u = len(units)
			unitOf[k] = u
			units = append(units, shard.Unit{Key: t.Name + "/" + a.Sample.ID, Bind: bind})
		}
		units[u].Cost++
	}
	if len(hist) > 0 {
		var sum float64
		for _, d := range hist {
			sum += d
		}
		mean := sum / float64(len(hist))
		for u := range units {
			units[u].Cost = 0
		}
		for _, a := range p.Attempts {
			d, ok := hist[fmt.Sprintf("%s/%s#%d", p.Tasks[a.Task].Task.Name, a.Sample.ID, a.Number)]
			if !ok {
				d = mean
			}
			units[unitOf[shardKey{a.Task, a.Sample.ID}]].Cost += d
		}
	}
	assign := shard.Assign(units, n)
	keep := map[int]bool{}
	for _, a := range p.Attempts {
		if assign[unitOf[shardKey{a.Task, a.Sample.ID}]] == i-1 {
			keep[a.Seq] = true
		}
	}
	return keep
}

// gatewayBound: requests filled the connection limit while it sat below its
// ceiling, so the provider, not the sample limit, holds work back: more
// samples would only wait at the gateway, and no task climbs.
func gatewayBound(w gateway.Signals) bool {
	return w.Saturated && w.Ceiling > 0 && w.Limit < w.Ceiling
}

// taskSignals are the ramp's per-task signals for one window: a task
// saturated at its cap climbs unless the gateway is the bound; a task is
// budget-bound only when it was not also saturated.
func taskSignals(saturated, budgetBound []bool, errored []int, gwBound bool) []ramp.TaskSignals {
	ts := make([]ramp.TaskSignals, len(saturated))
	for i := range ts {
		ts[i] = ramp.TaskSignals{Saturated: saturated[i] && !gwBound, BudgetBound: budgetBound[i] && !saturated[i], Errored: errored[i]}
	}
	return ts
}
