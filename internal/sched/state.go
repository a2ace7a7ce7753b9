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

// inFlight: admitted and not finished.
func (p Phase) inFlight() bool { return p == Running || p == Backoff || p == Resuming }

type task struct {
	// cap is the task's sample limit from the ramp (or max_samples): it
	// never has more than cap attempts in flight, backoff included (C6).
	cap int
	// setpoint is the task's share of the sandbox budget, recomputed by
	// split whenever what decides it changes (see split).
	setpoint int
	ready    bool
	// pending: the task is about to be ready (its lifecycle has met nothing
	// to wait for yet): it holds its share of the budget but dispatches
	// nothing, so the first dispatch cannot hand its share to a task that
	// was ready a moment earlier (C4, C7).
	pending bool
	running int   // Running + Backoff + Resuming items
	backoff int   // Backoff items (hold no budget slot and want none)
	started int   // in-flight items whose sandbox exists and that execute (MarkStarted)
	queue   []int // queued item ids in dispatch order
	head    int   // queue[head:] are the live entries (cancelled ones are skipped lazily)
	queued  int   // number of Queued items in queue

	ungrouped int            // unfinished items without a lane
	lanes     map[string]int // lane -> unfinished items of the task in it
	excl      string         // the task's exclusive key, if its items have one
}

// units is how many budget slots the task holds or waits for (Running and Resuming).
func (t *task) units() int { return t.running - t.backoff }

// usable is how many attempts the task could have in flight at once: one
// per ungrouped unfinished item, one per lane with unfinished items.
func (t *task) usable() int { return t.ungrouped + len(t.lanes) }

// State is the scheduler's whole state.
type State struct {
	items   []Item
	phase   []Phase
	nback   []int  // per item: requests in backoff (C6, counted per request)
	started []bool // per item: MarkStarted seen
	tasks   []task
	budget  int // 0 = unlimited
	used    int // budget slots held (Running items)

	lanes  map[string]int // lane -> item id in flight, absent = free
	excl   map[string]int // exclusive key -> item id, absent = free
	resume []int          // items in Resuming, FIFO

	dirty bool      // setpoints must be split again
	sh    splitHeap // reused by resplit (no allocation per event)
	buf   []int     // resplit's buffers: want, rem, caps and out per task
	done  int       // Done + Cancelled
}

