// Package sched decides which attempt runs next. State is pure: no
// goroutines, no clock, no I/O; every rule of docs/design.md's Concurrency list
// that concerns admission lives here and is tested exactly. Dispatcher wraps
// State for concurrent use by the runner.
package sched

import "fmt"

// Item is one schedulable attempt.
type Item struct {
	// ID is the attempt's index in discovery order (0-based, dense).
	ID int
	// Task is the task's index (0-based, dense).
	Task int
	// Lane, when set, allows one item of the lane in flight at a time (group lanes, D3).
	Lane string
	// Exclusive, when set, names a provider whose sandboxes run one at a time (C3).
	Exclusive string
}

// Phase of an item.
type Phase uint8

// Item phases.
const (
	Queued    Phase = iota // waiting; holds nothing (C6)
	Running                // holds a budget slot, a task slot, its lane and exclusivity
	Backoff                // running but waiting out a 429: holds its task slot, not a budget slot (C6)
	Resuming               // left backoff, waiting for a budget slot
	Done                   // finished; holds nothing
	Cancelled              // never dispatched (early exit, budget spent, cancelled run)
)

func (p Phase) String() string {
	return [...]string{"queued", "running", "backoff", "resuming", "done", "cancelled"}[p]
}

// Gate is a pluggable admission check (budget stop, leases, …). It must be
// pure with respect to State; when its answer may have changed, the owner
// calls Dispatcher.Wake.
type Gate func(it Item) bool

type task struct {
	setpoint int // 0 = no admission
	ready    bool
	running  int   // Running + Backoff + Resuming items
	queue    []int // queued item ids in dispatch order
	head     int   // queue[head:] are the live entries (cancelled ones are skipped lazily)
	queued   int   // number of Queued items in queue
}

// State is the scheduler's whole state.
type State struct {
	items  []Item
	phase  []Phase
	tasks  []task
	budget int // 0 = unlimited
	used   int // budget slots held (Running items)

	lanes  map[string]int // lane -> item id in flight, absent = free
	excl   map[string]int // exclusive key -> item id, absent = free
	gates  []Gate
	resume []int // items in Resuming, FIFO

	done int // Done + Cancelled
}

// New builds a state for items. order, when non-nil, gives the dispatch order
// of item ids within each task (group lanes reorder members, D3); otherwise
// discovery order.
func New(items []Item, tasks int, order []int) (*State, error) {
	s := &State{
		items: items,
		phase: make([]Phase, len(items)),
		tasks: make([]task, tasks),
		lanes: map[string]int{},
		excl:  map[string]int{},
	}
	for i, it := range items {
		if it.ID != i {
			return nil, fmt.Errorf("item %d has id %d: ids must be dense and in discovery order", i, it.ID)
		}
		if it.Task < 0 || it.Task >= tasks {
			return nil, fmt.Errorf("item %d: task %d out of range", i, it.Task)
		}
	}
	if order == nil {
		order = make([]int, len(items))
		for i := range order {
			order[i] = i
		}
	}
	if len(order) != len(items) {
		return nil, fmt.Errorf("order has %d entries for %d items", len(order), len(items))
	}
	for _, id := range order {
		t := &s.tasks[items[id].Task]
		t.queue = append(t.queue, id)
		t.queued++
	}
	return s, nil
}

// SetBudget sets the sandbox budget (0 = unlimited). Lowering it never
// interrupts running items.
func (s *State) SetBudget(n int) { s.budget = n }

// Budget returns the budget and the slots in use.
func (s *State) Budget() (limit, used int) { return s.budget, s.used }

// SetSetpoint sets a task's sample limit. Lowering it never interrupts running items.
func (s *State) SetSetpoint(t, n int) { s.tasks[t].setpoint = n }

// Setpoint returns a task's sample limit.
func (s *State) Setpoint(t int) int { return s.tasks[t].setpoint }

// SetReady marks a task as set up (lease held, host setup done). Items of a
// task that is not ready stay queued and hold nothing (C6).
func (s *State) SetReady(t int, ready bool) { s.tasks[t].ready = ready }

// AddGate adds a pluggable admission check.
func (s *State) AddGate(g Gate) { s.gates = append(s.gates, g) }

// Phase returns an item's phase.
func (s *State) Phase(id int) Phase { return s.phase[id] }

// Finished reports whether every item is Done or Cancelled.
func (s *State) Finished() bool { return s.done == len(s.items) }

// TaskFinished reports whether a task has nothing queued or running.
func (s *State) TaskFinished(t int) bool { return s.tasks[t].queued == 0 && s.tasks[t].running == 0 }

// TaskCounts returns a task's queued and running counts.
func (s *State) TaskCounts(t int) (queued, running int) { return s.tasks[t].queued, s.tasks[t].running }

// Counts returns how many items are in each phase.
func (s *State) Counts() (c [6]int) {
	for _, p := range s.phase {
		c[p]++
	}
	return c
}

// Dispatch is one decision of Next.
type Dispatch struct {
	ID int
	// Resume is set when the item was in backoff and now holds a budget slot again.
	Resume bool
}

