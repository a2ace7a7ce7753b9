package gateway

import "container/list"

// fairQueue is where requests wait for admission. Each key (an attempt:
// the identity the per-token limits count by) has its own queue in
// arrival order, and the keys take turns: the head is the oldest request
// of the key whose turn it is, and a key that had a request admitted goes
// to the back of the turns. A key with 16 requests waiting thus gets one
// admission per turn, as a key with one does, and cannot hold the others
// back by queueing more. A key joins the turns at the back when its first
// request arrives and leaves them when it has none waiting. Requests
// without a key (nil) share one anonymous key: with no keyed requests the
// queue is in arrival order, as it was before keys.
type fairQueue struct {
	turns *list.List // of *keyWaiters, the key whose turn it is first
	keys  map[any]*keyWaiters
	n     int
}

// keyWaiters are one key's waiting requests, oldest first.
type keyWaiters struct {
	key  any
	turn *list.Element // in fairQueue.turns
	q    *list.List    // of *waiter
}

// waiter is one request waiting for admission; its goroutine sleeps on ch.
type waiter struct {
	ch  chan struct{}
	kw  *keyWaiters
	pos *list.Element // in kw.q
}

func newFairQueue() *fairQueue {
	return &fairQueue{turns: list.New(), keys: map[any]*keyWaiters{}}
}

// Len is how many requests wait, all keys together.
func (f *fairQueue) Len() int { return f.n }

// push queues a request of key's behind the key's others.
func (f *fairQueue) push(key any) *waiter {
	kw := f.keys[key]
	if kw == nil {
		kw = &keyWaiters{key: key, q: list.New()}
		kw.turn = f.turns.PushBack(kw)
		f.keys[key] = kw
	}
	w := &waiter{ch: make(chan struct{}, 1), kw: kw}
	w.pos = kw.q.PushBack(w)
	f.n++
	return w
}

// head is the request whose turn it is (nil: none waits).
func (f *fairQueue) head() *waiter {
	t := f.turns.Front()
	if t == nil {
		return nil
	}
	return t.Value.(*keyWaiters).q.Front().Value.(*waiter)
}

// admitted takes w, just admitted, out: its key's turn is over.
func (f *fairQueue) admitted(w *waiter) {
	f.remove(w)
	if kw := w.kw; kw.q.Len() > 0 {
		f.turns.MoveToBack(kw.turn)
	}
}

// remove takes w out without an admission (its request gave up): its
// key keeps its place in the turns.
func (f *fairQueue) remove(w *waiter) {
	kw := w.kw
	kw.q.Remove(w.pos)
	f.n--
	if kw.q.Len() == 0 {
		f.turns.Remove(kw.turn)
		delete(f.keys, kw.key)
	}
}
