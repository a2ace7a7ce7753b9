package gateway

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/steward-evals/steward/internal/clock"
)

// The queue serves keys in turn, each key's requests in arrival order: a
// key that had one admitted goes to the back of the turns, a key joins
// them at the back, a request that gives up leaves its key's place as it
// was, and nil is one key like any other.
func TestFairQueueOrder(t *testing.T) {
	f := newFairQueue()
	label := map[*waiter]string{}
	push := func(key any, name string) *waiter {
		w := f.push(key)
		label[w] = name
		return w
	}
	serve := func() string {
		w := f.head()
		f.admitted(w)
		return label[w]
	}
	push("a", "a1")
	push("a", "a2")
	push("a", "a3")
	push("b", "b1")
	push(nil, "nil1")
	c1 := push("c", "c1")
	push(nil, "nil2")
	d1 := push("d", "d1")
	push("d", "d2")
	if f.Len() != 9 || f.head() == nil || label[f.head()] != "a1" {
		t.Fatalf("len %d, head %v", f.Len(), label[f.head()])
	}
	var got []string
	got = append(got, serve(), serve()) // a1 (a to the back), b1 (b leaves)
	push("b", "b2")                     // b comes back, behind a
	f.remove(c1)                        // c gives up before its turn: c leaves
	for f.Len() > 0 {
		if f.head() == d1 {
			// d1 gives up at the head: d2 takes its place in d's turn.
			f.remove(d1)
			continue
		}
		got = append(got, serve())
	}
	want := []string{"a1", "b1", "nil1", "d2", "a2", "b2", "nil2", "a3"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	if len(f.keys) != 0 || f.turns.Len() != 0 || f.head() != nil {
		t.Fatalf("empty queue keeps %d keys, %d turns", len(f.keys), f.turns.Len())
	}
}

// Through the controller: at one connection, requests queued as a1 a2 a3
// b1 nil1 c1 nil2 are admitted a1 b1 nil1 c1 a2 nil2 a3 (before keys, in
// arrival order). Acquire without a key is the anonymous key's.
func TestControllerAdmitsKeysInTurn(t *testing.T) {
	c := NewController(FixedPolicy(1), clock.NewFake(testEpoch))
	first, _ := c.TryAcquire()
	type admitted struct {
		name string
		t    *Ticket
	}
	got := make(chan admitted)
	for i, w := range []struct {
		key  any
		name string
	}{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}, {nil, "nil1"}, {"c", "c1"}, {nil, "nil2"}} {
		go func() {
			var tk *Ticket
			var err error
			if w.key == nil {
				tk, err = c.Acquire(context.Background())
			} else {
				tk, err = c.AcquireFor(context.Background(), w.key)
			}
			if err != nil {
				panic(fmt.Sprintf("%s: %v", w.name, err))
			}
			got <- admitted{w.name, tk}
		}()
		// The next request arrives once this one waits.
		for queued(c) < i+1 {
			runtime.Gosched()
		}
	}
	var order []string
	prev := first
	for range 7 {
		c.Done(prev, OutcomeOK, noInfo)
		a := <-got
		order = append(order, a.name)
		prev = a.t
	}
	if want := []string{"a1", "b1", "nil1", "c1", "a2", "nil2", "a3"}; !slices.Equal(order, want) {
		t.Fatalf("admitted %v, want %v", order, want)
	}
	if n := queued(c); n != 0 {
		t.Fatalf("%d still queued", n)
	}
}

func queued(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters.Len()
}
