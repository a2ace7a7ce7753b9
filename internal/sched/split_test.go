package sched

import (
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
)

func setpoints(s *State) []int {
	out := make([]int, len(s.tasks))
	for i := range out {
		out[i] = s.Setpoint(i)
	}
	return out
}

// items makes n[i] items for task i.
func makeItems(n ...int) []Item {
	var items []Item
	for task, k := range n {
		for range k {
			items = append(items, Item{ID: len(items), Task: task})
		}
	}
	return items
}

func drain(s *State) (ids []int) {
	for {
		d, ok := s.Next()
		if !ok {
			return ids
		}
		ids = append(ids, d.ID)
	}
}

// A task waiting (lease, max_tasks, host setup) holds no share of the
// budget: its share goes to the ready task at once, and is taken back the
// moment it becomes ready.
func TestWaitingTaskHoldsNoShare(t *testing.T) {
	s, _ := New(makeItems(10, 10), 2, nil)
	s.SetBudget(4)
	s.SetCap(0, 50)
	s.SetCap(1, 50)
	s.SetReady(0, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{4, 0}) {
		t.Fatalf("while task 1 waits: setpoints %v, want [4 0]", got)
	}
	if got := drain(s); len(got) != 4 {
		t.Fatalf("the ready task started %d attempts with a budget of 4, want 4", len(got))
	}
	s.SetReady(1, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{2, 2}) {
		t.Fatalf("once task 1 is ready: setpoints %v, want [2 2]", got)
	}
	// Running attempts are never interrupted: task 1 gets its slots as task 0's end.
	s.Finish(0)
	s.Finish(1)
	if got := drain(s); len(got) != 2 || s.items[got[0]].Task != 1 || s.items[got[1]].Task != 1 {
		t.Fatalf("freed slots went to %v, want two of task 1", got)
	}
}

// More tasks than budget: the setpoints never add up to more than the
// budget; slots go by most rounds first, some ready tasks get none.
func TestMoreTasksThanBudget(t *testing.T) {
	s, _ := New(makeItems(1, 1, 1, 6, 1, 1, 1, 1, 1, 3), 10, nil)
	s.SetBudget(4)
	for i := range 10 {
		s.SetCap(i, 50)
		s.SetReady(i, true)
	}
	got := setpoints(s)
	if want := []int{1, 1, 0, 1, 0, 0, 0, 0, 0, 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("setpoints %v, want %v (the 6- and 3-attempt tasks first, then by order)", got, want)
	}
	if n := len(drain(s)); n != 4 {
		t.Fatalf("started %d, want 4", n)
	}
}

// Finished tasks' shares go to the others, with the ramp off too (the caps
// stay where they are; only the split moves).
func TestFinishedShareRedistributed(t *testing.T) {
	s, _ := New(makeItems(1, 8), 2, nil)
	s.SetBudget(4)
	s.SetCap(0, 50)
	s.SetCap(1, 50)
	s.SetReady(0, true)
	s.SetReady(1, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{1, 3}) {
		t.Fatalf("setpoints %v, want [1 3]", got)
	}
	drain(s)
	s.Finish(0) // task 0's only attempt
	if got := setpoints(s); !reflect.DeepEqual(got, []int{0, 4}) {
		t.Fatalf("after task 0 finished: setpoints %v, want [0 4]", got)
	}
	if n := len(drain(s)); n != 1 {
		t.Fatalf("the freed slot started %d, want 1", n)
	}
}

// Fixed max_samples above the budget: the setpoints still fit the budget.
func TestFixedCapsFitTheBudget(t *testing.T) {
	s, _ := New(makeItems(20, 20), 2, nil)
	s.SetBudget(10)
	s.SetCap(0, 8)
	s.SetCap(1, 8)
	s.SetReady(0, true)
	s.SetReady(1, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{5, 5}) {
		t.Fatalf("setpoints %v, want [5 5]", got)
	}
	s.SetBudget(0) // unlimited: every task its cap
	if got := setpoints(s); !reflect.DeepEqual(got, []int{8, 8}) {
		t.Fatalf("unlimited: setpoints %v, want [8 8]", got)
	}
}

// A lane can run one attempt at a time, so a grouped task wants no more
// slots than it has lanes: the rest of the budget goes to others.
func TestLaneBoundTaskLeavesTheRest(t *testing.T) {
	items := []Item{{ID: 0, Task: 0, Lane: "g"}, {ID: 1, Task: 0, Lane: "g"}, {ID: 2, Task: 0, Lane: "g"}}
	for range 5 {
		items = append(items, Item{ID: len(items), Task: 1})
	}
	s, _ := New(items, 2, nil)
	s.SetBudget(3)
	s.SetCap(0, 50)
	s.SetCap(1, 50)
	s.SetReady(0, true)
	s.SetReady(1, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Fatalf("setpoints %v, want [1 2]", got)
	}
}

