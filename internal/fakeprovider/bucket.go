package fakeprovider

import (
	"math"
	"net/http"
	"time"

	"github.com/steward-evals/steward/internal/mockmodel"
)

// bucket is a token bucket that refills continuously at perMinute a
// minute. Its capacity is what the enforcement interval allows: a whole
// minute's worth by default, the way providers describe their RPM and TPM
// limits, or perMinute × interval / 1 min when the provider enforces the
// limit over a shorter interval (a 1 200 RPM limit enforced per second holds
// 20). A zero perMinute means unlimited. Not safe for concurrent use.
type bucket struct {
	perMinute float64
	interval  time.Duration
	capacity  float64
	level     float64
	last      time.Time
}

func newBucket(perMinute int, interval time.Duration, now time.Time) *bucket {
	if interval <= 0 || interval > time.Minute {
		interval = time.Minute
	}
	b := &bucket{interval: interval, last: now}
	b.perMinute = float64(max(perMinute, 0))
	b.capacity = b.perMinute * interval.Seconds() / 60
	b.level = b.capacity
	return b
}

func (b *bucket) unlimited() bool { return b.perMinute == 0 }

// rate is the refill rate per second.
func (b *bucket) rate() float64 { return b.perMinute / 60 }

func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.rate())
		b.last = now
	}
}

// setLimit changes the limit, keeping what is left but never more than the new capacity.
func (b *bucket) setLimit(perMinute int, now time.Time) {
	b.refill(now)
	wasUnlimited := b.unlimited()
	b.perMinute = float64(max(perMinute, 0))
	b.capacity = b.perMinute * b.interval.Seconds() / 60
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

// remaining is what is left, in the per-minute unit the headers announce
// (the level scaled from the interval to a minute), rounded down.
func (b *bucket) remaining() int64 {
	return int64(math.Floor(math.Max(b.level, 0) * time.Minute.Seconds() / b.interval.Seconds()))
}

// reset is how long until the bucket is full again.
func (b *bucket) reset() time.Duration {
	if b.unlimited() || b.level >= b.capacity {
		return 0
	}
	return secs((b.capacity - b.level) / b.rate())
}

func secs(s float64) time.Duration { return time.Duration(math.Ceil(s * float64(time.Second))) }

// Limiter is the provider's rate limiting on its own: the RPM and TPM
// buckets and the headers they announce, with no server around them. The
// Server uses one; a simulation can drive one with simulated time and hand
// the headers to the same parser a gateway uses. Not safe for concurrent use.
type Limiter struct {
	rpm, tpm *bucket
}

// NewLimiter makes a limiter of rpm requests and tpm tokens a minute (0:
// unlimited) enforced over interval (0 or more than a minute: a minute),
// with full buckets at now.
func NewLimiter(rpm, tpm int, interval time.Duration, now time.Time) *Limiter {
	return &Limiter{rpm: newBucket(rpm, interval, now), tpm: newBucket(tpm, interval, now)}
}

// SetLimits changes both limits (per minute; 0: unlimited), keeping what is
// left in each bucket up to its new capacity.
func (l *Limiter) SetLimits(rpm, tpm int, now time.Time) {
	l.rpm.setLimit(rpm, now)
	l.tpm.setLimit(tpm, now)
}

// Limits returns the per-minute limits.
func (l *Limiter) Limits() (rpm, tpm int) { return int(l.rpm.perMinute), int(l.tpm.perMinute) }

// Level returns what the request and token buckets hold now (unscaled).
func (l *Limiter) Level(now time.Time) (requests, tokens float64) {
	l.rpm.refill(now)
	l.tpm.refill(now)
	return l.rpm.level, l.tpm.level
}

// Decision is the limiter's answer to one request.
type Decision struct {
	// OK: admitted, and the request and its tokens were taken.
	OK bool
	// RetryAfter is how long until the request would pass; negative when it
	// never can (larger than the bucket). Zero when admitted.
	RetryAfter time.Duration
	// LimitedBy is "requests" or "tokens" when refused.
	LimitedBy string
	headers   limitHeaders
}

// Header writes the rate-limit headers the answer carries (and, when
// refused, retry-after and retry-after-ms as the server sends them) in
// api's format.
func (d Decision) Header(h http.Header, api mockmodel.API) {
	d.headers.write(h, api)
	if d.OK {
		return
	}
	if w, ok := retryAfterFor(api, d.RetryAfter, d.LimitedBy, d.headers); ok {
		setRetryAfter(h, w)
	}
}

// Admit takes one request costing tokens at now, or refuses it.
func (l *Limiter) Admit(now time.Time, tokens float64) Decision {
	var d Decision
	l.rpm.refill(now)
	l.tpm.refill(now)
	rw, rok := l.rpm.wait(1)
	tw, tok := l.tpm.wait(tokens)
	switch {
	case !rok:
		d.RetryAfter, d.LimitedBy = -1, "requests"
	case !tok:
		d.RetryAfter, d.LimitedBy = -1, "tokens"
	case rw > 0 || tw > 0:
		d.RetryAfter = max(rw, tw)
		d.LimitedBy = "requests"
		if tw > rw {
			d.LimitedBy = "tokens"
		}
	default:
		d.OK = true
		l.rpm.take(1)
		l.tpm.take(tokens)
	}
	d.headers = limitHeaders{
		rpmLimit: int64(l.rpm.perMinute), tpmLimit: int64(l.tpm.perMinute),
		rpmRemaining: l.rpm.remaining(), tpmRemaining: l.tpm.remaining(),
		rpmReset: l.rpm.reset(), tpmReset: l.tpm.reset(),
		now: now,
	}
	return d
}
