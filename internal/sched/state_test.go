package sched

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// event-driven simulation over integer time.
type ev struct {
	at   int
	id   int
	kind int // 0 finish, 1 backoff, 2 resume
}
type evq []ev

func (q evq) Len() int { return len(q) }
func (q evq) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}
func (q evq) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *evq) Push(x any)   { *q = append(*q, x.(ev)) }
func (q *evq) Pop() any     { o := *q; x := o[len(o)-1]; *q = o[:len(o)-1]; return x }

// The seed's schedule (002/003): 3 global slots, fast with 6 attempts, slow
// with max_samples 1 and 3 attempts. slow holds one lane throughout, fast
// fills the other two, and slow's attempts never overlap.
func TestSeedSchedule(t *testing.T) {
	var items []Item
	for i := 0; i < 3; i++ { // slow first in discovery order
		items = append(items, Item{ID: len(items), Task: 0})
	}
	for i := 0; i < 6; i++ {
		items = append(items, Item{ID: len(items), Task: 1})
	}
	s, err := New(items, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetBudget(3)
	s.SetSetpoint(0, 1)
	s.SetSetpoint(1, 50)
	s.SetReady(0, true)
	s.SetReady(1, true)
	dur := func(id int) int {
		if items[id].Task == 0 {
			return 4
		}
		return []int{3, 2, 4, 4, 5, 6}[id-3]
	}
	var q evq
	now := 0
	var lanes [][]string
	fill := func() {
		for {
			d, ok := s.Next()
			if !ok {
				return
			}
			heap.Push(&q, ev{at: now + dur(d.ID), id: d.ID})
			lanes = append(lanes, []string{fmt.Sprintf("t=%d", now), taskName(items[d.ID].Task), fmt.Sprint(d.ID)})
		}
	}
	fill()
	slowRunning := 0
	for q.Len() > 0 {
		e := heap.Pop(&q).(ev)
		now = e.at
		if err := s.Finish(e.id); err != nil {
			t.Fatal(err)
		}
		fill()
		// At every instant: slow has at most one running, and executing ≤ 3.
		_, r := s.TaskCounts(0)
		if r > 1 {
			t.Fatalf("slow runs %d at once", r)
		}
		if s.Executing() > 3 {
			t.Fatalf("executing %d > budget 3", s.Executing())
		}
		slowRunning += r
	}
	if !s.Finished() {
		t.Fatal("not finished")
	}
	// The first dispatch round: slow takes one lane, fast two (C7 favours
	// slow: 3 rounds of 1 vs 6 attempts ÷ 50).
	got := fmt.Sprint(lanes[:3])
	if got != "[[t=0 slow 0] [t=0 fast 3] [t=0 fast 4]]" {
		t.Fatalf("first round %s", got)
	}
	// slow's attempts start back to back at 0, 4, 8.
	var slowStarts []string
	for _, l := range lanes {
		if l[1] == "slow" {
			slowStarts = append(slowStarts, l[0])
		}
	}
	if strings.Join(slowStarts, ",") != "t=0,t=4,t=8" {
		t.Fatalf("slow starts %v", slowStarts)
	}
}

func taskName(i int) string { return []string{"slow", "fast"}[i] }

func TestMostRoundsFirst(t *testing.T) {
	// Task 0: 10 items at setpoint 10 (1 round); task 1: 4 items at setpoint 1 (4 rounds).
	var items []Item
	for i := 0; i < 10; i++ {
		items = append(items, Item{ID: len(items), Task: 0})
	}
	for i := 0; i < 4; i++ {
		items = append(items, Item{ID: len(items), Task: 1})
	}
	s, _ := New(items, 2, nil)
	s.SetBudget(2)
	s.SetSetpoint(0, 10)
	s.SetSetpoint(1, 1)
	s.SetReady(0, true)
	s.SetReady(1, true)
	d, _ := s.Next()
	if items[d.ID].Task != 1 {
		t.Fatalf("first slot went to task %d, want the 4-round task", items[d.ID].Task)
	}
	d, _ = s.Next()
	if items[d.ID].Task != 0 {
		t.Fatalf("second slot went to task %d", items[d.ID].Task)
	}
	if _, ok := s.Next(); ok {
		t.Fatal("budget of 2 exceeded")
	}
}

func TestBackoffReleasesBudgetNotTaskSlot(t *testing.T) {
	items := []Item{{ID: 0, Task: 0}, {ID: 1, Task: 0}, {ID: 2, Task: 1}}
	s, _ := New(items, 2, nil)
	s.SetBudget(1)
	s.SetSetpoint(0, 1)
	s.SetSetpoint(1, 1)
	s.SetReady(0, true)
	s.SetReady(1, true)
	d, _ := s.Next()
	if d.ID != 0 {
		t.Fatalf("got %d", d.ID)
	}
	if err := s.Backoff(0); err != nil {
		t.Fatal(err)
	}
	// The budget slot is free: task 1 may use it, task 0's second item may not (its task slot is held).
	d, ok := s.Next()
	if !ok || d.ID != 2 {
		t.Fatalf("after backoff got %v %v, want item 2", d, ok)
	}
	_, running := s.TaskCounts(0)
	if running != 1 {
		t.Fatalf("task 0 running %d, want 1 (in backoff)", running)
	}
	// Item 0 wants its slot back: budget is full, so it waits, and is served first when 2 ends.
	granted, _ := s.Resume(0)
	if granted {
		t.Fatal("resume granted over budget")
	}
	s.Finish(2)
	d, ok = s.Next()
	if !ok || d.ID != 0 || !d.Resume {
		t.Fatalf("got %+v %v, want resume of 0", d, ok)
	}
}

func TestNotReadyHoldsNothing(t *testing.T) {
	items := []Item{{ID: 0, Task: 0}, {ID: 1, Task: 1}}
	s, _ := New(items, 2, nil)
	s.SetBudget(1)
	s.SetSetpoint(0, 5)
	s.SetSetpoint(1, 5)
	s.SetReady(1, true) // task 0 waits for a lease / setup
	d, ok := s.Next()
	if !ok || d.ID != 1 {
		t.Fatalf("got %v %v", d, ok)
	}
	if s.Executing() != 1 {
		t.Fatal("waiting task held a slot")
	}
}

func TestLanesAndExclusive(t *testing.T) {
	items := []Item{
		{ID: 0, Task: 0, Lane: "g1"}, {ID: 1, Task: 0, Lane: "g1"}, {ID: 2, Task: 0, Lane: "g2"}, {ID: 3, Task: 0},
		{ID: 4, Task: 1, Exclusive: "local"}, {ID: 5, Task: 2, Exclusive: "local"},
	}
	s, _ := New(items, 3, nil)
	for i := 0; i < 3; i++ {
		s.SetSetpoint(i, 10)
		s.SetReady(i, true)
	}
	var got []int
	for {
		d, ok := s.Next()
		if !ok {
			break
		}
		got = append(got, d.ID)
	}
	sort.Ints(got)
	// g1's second member waits behind its first; a slow lane does not block
	// item 2 or 3; the exclusive provider admits one of 4 and 5.
	if fmt.Sprint(got) != "[0 2 3 4]" {
		t.Fatalf("dispatched %v", got)
	}
	s.Finish(0)
	s.Finish(4)
	var more []int
	for {
		d, ok := s.Next()
		if !ok {
			break
		}
		more = append(more, d.ID)
	}
	sort.Ints(more)
	if fmt.Sprint(more) != "[1 5]" {
		t.Fatalf("second round %v", more)
	}
}

// TestRandomized drives thousands of items with random durations, setpoints
// changed mid-run, random gates, lanes, exclusivity and backoffs, and checks
// every invariant at every event.
func TestRandomized(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed, 3000) })
	}
}

