package run

import (
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/tend"
)

// watch collects a launch's events (Options.Observe) for a test to wait on.
type watch struct {
	mu      sync.Mutex
	events  []Event
	changed chan struct{}
}

func newWatch() *watch { return &watch{changed: make(chan struct{})} }

// observe is the launch's Options.Observe: it never blocks.
func (w *watch) observe(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
	close(w.changed)
	w.changed = make(chan struct{})
}

// until blocks until ok holds of the events so far (it is asked again at
// each new event) and returns them. The minute is a guard against a hung
// launch, not a wait for anything.
func (w *watch) until(t *testing.T, what string, ok func([]Event) bool) []Event {
	t.Helper()
	guard := time.After(2 * time.Minute)
	for {
		w.mu.Lock()
		evs := append([]Event(nil), w.events...)
		ch := w.changed
		w.mu.Unlock()
		if ok(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-guard:
			t.Fatalf("still waiting for %s after %d events", what, len(evs))
		}
	}
}

// attempts are the published rows of task among evs.
func attempts(evs []Event, task string) []Event {
	var out []Event
	for _, e := range evs {
		if e.Attempt != nil && e.Attempt.Task == task {
			out = append(out, e)
		}
	}
	return out
}

// lives are the live states among evs, tended ones only if tended.
func lives(evs []Event, tended bool) []*tend.LiveState {
	var out []*tend.LiveState
	for _, e := range evs {
		if e.Live != nil && (!tended || e.Live.Tended) {
			out = append(out, e.Live)
		}
	}
	return out
}
