package run

import (
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sched"
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