// New builds a state for items. order, when non-nil, gives the dispatch order
// of item ids within each task (group lanes reorder members, D3); otherwise
// discovery order.
func New(items []Item, tasks int, order []int) (*State, error) {
	s := &State{
		items:   items,
		phase:   make([]Phase, len(items)),
		nback:   make([]int, len(items)),
		started: make([]bool, len(items)),
		tasks:   make([]task, tasks),
		lanes:   map[string]int{},
		excl:    map[string]int{},
		dirty:   true,
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
	for i := range s.tasks {
		s.tasks[i].lanes = map[string]int{}
	}
	for _, id := range order {
		it := items[id]
		t := &s.tasks[it.Task]
		t.queue = append(t.queue, id)
		t.queued++
		if it.Lane != "" {
			t.lanes[it.Lane]++
		} else {
			t.ungrouped++
		}
		if it.Exclusive != "" {
			t.excl = it.Exclusive
		}
	}
	return s, nil
}

// SetBudget sets the sandbox budget (0 = unlimited). Lowering it never
// interrupts running items.
func (s *State) SetBudget(n int) { s.budget, s.dirty = n, true }

// Budget returns the budget and the slots in use.
func (s *State) Budget() (limit, used int) { return s.budget, s.used }

// SetCap sets a task's sample limit (the ramp's setpoint, or max_samples):
// the task never has more than n attempts in flight. Lowering it never
// interrupts running items.
func (s *State) SetCap(t, n int) { s.tasks[t].cap, s.dirty = n, true }

// Cap returns a task's sample limit.
func (s *State) Cap(t int) int { return s.tasks[t].cap }

// Setpoint returns a task's setpoint: its share of the sandbox budget now
// (see split). It is 0 while the task cannot run (waiting, or finished; a
// pending task holds its share, see SetPending), and the setpoints of all
// tasks never add up to more than the budget.
func (s *State) Setpoint(t int) int {
	s.resplit()
	return s.tasks[t].setpoint
}

// SetReady marks a task as set up (max_tasks slot, lease held, host setup
// done). Items of a task that is not ready stay queued and hold nothing, and
// the task holds no share of the budget (C6) unless it is pending. A ready
// task is no longer pending.
func (s *State) SetReady(t int, ready bool) {
	s.tasks[t].ready, s.dirty = ready, true
	if ready {
		s.tasks[t].pending = false
	}
}

// SetPending marks a task that is not ready yet as about to be: it has
// started towards ready and met nothing to wait for (no max_tasks slot to
// wait for, no lease held elsewhere, no host setup). A pending task's share
// of the budget is kept for it — the setpoints are computed as if it were
// ready — but none of its items is dispatched until SetReady. The runner
// marks every task pending before the first dispatch and clears the mark
// the moment a task has to wait, so the first shares are the ones computed
// over every task that can run, and what runs from the first attempt is
// what the PLAN line and `steward tend` say.
func (s *State) SetPending(t int, pending bool) {
	if s.tasks[t].ready {
		pending = false
	}
	s.tasks[t].pending, s.dirty = pending, true
}

// Pending reports whether a task is marked pending.
func (s *State) Pending(t int) bool { return s.tasks[t].pending }

// Ready reports whether a task is marked ready.
func (s *State) Ready(t int) bool { return s.tasks[t].ready }

// Phase returns an item's phase.
func (s *State) Phase(id int) Phase { return s.phase[id] }

// Finished reports whether every item is Done or Cancelled.
func (s *State) Finished() bool { return s.done == len(s.items) }

// TaskFinished reports whether a task has nothing queued or running.
func (s *State) TaskFinished(t int) bool { return s.tasks[t].queued == 0 && s.tasks[t].running == 0 }

// TaskCounts returns a task's queued and admitted (in flight: starting,
// running or in backoff) counts.
func (s *State) TaskCounts(t int) (queued, admitted int) {
	return s.tasks[t].queued, s.tasks[t].running
}

// Live is one consistent view of what is in flight, by the one definition
// of running used everywhere (panel, tend, reports, the ramp's saturation
// gate): an attempt is running when its sandbox exists and it executes
// (MarkStarted), backoff included; admitted attempts whose sandbox is still
// being made are starting.
type Live struct {
	Queued, Starting, Running int
	// Units: attempts holding (or waiting to retake) a budget slot.
	Units int
}

// TaskLive returns task t's live counts.
func (s *State) TaskLive(t int) Live {
	k := &s.tasks[t]
	return Live{Queued: k.queued, Starting: k.running - k.started, Running: k.started, Units: k.units()}
}

// MarkStarted records that an admitted item's sandbox exists and the
// attempt executes. It is idempotent and ignores items not in flight.
func (s *State) MarkStarted(id int) {
	if !s.phase[id].inFlight() || s.started[id] {
		return
	}
	s.started[id] = true
	s.tasks[s.items[id].Task].started++
}

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
	s.resplit()
	best, bestID := -1, -1
	for ti := range s.tasks {
		t := &s.tasks[ti]
		if !t.ready || t.queued == 0 || t.units() >= t.setpoint || t.running >= t.cap {
			continue
		}
		id := s.firstAdmissible(t)
		if id < 0 {
			continue
		}
		// C7: most rounds to finish first: remaining ÷ sample limit, compared by cross-multiplying.
		if best < 0 || t.queued*s.tasks[best].cap > s.tasks[best].queued*t.cap {
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
		s.dirty = true // other tasks of the key can use nothing until it ends
	}
}

// Backoff records that one of a running item's requests started waiting
// out a 429. The first request in backoff releases the item's budget slot;
// the item keeps its task slot, lane and exclusivity (C6). Backoff is
// counted per request: any number of concurrent requests of one item may
// back off, each then calls Resume once.
func (s *State) Backoff(id int) error {
	if !s.phase[id].inFlight() {
		return fmt.Errorf("backoff of item %d in phase %s", id, s.phase[id])
	}
	s.nback[id]++
	if s.phase[id] == Running {
		s.phase[id] = Backoff
		s.used--
		s.tasks[s.items[id].Task].backoff++
		s.dirty = true
	}
	return nil
}

// Resume is called by a request that waited out its backoff, to go on. It
// reports whether the item holds a budget slot now (it may already, when
// another of its requests took it back); otherwise the item waits
// (Resuming) and a later Next returns it with Resume set.
func (s *State) Resume(id int) (bool, error) {
	if !s.phase[id].inFlight() || s.nback[id] == 0 {
		return false, fmt.Errorf("resume of item %d in phase %s with %d request(s) in backoff", id, s.phase[id], s.nback[id])
	}
	s.nback[id]--
	switch s.phase[id] {
	case Running:
		return true, nil
	case Resuming:
		return false, nil
	}
	// Backoff: take a budget slot back.
	s.tasks[s.items[id].Task].backoff--
	s.dirty = true
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
		t.backoff--
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
	s.nback[id] = 0
	t.running--
	if s.started[id] {
		t.started--
	}
	s.done++
	s.forget(it)
	if it.Lane != "" && s.lanes[it.Lane] == id {
		delete(s.lanes, it.Lane)
	}
	if it.Exclusive != "" && s.excl[it.Exclusive] == id {
		delete(s.excl, it.Exclusive)
	}
	return nil
}

// forget drops a finished or cancelled item from its task's demand.
func (s *State) forget(it Item) {
	t := &s.tasks[it.Task]
	if it.Lane != "" {
		if t.lanes[it.Lane]--; t.lanes[it.Lane] <= 0 {
			delete(t.lanes, it.Lane)
		}
	} else {
		t.ungrouped--
	}
	s.dirty = true
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
	s.forget(s.items[id])
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

// resplit recomputes the setpoints when something they depend on changed.
func (s *State) resplit() {
	if !s.dirty {
		return
	}
	s.dirty = false
	n := len(s.tasks)
	if len(s.buf) != 4*n {
		s.buf = make([]int, 4*n)
	}
	want, rem, caps, out := s.buf[:n], s.buf[n:2*n], s.buf[2*n:3*n], s.buf[3*n:]
	for i := range s.tasks {
		want[i], rem[i], caps[i] = s.want(i), s.tasks[i].queued+s.tasks[i].running, s.tasks[i].cap
	}
	splitInto(out, &s.sh, s.budget, want, rem, caps)
	for i, v := range out {
		s.tasks[i].setpoint = v
	}
}

// want is how many budget slots task i can use now: nothing while it cannot
// run (waiting, or finished; a pending task wants what it would once
// ready); else up to its cap (backoff items keep their
// task slot but want no budget slot) and no more than it could have in
// flight (one per lane, and one at a time on an exclusive provider).
func (s *State) want(i int) int {
	t := &s.tasks[i]
	if !(t.ready || t.pending) || t.queued+t.running == 0 {
		return 0
	}
	u := min(t.cap, t.usable())
	if t.excl != "" {
		if holder, busy := s.excl[t.excl]; busy && s.items[holder].Task != i {
			u = min(u, t.running) // another task holds the provider
		} else {
			u = min(u, 1)
		}
	}
	return max(0, u-t.backoff)
}

// Split shares a sandbox budget among tasks (C4, C7): want[i] is how many
// slots task i can use now (0 while it waits for a lease, max_tasks or its
// setup, and once it is finished), rem[i] its unfinished attempts, caps[i]
// its sample limit. Without a budget (0) every task gets what it wants.
// Otherwise every task gets what it wants when that fits; when it does not,
// the budget goes one slot at a time to the task that would take the most
// rounds to finish with the slots it has (rem ÷ slots; a task with no slot
// first), ties to the task with the most rounds at its sample limit
// (rem ÷ cap, C7), then to the earlier task. The result never adds up to
// more than the budget and never gives a task more than it wants.
func Split(budget int, want, rem, caps []int) []int {
	out := make([]int, len(want))
	splitInto(out, &splitHeap{}, budget, want, rem, caps)
	return out
}

func splitInto(out []int, h *splitHeap, budget int, want, rem, caps []int) {
	total := 0
	for _, w := range want {
		total += w
	}
	if budget <= 0 || total <= budget {
		copy(out, want)
		return
	}
	clear(out)
	h.caps, h.rem, h.got, h.idx = caps, rem, out, h.idx[:0]
	for i, w := range want {
		if w > 0 {
			h.idx = append(h.idx, i)
		}
	}
	n := len(h.idx)
	for i := n/2 - 1; i >= 0; i-- {
		h.down(i, n)
	}
	for left := budget; left > 0 && n > 0; left-- {
		i := h.idx[0]
		out[i]++
		if out[i] >= want[i] {
			n--
			h.idx[0] = h.idx[n]
		}
		h.down(0, n)
	}
}

type splitHeap struct {
	idx            []int
	caps, rem, got []int
}

// down restores the heap order below i among the first n entries.
func (h *splitHeap) down(i, n int) {
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.idx[i], h.idx[c] = h.idx[c], h.idx[i]
		i = c
	}
}

// less: heap entry a goes before b.
func (h *splitHeap) less(a, b int) bool {
	i, j := h.idx[a], h.idx[b]
	// Rounds with what it has: rem/got, larger first (got 0 = infinitely many).
	if l, r := h.rem[i]*h.got[j], h.rem[j]*h.got[i]; l != r {
		return l > r
	}
	if h.got[i] == 0 && h.got[j] != 0 {
		return true
	}
	if h.got[j] == 0 && h.got[i] != 0 {
		return false
	}
	// Rounds at its sample limit (C7).
	if l, r := h.rem[i]*h.caps[j], h.rem[j]*h.caps[i]; l != r {
		return l > r
	}
	return i < j
}
