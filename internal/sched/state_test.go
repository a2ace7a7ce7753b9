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
	s.SetCap(0, 1)
	s.SetCap(1, 50)
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
	s.SetCap(0, 10)
	s.SetCap(1, 1)
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
	s.SetCap(0, 1)
	s.SetCap(1, 1)
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
	s.SetCap(0, 5)
	s.SetCap(1, 5)
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
		s.SetCap(i, 10)
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

// TestRandomized drives thousands of items with random durations, caps and
// the budget changed mid-run, tasks waiting (for a lease, max_tasks, setup)
// and becoming ready, lanes, exclusivity, sandboxes starting,
// and any number of concurrent backoffs per item, and checks every invariant
// at every event (see checkInvariants).
func TestRandomized(t *testing.T) {
	seeds := int64(40)
	if raceDetector {
		seeds = 4 // one goroutine: the race detector has nothing to find here
	}
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed, 2000) })
	}
}

// checkInvariants checks what must hold after every event:
//   - the setpoints never add up to more than the budget;
//   - a task that cannot run (not ready, or finished) holds no setpoint;
//   - at most one item per lane and per exclusive key is in flight;
//   - the budget slots in use are exactly the Running items;
//   - starting + running = admitted, per task;
//   - when settled (Next said no): no idle budget slot while a ready task
//     below its cap has an admissible queued item.
func checkInvariants(t *testing.T, s *State, settled bool) {
	t.Helper()
	sum := 0
	for i := range s.tasks {
		sp := s.Setpoint(i)
		sum += sp
		if sp < 0 {
			t.Fatalf("task %d setpoint %d", i, sp)
		}
		if (!s.tasks[i].ready || s.TaskFinished(i)) && sp != 0 {
			t.Fatalf("task %d holds setpoint %d while it cannot run (ready %v)", i, sp, s.tasks[i].ready)
		}
		l := s.TaskLive(i)
		if _, adm := s.TaskCounts(i); l.Starting+l.Running != adm || l.Starting < 0 {
			t.Fatalf("task %d: starting %d + running %d != admitted %d", i, l.Starting, l.Running, adm)
		}
	}
	if s.budget > 0 && sum > s.budget {
		t.Fatalf("setpoints add up to %d, over the budget %d", sum, s.budget)
	}
	lanes := map[string]int{}
	excl := map[string]int{}
	holding := 0
	for id, p := range s.phase {
		if !p.inFlight() {
			if s.nback[id] != 0 {
				t.Fatalf("item %d in phase %s has %d backoffs", id, p, s.nback[id])
			}
			continue
		}
		if p == Running {
			holding++
		}
		if p == Backoff && s.nback[id] == 0 {
			t.Fatalf("item %d in backoff without a request in backoff", id)
		}
		if l := s.items[id].Lane; l != "" {
			lanes[l]++
		}
		if x := s.items[id].Exclusive; x != "" {
			excl[x]++
		}
	}
	for l, c := range lanes {
		if c > 1 {
			t.Fatalf("lane %s has %d in flight", l, c)
		}
	}
	for x, c := range excl {
		if c > 1 {
			t.Fatalf("exclusive %s has %d in flight", x, c)
		}
	}
	if holding != s.used {
		t.Fatalf("used %d but %d items hold a budget slot", s.used, holding)
	}
	for l, id := range s.lanes {
		if p := s.phase[id]; !p.inFlight() || s.items[id].Lane != l {
			t.Fatalf("lane %s held by item %d in phase %s", l, id, p)
		}
	}
	if !settled || !s.budgetRoom() {
		return
	}
	for i := range s.tasks {
		k := &s.tasks[i]
		if !k.ready || k.queued == 0 || k.running >= k.cap {
			continue
		}
		if id := s.firstAdmissible(k); id >= 0 {
			t.Fatalf("idle budget slot (%d of %d used) while ready task %d (cap %d, in flight %d, setpoint %d) could start item %d",
				s.used, s.budget, i, k.cap, k.running, k.setpoint, id)
		}
	}
}

