package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// received drains what each timer has fired with (zero: not fired).
func received(ts []Timer) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		select {
		case at := <-t.C():
			out[i] = at.Sub(t0)
		default:
			out[i] = -1
		}
	}
	return out
}

func TestFake(t *testing.T) {
	s := time.Second
	cases := []struct {
		name     string
		instant  bool
		timers   []time.Duration // made in this order at t0
		stop     []int           // stopped before advancing
		advances []time.Duration
		fired    []time.Duration // what each timer received (offset from t0), -1 not fired
		pending  int
		now      time.Duration
		stopped  []bool // Stop's answer for each timer after the advances
	}{
		{name: "nothing due", timers: []time.Duration{2 * s}, advances: []time.Duration{s},
			fired: []time.Duration{-1}, pending: 1, now: s, stopped: []bool{true}},
		{name: "due exactly at its deadline", timers: []time.Duration{2 * s}, advances: []time.Duration{s, s},
			fired: []time.Duration{2 * s}, now: 2 * s, stopped: []bool{false}},
		{name: "each fires with its own deadline, in one advance", timers: []time.Duration{3 * s, s, 2 * s, 10 * s}, advances: []time.Duration{5 * s},
			fired: []time.Duration{3 * s, s, 2 * s, -1}, pending: 1, now: 5 * s, stopped: []bool{false, false, false, true}},
		{name: "zero and negative fire at once", timers: []time.Duration{0, -s}, advances: nil,
			fired: []time.Duration{0, 0}, stopped: []bool{false, false}},
		{name: "a stopped timer never fires", timers: []time.Duration{s, 2 * s}, stop: []int{0}, advances: []time.Duration{time.Hour},
			fired: []time.Duration{-1, 2 * s}, now: time.Hour, stopped: []bool{false, false}},
		{name: "instant: each timer fires at once and moves time", instant: true, timers: []time.Duration{s, 2 * s, 0},
			fired: []time.Duration{s, 3 * s, 3 * s}, now: 3 * s, stopped: []bool{false, false, false}},
		{name: "instant: advance moves time too", instant: true, timers: []time.Duration{s}, advances: []time.Duration{time.Minute},
			fired: []time.Duration{s}, now: time.Minute + s, stopped: []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFake(t0)
			if c.instant {
				f = NewInstant(t0)
			}
			var ts []Timer
			for _, d := range c.timers {
				ts = append(ts, f.NewTimer(d))
			}
			for _, i := range c.stop {
				if !ts[i].Stop() {
					t.Fatalf("Stop of pending timer %d said it was not pending", i)
				}
			}
			for _, d := range c.advances {
				f.Advance(d)
			}
			if got := received(ts); !slices.Equal(got, c.fired) {
				t.Errorf("fired %v, want %v", got, c.fired)
			}
			if got := f.Pending(); got != c.pending {
				t.Errorf("pending %d, want %d", got, c.pending)
			}
			if got := f.Now().Sub(t0); got != c.now {
				t.Errorf("now +%v, want +%v", got, c.now)
			}
			if !slices.Equal(f.Waits(), c.timers) {
				t.Errorf("waits %v, want %v", f.Waits(), c.timers)
			}
			var stopped []bool
			for _, tm := range ts {
				stopped = append(stopped, tm.Stop())
			}
			if !slices.Equal(stopped, c.stopped) {
				t.Errorf("Stop after the advances %v, want %v", stopped, c.stopped)
			}
		})
	}
}

// BlockUntil returns once the code under test waits; Sleep then ends when
// the clock reaches its deadline, not before.
func TestFakeBlockUntilAndSleep(t *testing.T) {
	f := NewFake(t0)
	done := make(chan error, 2)
	go func() { done <- Sleep(context.Background(), f, 5*time.Second) }()
	go func() { done <- Sleep(context.Background(), f, 7*time.Second) }()
	f.BlockUntil(2)
	f.Advance(5*time.Second - 1)
	select {
	case err := <-done:
		t.Fatalf("a sleep ended early: %v", err)
	default:
	}
	f.Advance(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.BlockUntil(1) // the 7 s sleep still waits
	if f.Pending() != 1 {
		t.Fatalf("pending %d", f.Pending())
	}
	f.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.Pending() != 0 || f.Waited() != 12*time.Second {
		t.Fatalf("pending %d, waited %v", f.Pending(), f.Waited())
	}
}

// A cancelled Sleep returns the context's error and leaves no timer behind.
func TestSleepCancelled(t *testing.T) {
	f := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	f.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if f.Pending() != 0 {
		t.Fatalf("a cancelled sleep left %d timers", f.Pending())
	}
	if err := Sleep(ctx, f, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("zero sleep on a done context: %v", err)
	}
}

func TestRealAndScaled(t *testing.T) {
	for _, c := range []Clock{Real(), Scaled(1000)} {
		start := c.Now()
		if err := Sleep(context.Background(), c, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if Since(c, start) < time.Millisecond {
			t.Fatalf("%T: a 1ms sleep took %v of its own time", c, Since(c, start))
		}
		tm := c.NewTimer(time.Hour)
		if !tm.Stop() {
			t.Fatalf("%T: Stop of a pending timer", c)
		}
	}
}