func randomRun(t *testing.T, seed int64, n int) {
	r := rand.New(rand.NewSource(seed))
	nt := 1 + r.Intn(6)
	items := make([]Item, n)
	for i := range items {
		it := Item{ID: i, Task: r.Intn(nt)}
		if r.Intn(5) == 0 {
			it.Lane = fmt.Sprintf("lane%d", r.Intn(8))
		}
		if it.Task == 0 && r.Intn(2) == 0 {
			it.Exclusive = "local"
		}
		items[i] = it
	}
	s, err := New(items, nt, nil)
	if err != nil {
		t.Fatal(err)
	}
	budget := 1 + r.Intn(40)
	s.SetBudget(budget)
	for i := 0; i < nt; i++ {
		s.SetSetpoint(i, 1+r.Intn(30))
		s.SetReady(i, r.Intn(4) != 0)
	}
	closed := map[string]bool{}
	s.AddGate(func(it Item) bool { return !closed[it.Lane] })
	var q evq
	now := 0
	ord := NewOrdered[int]()
	var released []int
	prevExec := 0
	check := func() {
		// Lowering the budget never interrupts running work, so executing may
		// sit above a just-lowered budget, but it must never grow while it does.
		if s.budget > 0 && s.Executing() > s.budget && s.Executing() > prevExec {
			t.Fatalf("executing %d > budget %d and growing", s.Executing(), s.budget)
		}
		prevExec = s.Executing()
		lanes := map[string]int{}
		excl := 0
		backoff := 0
		running := 0
		for id, p := range s.phase {
			switch p {
			case Running, Backoff, Resuming:
				running++
				if p != Running {
					backoff++
				}
				if items[id].Lane != "" {
					lanes[items[id].Lane]++
				}
				if items[id].Exclusive != "" {
					excl++
				}
			}
		}
		for l, c := range lanes {
			if c > 1 {
				t.Fatalf("lane %s has %d in flight", l, c)
			}
		}
		if excl > 1 {
			t.Fatalf("exclusive provider has %d in flight", excl)
		}
		if running-backoff != s.Executing() {
			t.Fatalf("executing %d but %d hold slots", s.Executing(), running-backoff)
		}
		// Queued items hold nothing: every held lane belongs to an in-flight item.
		for l, id := range s.lanes {
			if p := s.phase[id]; p == Queued || p == Done || p == Cancelled || items[id].Lane != l {
				t.Fatalf("lane %s held by item %d in phase %s", l, id, p)
			}
		}
	}
	fill := func() {
		for {
			d, ok := s.Next()
			if !ok {
				return
			}
			it := items[d.ID]
			if s.Executing() > s.budget {
				t.Fatalf("dispatch took executing to %d over budget %d", s.Executing(), s.budget)
			}
			if !d.Resume {
				if _, running := s.TaskCounts(it.Task); running > s.Setpoint(it.Task) {
					t.Fatalf("task %d running %d > setpoint %d at dispatch", it.Task, running, s.Setpoint(it.Task))
				}
				if !s.tasks[it.Task].ready || closed[it.Lane] {
					t.Fatalf("dispatched item %d past a closed gate", d.ID)
				}
			}
			if !d.Resume && r.Intn(6) == 0 {
				heap.Push(&q, ev{at: now + 1 + r.Intn(5), id: d.ID, kind: 1})
			} else {
				heap.Push(&q, ev{at: now + 1 + r.Intn(20), id: d.ID})
			}
			check()
		}
	}
	fill()
	for steps := 0; !s.Finished(); steps++ {
		if steps > 50*n {
			t.Fatal("no progress")
		}
		// Random control moves between events.
		switch r.Intn(12) {
		case 0:
			s.SetSetpoint(r.Intn(nt), r.Intn(30))
		case 1:
			s.SetReady(r.Intn(nt), true)
		case 2:
			l := fmt.Sprintf("lane%d", r.Intn(8))
			closed[l] = !closed[l]
		case 3:
			s.SetBudget(1 + r.Intn(40))
		}
		if q.Len() == 0 {
			// Nothing in flight: open everything so the run can end.
			for i := 0; i < nt; i++ {
				s.SetReady(i, true)
				if s.Setpoint(i) == 0 {
					s.SetSetpoint(i, 1)
				}
			}
			closed = map[string]bool{}
			fill()
			if q.Len() == 0 && !s.Finished() {
				t.Fatalf("stuck with nothing in flight: %v", s.Counts())
			}
			continue
		}
		e := heap.Pop(&q).(ev)
		now = e.at
		switch e.kind {
		case 0:
			if err := s.Finish(e.id); err != nil {
				t.Fatal(err)
			}
			released = append(released, ord.Add(e.id, e.id)...)
		case 1:
			if err := s.Backoff(e.id); err != nil {
				t.Fatal(err)
			}
			heap.Push(&q, ev{at: now + 1 + r.Intn(5), id: e.id, kind: 2})
		case 2:
			ok, err := s.Resume(e.id)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				heap.Push(&q, ev{at: now + 1 + r.Intn(10), id: e.id})
			}
			// Otherwise Next hands it back with Resume set, and fill schedules its end.
		}
		check()
		fill()
	}
	if len(released) != n {
		t.Fatalf("released %d of %d results", len(released), n)
	}
	for i, id := range released {
		if id != i {
			t.Fatalf("result %d released at position %d: not discovery order", id, i)
		}
	}
}

func TestDispatcherBackoffResume(t *testing.T) {
	items := []Item{{ID: 0, Task: 0}, {ID: 1, Task: 0}, {ID: 2, Task: 0}}
	s, _ := New(items, 1, nil)
	s.SetBudget(1)
	s.SetSetpoint(0, 3)
	s.SetReady(0, true)
	d := NewDispatcher(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan int, 3)
	go d.Run(ctx, func(it Item) { started <- it.ID })
	first := <-started
	if err := d.Backoff(first); err != nil {
		t.Fatal(err)
	}
	second := <-started // the freed budget slot goes to new work
	resumed := make(chan error, 1)
	go func() { resumed <- d.Resume(ctx, first) }()
	for waiting := false; !waiting; {
		d.With(func(s *State) { waiting = s.Phase(first) == Resuming })
		runtime.Gosched()
	}
	select {
	case <-resumed:
		t.Fatal("resumed while the budget is full")
	default:
	}
	d.Finish(second)
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	d.Finish(first)
	third := <-started
	d.Finish(third)
}
