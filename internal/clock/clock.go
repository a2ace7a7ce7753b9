// Package clock is Steward's one view of time for code that waits: the
// gateway's backoffs, holds and pacing, the fake provider's buckets and
// latencies, the supervisor's heartbeat and the action's rate-limit waits
// take a Clock, so their tests move time instead of sleeping.
//
// Real is the wall clock; Scaled runs the wall clock faster (benchmarks
// that compress minutes); Fake is the one test clock: time moves only when
// the test says so, timers fire in deadline order, and BlockUntil lets a
// test wait, without sleeping, until the code under test is waiting.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now (at once when
	// d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer from a Clock.
type Timer interface {
	// C receives the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did (false:
	// it had fired or was stopped already).
	Stop() bool
}

// Sleep waits d on c, or until ctx ends (then it returns ctx.Err()). A
// d <= 0 returns at once, making no timer.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Since is the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Real is the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Scaled is the wall clock run k times faster from now on: a minute of its
// time passes in 60/k wall seconds and a timer of d fires after d/k. A
// benchmark that shares it between the gateway and the fake provider keeps
// every ratio of their times while taking a k-th of the wall time.
func Scaled(k float64) Clock { return scaled{start: time.Now(), k: k} }

type scaled struct {
	start time.Time
	k     float64
}

func (s scaled) Now() time.Time {
	return s.start.Add(time.Duration(float64(time.Since(s.start)) * s.k))
}

func (s scaled) NewTimer(d time.Duration) Timer {
	return realTimer{time.NewTimer(time.Duration(float64(d) / s.k))}
}
