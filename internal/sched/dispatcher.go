package sched

import (
	"context"
	"fmt"
	"sync"
)

// Dispatcher runs State concurrently: it hands admitted items to a start
// function, and lets running items release and re-take their budget slot.
type Dispatcher struct {
	mu      sync.Mutex
	st      *State
	wake    chan struct{}
	resumed map[int]chan struct{}
	// OnChange, when set, is called (under no lock) after every state change.
	onChange func()
}

// NewDispatcher wraps st.
func NewDispatcher(st *State) *Dispatcher {
	return &Dispatcher{st: st, wake: make(chan struct{}, 1), resumed: map[int]chan struct{}{}}
}

// OnChange registers a callback run after state changes (for the live panel).
func (d *Dispatcher) OnChange(f func()) { d.onChange = f }

// With runs f with exclusive access to the state; the dispatcher is woken after.
func (d *Dispatcher) With(f func(*State)) {
	d.mu.Lock()
	f(d.st)
	d.mu.Unlock()
	d.Wake()
}

// Wake asks the dispatch loop to look again (a gate may have opened).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until every item is done or cancelled, or ctx ends. start
// is called for each admitted item (on the loop's goroutine: it must not
// block; it typically starts a goroutine that calls Finish).
func (d *Dispatcher) Run(ctx context.Context, start func(Item)) error {
	for {
		d.mu.Lock()
		var started []Item
		for {
			dec, ok := d.st.Next()
			if !ok {
				break
			}
			if dec.Resume {
				if ch := d.resumed[dec.ID]; ch != nil {
					close(ch)
					delete(d.resumed, dec.ID)
				}
				continue
			}
			started = append(started, d.st.items[dec.ID])
		}
		finished := d.st.Finished()
		d.mu.Unlock()
		for _, it := range started {
			start(it)
		}
		if len(started) > 0 && d.onChange != nil {
			d.onChange()
		}
		if finished {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.wake:
		}
	}
}

// Finish marks an item done (after its sandbox is torn down). Requests of
// the item still waiting to resume are released with an error.
func (d *Dispatcher) Finish(id int) error {
	d.mu.Lock()
	err := d.st.Finish(id)
	if ch := d.resumed[id]; ch != nil {
		close(ch)
		delete(d.resumed, id)
	}
	d.mu.Unlock()
	d.changed()
	return err
}

// MarkStarted records that the item's sandbox exists and the attempt executes.
func (d *Dispatcher) MarkStarted(id int) {
	d.mu.Lock()
	d.st.MarkStarted(id)
	d.mu.Unlock()
	if d.onChange != nil {
		d.onChange()
	}
}

func (d *Dispatcher) changed() {
	d.Wake()
	if d.onChange != nil {
		d.onChange()
	}
}

// Backoff records that one of the item's requests waits out a 429; the
// first releases the item's budget slot (C6). Counted per request.
func (d *Dispatcher) Backoff(id int) error {
	d.mu.Lock()
	err := d.st.Backoff(id)
	d.mu.Unlock()
	d.changed()
	return err
}

// Resume blocks until the item holds a budget slot again, or ctx ends (the
// item then stays Resuming and must still be finished). Any number of the
// item's requests may wait at once; one grant releases them all.
func (d *Dispatcher) Resume(ctx context.Context, id int) error {
	d.mu.Lock()
	ok, err := d.st.Resume(id)
	if err != nil || ok {
		d.mu.Unlock()
		d.changed()
		return err
	}
	ch := d.resumed[id]
	if ch == nil {
		ch = make(chan struct{})
		d.resumed[id] = ch
	}
	d.mu.Unlock()
	d.changed()
	select {
	case <-ch:
		d.mu.Lock()
		ph := d.st.Phase(id)
		d.mu.Unlock()
		if ph != Running && ph != Backoff && ph != Resuming {
			return fmt.Errorf("resume of item %d: the attempt ended while it waited", id)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
