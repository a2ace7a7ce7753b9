package run

import (
	"reflect"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/sandbox"
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

func TestBudgetPrecedence(t *testing.T) {
	docker := sandbox.Capacity{Limit: 8, Source: "docker default: 2 × 4 CPUs"}
	small := sandbox.Capacity{Limit: 3, Source: "small default"}
	local := sandbox.Capacity{Limit: 1, Exclusive: true, Source: "local default"}
	cases := []struct {
		name         string
		flag, config int
		caps         map[string]sandbox.Capacity
		allExclusive bool
		budget       int
		src          string
	}{
		{"flag beats config and providers", 5, 7, map[string]sandbox.Capacity{"docker": docker}, false, 5, "from flag"},
		{"config beats providers", 0, 7, map[string]sandbox.Capacity{"docker": docker}, false, 7, "from config"},
		{"provider default", 0, 0, map[string]sandbox.Capacity{"docker": docker}, false, 8, "from docker default: 2 × 4 CPUs"},
		{"tightest provider wins", 0, 0, map[string]sandbox.Capacity{"docker": docker, "small": small}, false, 3, "from small default"},
		{"exclusive provider bounds nothing else", 0, 0, map[string]sandbox.Capacity{"docker": docker, "local": local}, false, 8, "from docker default: 2 × 4 CPUs"},
		{"every task exclusive: one", 0, 0, map[string]sandbox.Capacity{"local": local}, true, 1, "from local default"},
		{"exclusive provider, some task not: unbounded", 0, 0, map[string]sandbox.Capacity{"local": local}, false, 0, "from local default"},
		{"unlimited provider: unbounded", 0, 0, map[string]sandbox.Capacity{"x": {}}, false, 0, "from the providers' defaults"},
		{"elastic provider says why", 0, 0, map[string]sandbox.Capacity{"kubernetes": {Source: "kubernetes: elastic, no quota"}}, false, 0, "from kubernetes: elastic, no quota"},
		{"no providers known yet (dry)", 0, 0, nil, false, 0, "from the providers' defaults"},
		{"flag with exclusive tasks", 2, 0, map[string]sandbox.Capacity{"local": local}, true, 2, "from flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, src := budgetFor(c.flag, c.config, c.caps, c.allExclusive)
			if b != c.budget || src != c.src {
				t.Fatalf("budgetFor = %d %q, want %d %q", b, src, c.budget, c.src)
			}
		})
	}
}

func TestSelectShard(t *testing.T) {
	tasks := []testTask{
		{name: "a", samples: []string{"s1", "s2", "s3", "s4", "g1", "g2"}, attempts: 2},
		{name: "b", samples: []string{"t1", "t2"}, attempts: 1, lease: "db"},
		{name: "c", samples: []string{"u1"}, attempts: 1, lease: "db"},
	}
	cases := []struct {
		name string
		n    int
		hist map[string]float64
	}{
		{"two shards, no history", 2, nil},
		{"three shards, no history", 3, nil},
		{"two shards, with history", 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100, "a/s2#1": 1}},
		{"more shards than units", 12, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := testPlan(tasks)
			owner := map[int]int{}
			for i := 1; i <= c.n; i++ {
				for seq := range selectShard(p, i, c.n, c.hist) {
					if prev, dup := owner[seq]; dup {
						t.Fatalf("attempt %d kept by shards %d and %d", seq, prev, i)
					}
					owner[seq] = i
				}
			}
			if len(owner) != len(p.Attempts) {
				t.Fatalf("%d of %d attempts kept by some shard", len(owner), len(p.Attempts))
			}
			together := func(what string, same func(a, b *plan.Attempt) bool) {
				for _, a := range p.Attempts {
					for _, b := range p.Attempts {
						if same(a, b) && owner[a.Seq] != owner[b.Seq] {
							t.Errorf("%s split: %s/%s#%d in shard %d, %s/%s#%d in shard %d", what,
								p.Tasks[a.Task].Task.Name, a.Sample.ID, a.Number, owner[a.Seq], p.Tasks[b.Task].Task.Name, b.Sample.ID, b.Number, owner[b.Seq])
						}
					}
				}
			}
			together("sample", func(a, b *plan.Attempt) bool { return a.Task == b.Task && a.Sample.ID == b.Sample.ID })
			together("lane", func(a, b *plan.Attempt) bool { return a.Lane != "" && a.Lane == b.Lane })
			together("lease key", func(a, b *plan.Attempt) bool {
				ka, kb := p.Tasks[a.Task].Task.SharedState.Key, p.Tasks[b.Task].Task.SharedState.Key
				return ka != "" && ka == kb
			})
			// Every shard has work while there are at least as many bound units as shards.
			if c.n <= 3 {
				per := map[int]int{}
				for _, sh := range owner {
					per[sh]++
				}
				if len(per) != c.n {
					t.Errorf("shards with work: %v, want %d", per, c.n)
				}
			}
		})
	}
	// Costly history separates: the 200-second sample gets a shard without the other heavy units.
	p := testPlan(tasks)
	heavy := selectShard(p, 1, 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100})
	other := selectShard(p, 2, 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100})
	in := func(keep map[int]bool) int {
		for seq := range keep {
			if a := p.Attempts[seq]; p.Tasks[a.Task].Task.Name == "a" && a.Sample.ID == "s1" {
				return 1
			}
		}
		return 0
	}
	if in(heavy)+in(other) != 1 {
		t.Fatalf("s1 in %d shards", in(heavy)+in(other))
	}
	small := heavy
	if in(heavy) == 1 {
		small = other
	}
	if len(small) <= len(p.Attempts)/2 {
		t.Errorf("the shard without the 200-second sample keeps %d of %d attempts; balancing by cost should give it most", len(small), len(p.Attempts))
	}
}

func TestGatewayBoundAndTaskSignals(t *testing.T) {
	cases := []struct {
		name string
		w    gateway.Signals
		want bool
	}{
		{"saturated below ceiling", gateway.Signals{Saturated: true, Limit: 4, Ceiling: 8}, true},
		{"saturated at ceiling: the samples are the bound", gateway.Signals{Saturated: true, Limit: 8, Ceiling: 8}, false},
		{"not saturated", gateway.Signals{Limit: 4, Ceiling: 8}, false},
		{"no ceiling (no ramp)", gateway.Signals{Saturated: true, Limit: 4}, false},
	}
	for _, c := range cases {
		if got := gatewayBound(c.w); got != c.want {
			t.Errorf("%s: gatewayBound = %v, want %v", c.name, got, c.want)
		}
	}
	sat := []bool{true, true, false, false}
	bb := []bool{false, true, true, false}
	errs := []int{0, 2, 0, 1}
	free := taskSignals(sat, bb, errs, false)
	want := []ramp.TaskSignals{{Saturated: true}, {Saturated: true, Errored: 2}, {BudgetBound: true}, {Errored: 1}}
	if !reflect.DeepEqual(free, want) {
		t.Errorf("free gateway: %+v, want %+v", free, want)
	}
	bound := taskSignals(sat, bb, errs, true)
	want = []ramp.TaskSignals{{}, {Errored: 2}, {BudgetBound: true}, {Errored: 1}}
	if !reflect.DeepEqual(bound, want) {
		t.Errorf("gateway-bound: %+v, want %+v", bound, want)
	}
}
