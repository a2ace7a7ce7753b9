package fakeprovider

import (
	"context"
	"sync"
	"time"
)

// Clock is the fake provider's source of time: Now drives the token
// buckets and the rate-limit headers, Sleep the latency model.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends (then it returns ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ManualClock is a Clock for tests: time moves only when Advance is called,
// and Sleep returns at once (recording how long it was asked to sleep), so
// buckets and latencies are fully deterministic.
type ManualClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

// NewManualClock returns a ManualClock set to start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep records d and returns at once (or ctx.Err() if ctx has ended).
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.slept += d
	}
	return nil
}

// Slept is the total of every Sleep so far.
func (c *ManualClock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}
