package clock

import (
	"sync"
	"time"
)

// Fake is the test clock. Its time moves only by Advance (or, made with
// NewInstant, by each timer it makes); timers fire in deadline order (ties in
// the order they were made), each receiving the instant it was set for.
// BlockUntil waits until the code under test has made
// its timers, so a test never sleeps to let it get there.
//
// A Fake is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	instant bool
	seq     uint64
	pending []*fakeTimer
	waits   []time.Duration
	changed chan struct{} // closed (and replaced) when pending changes
}

// NewFake returns a Fake set to start; its time moves only by Advance.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// NewInstant returns a Fake on which every timer fires at once, moving the
// time forward by its duration: code that backs off or sleeps runs straight
// through, and Waits says how long it would have waited.
func NewInstant(start time.Time) *Fake {
	f := NewFake(start)
	f.instant = true
	return f
}

// Now returns the clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer makes a timer that fires once the clock reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	f.seq++
	t := &fakeTimer{f: f, at: f.now.Add(d), seq: f.seq, c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- f.now
		return t
	}
	f.pending = append(f.pending, t)
	f.notifyLocked()
	if f.instant {
		f.advanceLocked(d)
	}
	return t
}

// Advance moves the clock forward by d, firing every timer due by then in
// deadline order (ties in the order they were made).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceLocked(d)
}

func (f *Fake) advanceLocked(d time.Duration) {
	target := f.now.Add(d)
	for {
		i := -1
		for j, t := range f.pending {
			if t.at.After(target) {
				continue
			}
			if i < 0 || t.at.Before(f.pending[i].at) || (t.at.Equal(f.pending[i].at) && t.seq < f.pending[i].seq) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		t := f.pending[i]
		f.pending = append(f.pending[:i], f.pending[i+1:]...)
		if t.at.After(f.now) {
			f.now = t.at
		}
		t.c <- f.now // buffered, and a timer fires once: never blocks
		f.notifyLocked()
	}
	if target.After(f.now) {
		f.now = target
	}
}

// Pending is how many timers are waiting to fire.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// BlockUntil returns once at least n timers are waiting to fire: the code
// under test has reached its waits, and an Advance now reaches them.
func (f *Fake) BlockUntil(n int) {
	for {
		f.mu.Lock()
		if len(f.pending) >= n {
			f.mu.Unlock()
			return
		}
		ch := f.changed
		f.mu.Unlock()
		<-ch
	}
}

// Waits lists the duration of every timer made so far, in order.
func (f *Fake) Waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// Waited is the total of the positive durations in Waits.
func (f *Fake) Waited() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sum time.Duration
	for _, d := range f.waits {
		if d > 0 {
			sum += d
		}
	}
	return sum
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f   *Fake
	at  time.Time
	seq uint64
	c   chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.pending {
		if p == t {
			f.pending = append(f.pending[:i], f.pending[i+1:]...)
			f.notifyLocked()
			return true
		}
	}
	return false
}
