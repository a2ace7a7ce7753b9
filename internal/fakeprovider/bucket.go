package fakeprovider

import (
	"math"
	"time"
)

// bucket is a token bucket that refills continuously: capacity per minute,
// full at rest, the way providers describe their RPM and TPM limits.
// A zero capacity means unlimited. Not safe for concurrent use.
type bucket struct {
	capacity float64
	level    float64
	last     time.Time
}

func newBucket(perMinute int, now time.Time) *bucket {
	c := float64(max(perMinute, 0))
	return &bucket{capacity: c, level: c, last: now}
}

func (b *bucket) unlimited() bool { return b.capacity == 0 }

// rate is the refill rate per second.
func (b *bucket) rate() float64 { return b.capacity / 60 }

func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.rate())
		b.last = now
	}
}

// setCapacity changes the limit, keeping what is left but never more than the new capacity.
func (b *bucket) setCapacity(perMinute int, now time.Time) {
	b.refill(now)
	wasUnlimited := b.unlimited()
	b.capacity = float64(max(perMinute, 0))
	if wasUnlimited || b.level > b.capacity {
		b.level = b.capacity
	}
}

// wait is how long until n can be taken (0 if now); ok is false when n
// exceeds the capacity and can never be taken.
func (b *bucket) wait(n float64) (d time.Duration, ok bool) {
	if b.unlimited() || b.level >= n {
		return 0, true
	}
	if n > b.capacity {
		return 0, false
	}
	return secs((n - b.level) / b.rate()), true
}

func (b *bucket) take(n float64) { b.level -= n }

// remaining is what can be taken now, rounded down.
func (b *bucket) remaining() int64 { return int64(math.Floor(math.Max(b.level, 0))) }

// reset is how long until the bucket is full again.
func (b *bucket) reset() time.Duration {
	if b.unlimited() || b.level >= b.capacity {
		return 0
	}
	return secs((b.capacity - b.level) / b.rate())
}

func secs(s float64) time.Duration { return time.Duration(math.Ceil(s * float64(time.Second))) }