// Backoff is counted per request: two concurrent requests of one attempt
// back off and both resume (the old scheduler refused the second backoff
// and then the second resume).
func TestConcurrentBackoffsOfOneAttempt(t *testing.T) {
	s, _ := New(makeItems(2, 1), 2, nil)
	s.SetBudget(2)
	s.SetCap(0, 1)
	s.SetCap(1, 1)
	s.SetReady(0, true)
	s.SetReady(1, true)
	drain(s) // items 0 and 2
	for range 2 {
		if err := s.Backoff(0); err != nil {
			t.Fatal(err)
		}
	}
	if s.Phase(0) != Backoff || s.Executing() != 1 {
		t.Fatalf("phase %s executing %d", s.Phase(0), s.Executing())
	}
	// Its task slot is kept: task 0's second attempt does not start.
	if got := drain(s); len(got) != 0 {
		t.Fatalf("started %v while task 0's attempt is in backoff", got)
	}
	ok, err := s.Resume(0)
	if err != nil || !ok {
		t.Fatalf("first resume: %v %v", ok, err)
	}
	ok, err = s.Resume(0) // the slot is already back
	if err != nil || !ok {
		t.Fatalf("second resume: %v %v", ok, err)
	}
	if _, err := s.Resume(0); err == nil {
		t.Fatal("a third resume with no request in backoff was accepted")
	}
	if err := s.Finish(0); err != nil {
		t.Fatal(err)
	}
}

// Through the Dispatcher: many requests of one attempt back off at once
// while the budget is full; every one resumes when a slot frees.
func TestDispatcherConcurrentBackoffs(t *testing.T) {
	d, started, ctx := oneSlotTwoTasks(t, makeItems(1, 2))
	first := <-started
	const k = 8
	for range k {
		if err := d.Backoff(first); err != nil {
			t.Fatal(err)
		}
	}
	d.With(func(s *State) { s.SetReady(1, true) })
	other := <-started // the freed budget slot goes to task 1
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for range k {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- d.Resume(ctx, first) }()
	}
	for waiting := false; !waiting; {
		d.With(func(s *State) { waiting = s.Phase(first) == Resuming && s.nback[first] == 0 })
		runtime.Gosched()
	}
	if err := d.Finish(other); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
	}
	var ph Phase
	d.With(func(s *State) { ph = s.Phase(first) })
	if ph != Running {
		t.Fatalf("phase %s after resume", ph)
	}
	if err := d.Finish(first); err != nil {
		t.Fatal(err)
	}
	if id := <-started; id == first || id == other {
		t.Fatal(fmt.Sprint("restarted ", id))
	}
}

// Issue 23 item 6: the first dispatch must not hand the budget to the task
// that happened to be ready first. Every task that can run is pending from
// the start: its share is kept for it, so with a budget of 60 and three
// tasks of 40 attempts the first ready task starts 20, not 40, and every
// task gets 20 from its first attempt — the 20/20/20 the PLAN line says.
// Table: the order tasks become ready, and what each has started once all
// are ready (the old scheduler, without pending, gave 40/20/0).
func TestPendingTasksKeepTheirShareFromTheFirstDispatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      []int // attempts per task
		caps   []int
		budget int
		order  []int // the order tasks become ready
		want   []int // started per task once every task is ready
	}{
		{"three equal tasks, budget 60", []int{40, 40, 40}, []int{50, 50, 50}, 60, []int{0, 1, 2}, []int{20, 20, 20}},
		{"readiness in reverse", []int{40, 40, 40}, []int{50, 50, 50}, 60, []int{2, 1, 0}, []int{20, 20, 20}},
		// The seed schedule with fast listed first and ready first: slow
		// (max_samples 1) still takes its lane at once (C7).
		{"fast listed and ready first, slow capped at 1", []int{6, 3}, []int{50, 1}, 3, []int{0, 1}, []int{2, 1}},
		{"slow ready last of three", []int{6, 6, 3}, []int{50, 50, 1}, 5, []int{0, 1, 2}, []int{2, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := New(makeItems(c.n...), len(c.n), nil)
			s.SetBudget(c.budget)
			for i, cp := range c.caps {
				s.SetCap(i, cp)
				s.SetPending(i, true)
			}
			started := make([]int, len(c.n))
			for _, ti := range c.order {
				s.SetReady(ti, true)
				for _, id := range drain(s) {
					started[s.items[id].Task]++
				}
			}
			if !reflect.DeepEqual(started, c.want) {
				t.Fatalf("started %v, want %v (setpoints %v)", started, c.want, setpoints(s))
			}
			if got := setpoints(s); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("setpoints %v, want %v: what the panel says and what runs disagree", got, c.want)
			}
		})
	}
}

// A pending task that turns out to wait (a lease held elsewhere, a full
// max_tasks, host setup) gives its share back at once; one that becomes
// ready is no longer pending.
func TestPendingTaskThatWaitsGivesItsShareBack(t *testing.T) {
	s, _ := New(makeItems(10, 10), 2, nil)
	s.SetBudget(4)
	s.SetCap(0, 50)
	s.SetCap(1, 50)
	s.SetPending(0, true)
	s.SetPending(1, true)
	if got := setpoints(s); !reflect.DeepEqual(got, []int{2, 2}) {
		t.Fatalf("both pending: setpoints %v, want [2 2]", got)
	}
	if got := drain(s); len(got) != 0 {
		t.Fatalf("a pending task dispatched %v", got)
	}
	s.SetReady(0, true)
	if s.Pending(0) {
		t.Fatal("a ready task is still pending")
	}
	if got := drain(s); len(got) != 2 {
		t.Fatalf("the ready task started %d while the other is pending, want its share 2", len(got))
	}
	s.SetPending(1, false) // it has to wait for a lease
	if got := drain(s); len(got) != 2 {
		t.Fatalf("once the other waits, the ready task started %d more, want 2", len(got))
	}
	if got := setpoints(s); !reflect.DeepEqual(got, []int{4, 0}) {
		t.Fatalf("setpoints %v, want [4 0]", got)
	}
}