func randomRun(t *testing.T, seed int64, n int) {
	r := rand.New(rand.NewSource(seed))
	nt := 1 + r.Intn(12)
	items := make([]Item, n)
	for i := range items {
		it := Item{ID: i, Task: r.Intn(nt)}
		if r.Intn(5) == 0 {
			it.Lane = fmt.Sprintf("lane%d-%d", it.Task, r.Intn(4))
		}
		if it.Task == 0 && seed%3 == 0 {
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
		s.SetCap(i, 1+r.Intn(30))
		s.SetReady(i, r.Intn(4) != 0)
	}
	var q evq
	now := 0
	finished := 0
	prevExec := 0
	check := func(settled bool) {
		// Lowering the budget never interrupts running work, so executing may
		// sit above a just-lowered budget, but it must never grow while it does.
		if s.budget > 0 && s.Executing() > s.budget && s.Executing() > prevExec {
			t.Fatalf("executing %d > budget %d and growing", s.Executing(), s.budget)
		}
		prevExec = s.Executing()
		checkInvariants(t, s, settled)
	}
	fill := func() {
		for {
			d, ok := s.Next()
			if !ok {
				check(true)
				return
			}
			it := items[d.ID]
			if s.budget > 0 && s.Executing() > s.budget {
				t.Fatalf("dispatch took executing to %d over budget %d", s.Executing(), s.budget)
			}
			if !d.Resume {
				k := &s.tasks[it.Task]
				if k.units() > k.setpoint || k.running > k.cap {
					t.Fatalf("task %d: %d slots > setpoint %d or %d in flight > cap %d at dispatch", it.Task, k.units(), k.setpoint, k.running, k.cap)
				}
				if !k.ready {
					t.Fatalf("dispatched item %d of a task not ready", d.ID)
				}
				// The sandbox comes up a little later.
				heap.Push(&q, ev{at: now + r.Intn(3), id: d.ID, kind: 3})
			}
			if !d.Resume {
				if r.Intn(5) == 0 {
					// 1 to 3 concurrent requests of the item meet a 429.
					for k := 1 + r.Intn(3); k > 0; k-- {
						heap.Push(&q, ev{at: now + r.Intn(5), id: d.ID, kind: 1})
					}
				}
				heap.Push(&q, ev{at: now + 6 + r.Intn(20), id: d.ID})
			}
			check(false)
		}
	}
	fill()
	pendingResumes := map[int]int{}
	for steps := 0; !s.Finished(); steps++ {
		if steps > 80*n {
			t.Fatal("no progress")
		}
		// Random control moves between events.
		switch r.Intn(14) {
		case 0:
			s.SetCap(r.Intn(nt), r.Intn(30))
		case 1:
			s.SetReady(r.Intn(nt), true)
		case 2:
			s.SetReady(r.Intn(nt), false) // waits again (e.g. a lease lost to another invocation before setup)
		case 3:
			s.SetBudget(1 + r.Intn(40))
		}
		check(false)
		if q.Len() == 0 {
			// Nothing in flight: open everything so the run can end.
			for i := 0; i < nt; i++ {
				s.SetReady(i, true)
				if s.Cap(i) == 0 {
					s.SetCap(i, 1)
				}
			}
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
			if pendingResumes[e.id] > 0 {
				// Its requests still wait out their backoff: end after them.
				heap.Push(&q, ev{at: now + 1, id: e.id})
				continue
			}
			if err := s.Finish(e.id); err != nil {
				t.Fatal(err)
			}
			finished++
		case 1:
			if !s.phase[e.id].inFlight() {
				continue
			}
			if err := s.Backoff(e.id); err != nil {
				t.Fatal(err)
			}
			pendingResumes[e.id]++
			heap.Push(&q, ev{at: now + 1 + r.Intn(5), id: e.id, kind: 2})
		case 2:
			if _, err := s.Resume(e.id); err != nil {
				t.Fatal(err)
			}
			pendingResumes[e.id]--
			// Not granted now: Next hands it back with Resume set.
		case 3:
			s.MarkStarted(e.id)
		}
		check(false)
		fill()
	}
	if finished != n {
		t.Fatalf("finished %d of %d items", finished, n)
	}
}

func TestDispatcherBackoffResume(t *testing.T) {
	items := []Item{{ID: 0, Task: 0}, {ID: 1, Task: 0}, {ID: 2, Task: 0}}
	s, _ := New(items, 1, nil)
	s.SetBudget(1)
	s.SetCap(0, 3)
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