func (s *State) budgetRoom() bool { return s.budget == 0 || s.used < s.budget }

// Next returns the next decision, or false when nothing can move now.
// Items waiting to resume from backoff are served before new work.
func (s *State) Next() (Dispatch, bool) {
	if !s.budgetRoom() {
		return Dispatch{}, false
	}
	if len(s.resume) > 0 {
		id := s.resume[0]
		s.resume = s.resume[1:]
		s.phase[id] = Running
		s.used++
		return Dispatch{ID: id, Resume: true}, true
	}
	best, bestID := -1, -1
	for ti := range s.tasks {
		t := &s.tasks[ti]
		if !t.ready || t.queued == 0 || t.running >= t.setpoint {
			continue
		}
		id := s.firstAdmissible(t)
		if id < 0 {
			continue
		}
		// C7: most rounds to finish first: remaining ÷ setpoint, compared by cross-multiplying.
		if best < 0 || t.queued*s.tasks[best].setpoint > s.tasks[best].queued*t.setpoint {
			best, bestID = ti, id
		}
	}
	if best < 0 {
		return Dispatch{}, false
	}
	s.start(bestID)
	return Dispatch{ID: bestID}, true
}

func (s *State) firstAdmissible(t *task) int {
	for t.head < len(t.queue) && s.phase[t.queue[t.head]] != Queued {
		t.head++
	}
	for _, id := range t.queue[t.head:] {
		if s.phase[id] != Queued {
			continue
		}
		if s.admissible(s.items[id]) {
			return id
		}
	}
	return -1
}

func (s *State) admissible(it Item) bool {
	if it.Lane != "" {
		if _, busy := s.lanes[it.Lane]; busy {
			return false
		}
	}
	if it.Exclusive != "" {
		if _, busy := s.excl[it.Exclusive]; busy {
			return false
		}
	}
	for _, g := range s.gates {
		if !g(it) {
			return false
		}
	}
	return true
}

func (s *State) start(id int) {
	it := s.items[id]
	t := &s.tasks[it.Task]
	s.phase[id] = Running
	t.queued--
	t.running++
	s.used++
	if it.Lane != "" {
		s.lanes[it.Lane] = id
	}
	if it.Exclusive != "" {
		s.excl[it.Exclusive] = id
	}
}

// Backoff releases a running item's budget slot while it waits out a 429; it
// keeps its task slot, lane and exclusivity (C6).
func (s *State) Backoff(id int) error {
	if s.phase[id] != Running {
		return fmt.Errorf("backoff of item %d in phase %s", id, s.phase[id])
	}
	s.phase[id] = Backoff
	s.used--
	return nil
}

// Resume asks for a budget slot back after backoff. It reports whether the
// slot was granted now; otherwise the item waits (Resuming) and a later Next
// returns it with Resume set.
func (s *State) Resume(id int) (bool, error) {
	if s.phase[id] != Backoff {
		return false, fmt.Errorf("resume of item %d in phase %s", id, s.phase[id])
	}
	if len(s.resume) == 0 && s.budgetRoom() {
		s.phase[id] = Running
		s.used++
		return true, nil
	}
	s.phase[id] = Resuming
	s.resume = append(s.resume, id)
	return false, nil
}

// Finish marks a dispatched item done and frees what it held. Call it after
// the item's sandbox is torn down, so exclusive providers and lanes never overlap.
func (s *State) Finish(id int) error {
	it := s.items[id]
	t := &s.tasks[it.Task]
	switch s.phase[id] {
	case Running:
		s.used--
	case Backoff:
	case Resuming:
		for i, r := range s.resume {
			if r == id {
				s.resume = append(s.resume[:i], s.resume[i+1:]...)
				break
			}
		}
	default:
		return fmt.Errorf("finish of item %d in phase %s", id, s.phase[id])
	}
	s.phase[id] = Done
	t.running--
	s.done++
	if it.Lane != "" && s.lanes[it.Lane] == id {
		delete(s.lanes, it.Lane)
	}
	if it.Exclusive != "" && s.excl[it.Exclusive] == id {
		delete(s.excl, it.Exclusive)
	}
	return nil
}

// Cancel removes a queued item (early exit, budget spent, cancelled run). It
// reports whether the item was queued.
func (s *State) Cancel(id int) bool {
	if s.phase[id] != Queued {
		return false
	}
	s.phase[id] = Cancelled
	s.tasks[s.items[id].Task].queued--
	s.done++
	return true
}

// CancelAll cancels every queued item and returns their ids in discovery order.
func (s *State) CancelAll() []int {
	var ids []int
	for id := range s.items {
		if s.Cancel(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// CancelTask cancels every queued item of a task.
func (s *State) CancelTask(t int) []int {
	var ids []int
	for _, id := range s.tasks[t].queue {
		if s.Cancel(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Executing is the number of items holding a budget slot; it never exceeds a non-zero budget.
func (s *State) Executing() int { return s.used }
