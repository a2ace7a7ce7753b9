package run

import (
	"reflect"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sched"
)

// testPlan builds a plan by hand: per task, its samples (each with attempts
// attempts, seq in discovery order), lanes for samples named "g*" and a
// lease key when given. Order is discovery order unless reorder says.
func testPlan(tasks []testTask) *plan.Plan {
	p := &plan.Plan{}
	for ti, tt := range tasks {
		t := &plan.Task{Index: ti, Task: &evalset.Task{Name: tt.name}}
		t.Task.SharedState.Key = tt.lease
		p.Tasks = append(p.Tasks, t)
		for _, sid := range tt.samples {
			s := &evalset.Sample{ID: sid}
			for n := 1; n <= tt.attempts; n++ {
				a := &plan.Attempt{Seq: len(p.Attempts), Task: ti, Sample: s, Number: n, Action: plan.ActionRun}
				if sid[0] == 'g' {
					a.Lane = tt.name + "/g"
				}
				if tt.carried[sid] {
					a.Action = plan.ActionCarry
				}
				p.Attempts = append(p.Attempts, a)
				t.Order = append(t.Order, a.Seq)
			}
		}
		if tt.reverse {
			for i, j := 0, len(t.Order)-1; i < j; i, j = i+1, j-1 {
				t.Order[i], t.Order[j] = t.Order[j], t.Order[i]
			}
		}
	}
	return p
}

type testTask struct {
	name     string
	samples  []string
	attempts int
	lease    string
	carried  map[string]bool
	reverse  bool
}

func TestSchedItems(t *testing.T) {
	cases := []struct {
		name      string
		tasks     []testTask
		exclusive []string
		items     []sched.Item
		seqOf     []int
		order     []int
	}{
		{
			name:      "one task, every attempt runs",
			tasks:     []testTask{{name: "a", samples: []string{"x", "y"}, attempts: 1}},
			exclusive: []string{""},
			items:     []sched.Item{{ID: 0, Task: 0}, {ID: 1, Task: 0}},
			seqOf:     []int{0, 1},
			order:     []int{0, 1},
		},
		{
			name:      "carried attempts get no item; seqs keep their gaps",
			tasks:     []testTask{{name: "a", samples: []string{"x", "y", "z"}, attempts: 1, carried: map[string]bool{"y": true}}},
			exclusive: []string{""},
			items:     []sched.Item{{ID: 0, Task: 0}, {ID: 1, Task: 0}},
			seqOf:     []int{0, 2},
			order:     []int{0, 1},
		},
		{
			name: "local exclusive task shares one slot; lanes kept; order per task from Order",
			tasks: []testTask{
				{name: "a", samples: []string{"x"}, attempts: 2},
				{name: "b", samples: []string{"g1", "y"}, attempts: 1, reverse: true},
			},
			exclusive: []string{"local", ""},
			items: []sched.Item{
				{ID: 0, Task: 0, Exclusive: "local"}, {ID: 1, Task: 0, Exclusive: "local"},
				{ID: 2, Task: 1, Lane: "b/g"}, {ID: 3, Task: 1},
			},
			seqOf: []int{0, 1, 2, 3},
			order: []int{0, 1, 3, 2},
		},
		{
			name:      "nothing to run",
			tasks:     []testTask{{name: "a", samples: []string{"x"}, attempts: 1, carried: map[string]bool{"x": true}}},
			exclusive: []string{"local"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := testPlan(c.tasks)
			got := schedItems(p, c.exclusive)
			if !reflect.DeepEqual(got.items, c.items) || !reflect.DeepEqual(got.seqOf, c.seqOf) || !reflect.DeepEqual(got.order, c.order) {
				t.Fatalf("items %+v seqOf %v order %v\nwant %+v seqOf %v order %v", got.items, got.seqOf, got.order, c.items, c.seqOf, c.order)
			}
			for id, seq := range got.seqOf {
				if got.itemOf[seq] != id {
					t.Errorf("itemOf[%d] = %d, want %d", seq, got.itemOf[seq], id)
				}
			}
			if len(got.itemOf) != len(got.items) {
				t.Errorf("itemOf has %d entries for %d items", len(got.itemOf), len(got.items))
			}
		})
	}
}
