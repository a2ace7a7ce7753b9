package sched

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// oneSlotTwoTasks runs a dispatcher of items over two tasks sharing a
// budget of one (caps of one each), task 0 ready; started says each item
// it starts, until the test ends.
func oneSlotTwoTasks(t *testing.T, items []Item) (*Dispatcher, <-chan int, context.Context) {
	t.Helper()
	s, _ := New(items, 2, nil)
	s.SetBudget(1)
	s.SetCap(0, 1)
	s.SetCap(1, 1)
	s.SetReady(0, true)
	d := NewDispatcher(s)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	started := make(chan int, len(items))
	go d.Run(ctx, func(it Item) { started <- it.ID })
	return d, started, ctx
}

// Hooks, as the gateway calls them per request: the first item's request
// backs off and its budget slot goes to the other task's item; its
// BackoffEnd takes a slot again once that one finishes. A backoff the
// state refuses (the item is not running) is said and fails the request.
func TestHooks(t *testing.T) {
	d, started, ctx := oneSlotTwoTasks(t, makeItems(1, 1))
	first := <-started
	var said strings.Builder
	b := &Hooks{D: d, ID: first, Name: "t/a#1", Logf: func(f string, args ...any) { fmt.Fprintf(&said, f, args...) }}
	b.BackoffStart()
	d.With(func(s *State) { s.SetReady(1, true) })
	other := <-started // the freed budget slot
	resumed := make(chan error, 1)
	go func() { resumed <- b.BackoffEnd(ctx) }()
	if err := d.Finish(other); err != nil {
		t.Fatal(err)
	}
	if err := <-resumed; err != nil {
		t.Fatalf("BackoffEnd: %v", err)
	}
	if err := d.Finish(first); err != nil {
		t.Fatal(err)
	}
	gone := &Hooks{D: d, ID: first, Name: "t/a#1", Logf: b.Logf}
	gone.BackoffStart() // finished: not running any more
	if err := gone.BackoffEnd(ctx); err == nil || !strings.Contains(err.Error(), "refused its backoff") {
		t.Fatalf("BackoffEnd after a refused start: %v", err)
	}
	if !strings.Contains(said.String(), "t/a#1: backoff:") {
		t.Errorf("the refusal was not said: %q", said.String())
	}
}
