package gateway

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// Policy sets how a Controller moves its connection limit.
type Policy struct {
	// Name shows in history and benchmarks ("steward", "inspect", "fixed").
	Name string
	// Fixed > 0 pins the limit (max_connections, C5): nothing moves it.
	Fixed int
	// Start, Min and Max bound the adaptive limit. Max is the initial
	// ceiling (0: HardMax); SetCeiling may move it (R3) up to HardMax.
	Start, Min, Max int
	// HardMax caps the ceiling however high the ramp asks (0: 100 000).
	HardMax int
	// Little aims the limit at what the provider's announced rate needs:
	// rate × measured latency (Little's law), times Headroom. With a rate
	// announced (requests per minute, and tokens per minute over the tokens
	// a request uses), admissions are always paced at PaceFactor × that
	// rate, so the rate is held by pacing and the limit only has to carry
	// it; remaining-quota headers then space requests out and never stop
	// the growth. Without a rate the controller is AIMD as below.
	Little bool
	// Headroom multiplies the Little target (0: 1.2), so the jitter of
	// latencies does not starve the pace.
	Headroom float64
	// PaceFactor is the share of the announced rate admissions are paced
	// at (0: 0.97). A 429 that does not announce a lower limit lowers it by
	// a tenth (down to a twentieth of it: other callers may share the
	// key); it climbs back 1 % of itself a second while no 429 comes.
	PaceFactor float64
	// Cut multiplies the limit on a rate-limit episode (e.g. 0.8).
	Cut float64
	// GrowOnlySaturated grows the limit only when requests actually filled it.
	GrowOnlySaturated bool
	// CutFromInFlight cuts from the requests actually in flight when they
	// are fewer than the limit (TCP's flight size), so a cut always bites.
	CutFromInFlight bool
	// ReadHeaders slows down before a 429 from x-ratelimit-remaining-* and
	// anthropic-ratelimit-*-remaining: stop growing when low, a gentle cut when
	// nearly exhausted.
	ReadHeaders bool
	// Hold pauses new upstream requests until a 429's Retry-After has passed.
	Hold bool
	// Pace spaces admissions at the provider's sustainable rate while it
	// pushes back (after a 429, or while its remaining quota is low): the
	// rate comes from the limit headers (requests per minute, and tokens
	// per minute over the tokens a request uses), else from Retry-After.
	// A concurrency limit alone lets requests leave in bursts that a
	// token bucket answers with 429s; pacing smooths them.
	Pace bool
	// MinCooldown is the shortest episode cooldown; the cooldown is also at
	// least Retry-After and two smoothed request latencies.
	MinCooldown time.Duration
	// LowFraction and CriticalFraction of the provider's remaining quota
	// trigger "stop growing" and "gentle cut" (ReadHeaders only).
	LowFraction, CriticalFraction float64
	// GentleCut multiplies the limit when remaining quota is critical.
	GentleCut float64
	// ShareKey paces at this gateway's share of the key, inferred from how
	// the provider's remaining counts move against what this gateway
	// itself sent (share.go), so several gateways on one key (matrix
	// shards, parallel invocations) add up to the key's rate. Off, every
	// gateway paces at the whole key's rate (Little only).
	ShareKey bool
}

// StewardPolicy is the default adaptive controller. With the provider's rate
// announced in its headers: pacing at 97 % of that rate, and a limit aimed
// at rate × latency (Little's law), with no fixed maximum. Without it: slow
// start then additive increase. Always: growth only while saturated, ×0.75
// once per rate-limit episode with a cooldown honouring Retry-After, and a
// hold on new requests while the provider asked to wait.
func StewardPolicy() Policy {
	return Policy{
		Name: "steward", Start: 20, Min: 1, Cut: 0.75, Little: true, ShareKey: true,
		GrowOnlySaturated: true, CutFromInFlight: true, ReadHeaders: true, Hold: true, Pace: true,
		MinCooldown: 500 * time.Millisecond, LowFraction: 0.10, CriticalFraction: 0.03, GentleCut: 0.9,
	}
}

// FixedPolicy pins the limit at n connections.
func FixedPolicy(n int) Policy {
	return Policy{Name: fmt.Sprintf("fixed %d", n), Fixed: n, Start: n, Min: n, Max: n}
}

// LimitChange is one entry of the limit history.
type LimitChange struct {
	At       time.Time `json:"at"`
	From     int       `json:"from"`
	To       int       `json:"to"`
	Ceiling  int       `json:"ceiling"`
	Reason   string    `json:"reason"`
	Count    int       `json:"count"` // consecutive changes folded into this entry
	Episodes int       `json:"episodes"`
}

// RateInfo is what a response's headers said about the provider's quota.
type RateInfo struct {
	// Fraction is the smallest remaining/limit over the quotas reported; -1 when unknown.
	Fraction float64
	// Remaining is the smallest remaining count reported; -1 when unknown.
	Remaining int64
	// RetryAfter from retry-after-ms / retry-after; 0 when absent.
	RetryAfter time.Duration
	// RequestsPerMinute and TokensPerMinute are the limits the headers
	// announced; 0 when unknown.
	RequestsPerMinute, TokensPerMinute float64
	// Tokens the request used (input + output), when known; set by the gateway.
	Tokens int64
	// InputTokens is the input part of Tokens, when known (0: unknown).
	InputTokens int64
	// RequestsBank and TokensBank are what the provider's requests and
	// tokens buckets hold, when their interval is a long one (10 s or more,
	// from the remaining counts and the reset times); -1 when unknown or
	// the interval is short.
	RequestsBank, TokensBank float64
	// Buckets are the requests [0] and tokens [1] buckets as the headers
	// describe them (limit, remaining, reset), for the key's share.
	Buckets [2]Bucket
}

// Outcome classifies a finished upstream request for the controller.
type Outcome int

const (
	// OutcomeOK is any response that is not congestion (2xx, 4xx other than 429).
	OutcomeOK Outcome = iota
	// OutcomeRateLimited is a 429 that is congestion.
	OutcomeRateLimited
	// OutcomeError is a 5xx or a dropped connection.
	OutcomeError
	// OutcomeCancelled is a request the client gave up on.
	OutcomeCancelled
)

// Ticket is one admitted upstream request.
type Ticket struct {
	start time.Time
	done  bool
	// size is the request's size as the gateway told it (AcquireSized;
	// 0: not told), read against sizeAvg when its usage comes back.
	size float64
	// extra is how much longer than the pace's gap the gap after it was
	// for its size: given back when it is answered with no usage (a 400
	// for a bad body: it cost no tokens, and nothing was learned of it).
	extra time.Duration
	// retryOf is the episode a previous try of the same request was
	// rate-limited in (0: none); episode is the one this try landed in.
	retryOf, episode int
}

// RetryOf marks t as a retry of a request rate-limited in prev's episode:
// another 429 for it belongs to that episode, not a new one.
func (t *Ticket) RetryOf(prev *Ticket) {
	if prev != nil {
		t.retryOf = prev.episode
	}
}

// controllerWindow holds the per-window counters.
type controllerWindow struct {
	episodes, rateLimited, peak int
	saturated, pushback         bool
	// admitted requests since start, to tell when the pace is what holds
	// requests back.
	admitted int
	start    time.Time
}

// Controller is the connection limit on one upstream, shared by all attempts.
// It is safe for concurrent use; all time comes from its Clock.
type Controller struct {
	mu       sync.Mutex
	p        Policy
	clock    clock.Clock
	limit    float64
	ssthresh float64
	ceiling  int
	inflight int
	// saturated is set when the limit was full since the last growth step.
	saturated bool
	// cooldownUntil ends the current rate-limit episode.
	cooldownUntil time.Time
	lastCut       time.Time
	gentleUntil   time.Time
	holdUntil     time.Time
	latency       time.Duration // EWMA of successful request latency
	// pacing state
	pacing         bool
	nextAdmit      time.Time
	lastRetryAfter time.Duration
	rpmLimit       float64
	tpmLimit       float64
	tokensPerReq   float64 // EWMA
	// sizeAvg and inPerReq are EWMAs, over the answered requests whose
	// size was told, of that size and of their input tokens: a request's
	// size against sizeAvg tells how much more or less than tokensPerReq
	// it costs (costWeight).
	sizeAvg, inPerReq float64
	// limitsFrom is when the request whose headers set rpmLimit and
	// tpmLimit was sent: an answer to an older request (sent before the
	// provider changed its limit) does not undo what a newer one said.
	limitsFrom time.Time
	// paceFactor is the share of the announced rate paced at now.
	paceFactor float64
	// bankReq and bankTok are what the provider's long-interval buckets
	// held at the newest answer (-1: unknown, or a short interval).
	bankReq, bankTok float64
	lastRecover      time.Time
	// boost is what a lone gateway adds to its pace, a share of the rate,
	// while its buckets read full (loneTop): from 0 up to lonePace −
	// PaceFactor; boostAt when it last moved.
	boost   float64
	boostAt time.Time
	// hold: a lone gateway whose answers come within shareDelay holds its
	// buckets a little under their top: it paces at lonePace of the rate
	// plus holdExtra, requests a second (lone.go: loneHold).
	hold      bool
	holdExtra float64
	// bank: a gateway that started alone (the tidy start) holds its
	// buckets at bankFloor of their capacity instead of near their top,
	// spending what they held at the start; until a 429. bankCap is each
	// bucket's capacity once learned (lone.go: bankWant).
	bank    bool
	bankCap [2]float64
	// tidyRun counts the readings in a row since the first answer that
	// found every bucket at its top and tidy; -1 once one did not
	// (lone.go: tidyStart).
	tidyRun         int
	lastRateLimited time.Time
	episodes        int
	win             controllerWindow
	history         []LimitChange
	// waiters queue for admission, the keys (attempts) in turn and each
	// key's requests in arrival order (fairqueue.go); only the head tries.
	waiters *fairQueue
	// share is this gateway's share of the key (Policy.ShareKey).
	share keyShare
}

const historyCap = 2000

// nanos is ns nanoseconds as a Duration, the longest one for more than it
// holds (a float's conversion overflows into a negative one).
func nanos(ns float64) time.Duration {
	if ns < float64(math.MaxInt64) {
		return time.Duration(ns)
	}
	return math.MaxInt64
}

// paceSlack is how far behind its schedule the pace may catch up at once.
const paceSlack = 20 * time.Millisecond

// paceStale: a pace wait this much longer than the current pace's gap was
// set at a pace since gone, and restarts at the current one.
const paceStale = time.Minute

// NewController makes a controller with policy p on clock c (nil: the wall clock).
func NewController(p Policy, c clock.Clock) *Controller {
	if c == nil {
		c = clock.Real()
	}
	if p.Fixed > 0 {
		p.Start, p.Min, p.Max = p.Fixed, p.Fixed, p.Fixed
	}
	if p.Min < 1 {
		p.Min = 1
	}
	if p.HardMax <= 0 {
		p.HardMax = 100000
	}
	if p.Max <= 0 || p.Max > p.HardMax {
		p.Max = p.HardMax
	}
	if p.Max < p.Min {
		p.Max = p.Min
	}
	if p.Start < p.Min {
		p.Start = p.Min
	}
	if p.Start > p.Max {
		p.Start = p.Max
	}
	if p.Cut <= 0 || p.Cut >= 1 {
		p.Cut = 0.8
	}
	if p.GentleCut <= 0 || p.GentleCut >= 1 {
		p.GentleCut = 0.9
	}
	if p.Headroom < 1 {
		p.Headroom = 1.2
	}
	if p.PaceFactor <= 0 || p.PaceFactor > 1 {
		p.PaceFactor = 0.97
	}
	ctl := &Controller{
		p: p, clock: c, limit: float64(p.Start), ssthresh: math.Inf(1),
		ceiling: p.Max, waiters: newFairQueue(), paceFactor: p.PaceFactor, bankReq: -1, bankTok: -1,
	}
	ctl.win.start = c.Now()
	ctl.history = append(ctl.history, LimitChange{At: c.Now(), From: 0, To: p.Start, Ceiling: p.Max, Reason: "start (" + p.Name + ")", Count: 1})
	return ctl
}

// Policy returns the controller's policy.
func (c *Controller) Policy() Policy { return c.p }

// Fixed reports whether the limit is pinned.
func (c *Controller) Fixed() bool { return c.p.Fixed > 0 }

// Limit is the current connection limit.
func (c *Controller) Limit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limitLocked()
}

func (c *Controller) limitLocked() int { return int(c.limit) }

// Ceiling is the most the limit may grow to.
func (c *Controller) Ceiling() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ceiling
}

// InFlight is the number of admitted requests not yet done.
func (c *Controller) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

// History returns a copy of the limit history.
func (c *Controller) History() []LimitChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LimitChange(nil), c.history...)
}

func (c *Controller) record(from int, reason string) {
	to := c.limitLocked()
	if from == to && reason != "ceiling" && reason != "clamp" && !strings.HasPrefix(reason, "pacing") {
		return
	}
	now := c.clock.Now()
	if n := len(c.history); n > 0 && c.history[n-1].Reason == reason && (reason == "slow start" || reason == "additive increase" || strings.HasPrefix(reason, "little's law")) {
		h := &c.history[n-1]
		h.To, h.Ceiling, h.Count, h.At = to, c.ceiling, h.Count+1, now
		return
	}
	c.history = append(c.history, LimitChange{At: now, From: from, To: to, Ceiling: c.ceiling, Reason: reason, Count: 1, Episodes: c.episodes})
	if len(c.history) > historyCap {
		c.history = append(c.history[:0:0], c.history[len(c.history)-historyCap:]...)
	}
}

func (c *Controller) wakeLocked() {
	if w := c.waiters.head(); w != nil {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// TryAcquire admits a request when there is room and no hold; it never blocks.
// The second result, when not admitted, is how long a hold still lasts (0: full).
func (c *Controller) TryAcquire() (*Ticket, time.Duration) {
	return c.TryAcquireSized(0)
}

// TryAcquireSized is TryAcquire for a request of size (AcquireSized).
func (c *Controller) TryAcquireSized(size float64) (*Ticket, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tryLocked(size)
}

func (c *Controller) tryLocked(size float64) (*Ticket, time.Duration) {
	if !(size > 0) || math.IsInf(size, 0) {
		size = 0 // untold (NaN, infinite or not positive: not a size)
	}
	var extra time.Duration
	now := c.clock.Now()
	if c.p.Hold && now.Before(c.holdUntil) {
		c.saturated, c.win.saturated = true, true
		return nil, c.holdUntil.Sub(now)
	}
	if c.inflight >= c.limitLocked() {
		c.saturated, c.win.saturated = true, true
		c.share.held(now)
		return nil, 0
	}
	if c.p.ShareKey && c.p.Little && c.p.Fixed == 0 && !c.share.heard {
		// No answer yet: the key may be full of others' requests, so probe
		// (four requests a second, after two seconds one every two), not
		// the connection limit at once.
		if ok, wait := c.share.probe(now); !ok {
			// Requests wait: the limit may grow to the rate's need as soon
			// as the first answer tells it, and the window is the gateway's
			// bound (as a full limit would be), not the samples'.
			c.saturated, c.win.saturated = true, true
			c.share.held(now)
			return nil, wait
		}
	}
	if c.p.Pace && c.pacing {
		if w := c.nextAdmit.Sub(now); w > paceStale {
			if g := c.paceGap(); float64(w-paceStale) > maxCostWeight*float64(g) {
				// The wait was set at a pace long gone (an answer
				// announced a tiny rate, or absurd usage, that the next
				// ones took back): the schedule restarts at the pace of
				// now, or the gateway would wait out the old gap with
				// the key idle. A gap weighed by a large request's size
				// (up to maxCostWeight × the pace's) is not one.
				c.nextAdmit = now.Add(g)
			}
		}
		if now.Before(c.nextAdmit) {
			c.share.held(now)
			return nil, c.nextAdmit.Sub(now)
		}
		// The pace is a schedule, not a gap after each admission: a
		// waiter woken a little late by its timer may go at once, so timer
		// lateness does not slow a fast pace down (at most paceSlack of
		// admissions may leave together).
		base := c.nextAdmit
		if early := now.Add(-paceSlack); base.Before(early) {
			base = early
		}
		gap, plain := c.gapFor(size)
		c.nextAdmit = base.Add(gap)
		extra = max(gap-plain, 0)
	}
	c.inflight++
	c.win.admitted++
	if c.p.ShareKey {
		c.share.sent(now) // bounded (shareKeep) if no answer ever tells the rate
	}
	if c.inflight > c.win.peak {
		c.win.peak = c.inflight
	}
	if c.inflight >= c.limitLocked() {
		c.saturated, c.win.saturated = true, true
	}
	return &Ticket{start: now, size: size, extra: extra}, 0
}

// announcedRate is the provider's sustainable rate in requests a second
// from its headers: the RPM limit, and the TPM limit over the tokens a
// request uses. complete is false while a TPM limit is known but not yet
// the tokens a request uses (the rate may then be lower than returned).
func (c *Controller) announcedRate() (rate float64, complete bool) {
	if c.rpmLimit > 0 {
		rate = c.rpmLimit / 60
	}
	complete = rate > 0
	if c.tpmLimit > 0 {
		if c.tokensPerReq <= 0 {
			return rate, false
		}
		if r := c.tpmLimit / 60 / c.tokensPerReq; rate == 0 || r < rate {
			rate = r
		}
		complete = true
	}
	return rate, complete
}

// paceGap is the spacing between admissions at the provider's sustainable
// rate (PaceFactor of it, to absorb jitter between here and the provider),
// or, with no rate announced, one Retry-After.
func (c *Controller) paceGap() time.Duration {
	if p := c.paceRate(); p > 0 {
		// A rate so low that the gap overflows a Duration (a provider
		// announcing 1e-300 requests a minute) waits as long as one can,
		// not a negative gap that admits everything at once.
		return nanos(float64(time.Second) / p)
	}
	return c.lastRetryAfter
}

// ewma8 is the 1/8-weighted moving average avg after v (v itself when
// avg is 0: no sample yet).
func ewma8(avg, v float64) float64 {
	if avg == 0 {
		return v
	}
	return (avg*7 + v) / 8
}

// Cost weights are held within [minCostWeight, maxCostWeight]: a body
// far larger than the average (an image's base64, counted by its bytes)
// slows the pace at most fourfold for its own gap.
const (
	minCostWeight = 0.25
	maxCostWeight = 4
)

// costWeight is what a request of size costs against the tokens bucket
// over what the average request costs (tokensPerReq): its input moves
// with its size over sizeAvg, its output is the average's. 1 while any
// of these is unknown.
func (c *Controller) costWeight(size float64) float64 {
	if size <= 0 || c.sizeAvg <= 0 || c.tokensPerReq <= 0 {
		return 1
	}
	w := 1 + c.inPerReq*(size/c.sizeAvg-1)/c.tokensPerReq
	return math.Min(maxCostWeight, math.Max(minCostWeight, w))
}

// gapFor is the gap after admitting a request of size: the pace's gap,
// the tokens limit's part of it weighed by the request's cost whenever a
// tokens limit is announced, never shorter than the requests limit's own
// gap (where the requests limit binds, only a request large enough to
// outrun the tokens limit waits longer). plain is the pace's own gap.
func (c *Controller) gapFor(size float64) (gap, plain time.Duration) {
	g := c.paceGap()
	w := c.costWeight(size)
	if w == 1 || c.tpmLimit <= 0 || c.paceRate() <= 0 {
		return g, g
	}
	// The requests' and the tokens' rates, in requests a second: the
	// gap is set by the tighter of them, so the request's weighed gap
	// stands against the requests' gap at the same pace.
	tok := c.tpmLimit / 60 / c.tokensPerReq
	req := math.Inf(1)
	if c.rpmLimit > 0 {
		req = c.rpmLimit / 60
	}
	bind := math.Min(tok, req) // what paceGap was set from
	return nanos(float64(g) * math.Max(bind/req, w*bind/tok)), g
}

// fullPace is what a lone gateway paces at, in requests a second:
// PaceFactor of the announced rate plus the bank it may spend (0: no rate).
func (c *Controller) fullPace() float64 {
	rate, _ := c.announcedRate()
	if rate <= 0 {
		return 0
	}
	return c.paceFactor*rate + c.bankRate()
}

// paceRate is the pace in requests a second: the lone gateway's, or this
// gateway's share of the key once the readings told it (ShareKey).
func (c *Controller) paceRate() float64 {
	p := c.fullPace()
	if c.p.ShareKey && c.share.frac > 0 {
		p *= c.share.frac
	}
	if c.hold && c.share.lone() && c.share.heard {
		// Alone at fast calls: the buckets' level, not the boost.
		rate, _ := c.announcedRate()
		return lonePace*rate + c.holdExtra
	}
	if c.boost > 0 && c.share.lone() {
		rate, _ := c.announcedRate()
		p += c.boost * rate
	}
	return p
}

// SharePace is the pace this gateway holds as its share of the key, in
// requests a second, and the key's use and this gateway's as shares of the
// limit at the last update (0s before the first).
func (c *Controller) SharePace() (pace, key, own float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paceRate(), c.share.lastRho, c.share.lastOwn
}

// bankRate is how fast, on top of the pace, the quota a long-interval
// bucket has banked may be spent: what it holds above a tenth of its
// capacity, over three latencies (at least 10 s), since the bucket's level
// is known only as it was when the answers now arriving were sent. The
// bank of a bucket that starts full (an idle account: up to a minute's
// quota) is spent instead of left unused; as it runs down, the extra rate
// runs down with it, and the bucket settles near a tenth full.
func (c *Controller) bankRate() float64 {
	if c.bankReq < 0 || c.paceFactor < c.p.PaceFactor || c.rpmLimit <= 0 {
		return 0
	}
	spare := c.bankReq - 0.1*c.rpmLimit
	if c.tpmLimit > 0 {
		if c.bankTok < 0 || c.tokensPerReq <= 0 {
			return 0
		}
		spare = math.Min(spare, (c.bankTok-0.1*c.tpmLimit)/c.tokensPerReq)
	}
	if spare <= 0 {
		return 0
	}
	horizon := math.Max(10, 3*c.latency.Seconds())
	return spare / horizon
}

// littleTarget is the limit the announced rate needs at the measured
// latency; 0 when either is unknown.
func (c *Controller) littleTarget() float64 {
	rate, complete := c.announcedRate()
	if !complete || rate <= 0 || c.latency <= 0 {
		return 0
	}
	// The whole key's pace, not this gateway's share of it: the share moves
	// with the others' use, and the pace, not the limit, holds it.
	return math.Ceil(c.p.Headroom*c.fullPace()*c.latency.Seconds()) + 2
}

// Pacing reports whether admissions are being spaced at the provider's rate.
func (c *Controller) Pacing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pacing
}

// Acquire blocks until a request may go upstream, or ctx ends. It is
// AcquireFor with no key: such requests share one anonymous key.
func (c *Controller) Acquire(ctx context.Context) (*Ticket, error) {
	return c.AcquireFor(ctx, nil)
}

// AcquireFor blocks until a request of key's may go upstream, or ctx ends.
// key (comparable; the gateway passes the attempt) is whose request it is:
// waiting requests are admitted one key at a time in turn, each key's in
// arrival order (fairQueue), so a key with many requests waiting gets no
// more admissions than one with a single request. Only the head of the
// queue watches the clock, so a hold or a pace wakes one goroutine, not
// all of them.
func (c *Controller) AcquireFor(ctx context.Context, key any) (*Ticket, error) {
	return c.AcquireSized(ctx, key, 0)
}

// AcquireSized is AcquireFor for a request of size: what its input costs in
// some unit proportional to its tokens (the gateway tells the body's
// bytes; 0: unknown). With a tokens limit announced, the gap after the
// request is weighed by what it costs against the average request
// (costWeight, gapFor), so requests of random sizes spend the tokens
// bucket at an even rate, not in bursts of big ones.
func (c *Controller) AcquireSized(ctx context.Context, key any, size float64) (*Ticket, error) {
	c.mu.Lock()
	if c.waiters.Len() == 0 {
		if t, _ := c.tryLocked(size); t != nil {
			c.mu.Unlock()
			return t, nil
		}
	}
	e := c.waiters.push(key)
	for {
		var hold time.Duration
		head := c.waiters.head() == e
		if head {
			var t *Ticket
			t, hold = c.tryLocked(size)
			if t != nil {
				c.waiters.admitted(e)
				c.wakeLocked() // the next waiter may fit too
				c.mu.Unlock()
				return t, nil
			}
		}
		c.mu.Unlock()
		var timer clock.Timer
		var fired <-chan time.Time
		if head && hold > 0 {
			timer = c.clock.NewTimer(hold)
			fired = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			c.mu.Lock()
			c.waiters.remove(e)
			c.wakeLocked()
			c.mu.Unlock()
			return nil, fmt.Errorf("wait for upstream connection: %w", ctx.Err())
		case <-e.ch:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		c.mu.Lock()
	}
}

// Done releases t and feeds the request's outcome to the controller.
func (c *Controller) Done(t *Ticket, o Outcome, info RateInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t == nil || t.done {
		return
	}
	t.done = true
	c.inflight--
	defer c.wakeLocked()
	now := c.clock.Now()
	before, _ := c.announcedRate()
	if (info.RequestsPerMinute > 0 || info.TokensPerMinute > 0) && !t.start.Before(c.limitsFrom) {
		c.limitsFrom = t.start
		if info.RequestsPerMinute > 0 {
			c.rpmLimit = info.RequestsPerMinute
		}
		if info.TokensPerMinute > 0 {
			c.tpmLimit = info.TokensPerMinute
		}
		c.bankReq, c.bankTok = info.RequestsBank, info.TokensBank
	}
	if o == OutcomeOK && info.Tokens <= 0 && t.extra > 0 && c.nextAdmit.After(now) {
		// Answered, but with no usage (a 400 for a bad body): its size
		// cost nothing, so the schedule takes back the extra (not before
		// now), or a sandbox sending large bodies the provider refuses
		// would take four gaps a turn. A 429 or an error keeps it: the
		// key is over (or the provider struggling), and giving gaps back
		// then sent the next requests into the same bucket sooner
		// (simulated 10 s cells bound by tokens, seeds 1–90: 4
		// invocations 85 → 77 runs meeting the target, 8: 87 → 81).
		c.nextAdmit = c.nextAdmit.Add(-t.extra)
		if c.nextAdmit.Before(now) {
			c.nextAdmit = now
		}
	}
	if info.Tokens > 0 {
		// A request never uses more than the key's tokens a minute (the
		// provider refuses one that would, as it can never pass): usage
		// beyond that is an upstream's nonsense, and would take the rate
		// to one request in years.
		tokens := float64(info.Tokens)
		if c.tpmLimit > 0 {
			tokens = math.Min(tokens, c.tpmLimit)
		}
		c.tokensPerReq = ewma8(c.tokensPerReq, tokens)
		if t.size > 0 {
			in := tokens
			if info.InputTokens > 0 {
				in = math.Min(float64(info.InputTokens), tokens)
			}
			c.sizeAvg, c.inPerReq = ewma8(c.sizeAvg, t.size), ewma8(c.inPerReq, in)
		}
	}
	if c.p.Little && c.p.Pace && c.p.Fixed == 0 && !c.pacing {
		if rate, _ := c.announcedRate(); rate > 0 {
			c.pacing = true
			c.record(c.limitLocked(), "pacing on (rate announced)")
		}
	}
	if c.p.ShareKey && c.p.Little && c.p.Fixed == 0 && (o == OutcomeOK || o == OutcomeRateLimited) {
		if o == OutcomeRateLimited {
			c.share.refuse(t.start)
		}
		if !info.Buckets[0].OK && !info.Buckets[1].OK {
			c.share.heard = true // the provider tells no buckets: nothing to wait for
			if o == OutcomeOK && info.Tokens > 0 {
				c.share.unread(t.start, c.latency)
			}
		}
		if rate, complete := c.announcedRate(); rate > 0 && complete {
			from := c.paceRate()
			if c.share.reading(t.start, info.Buckets, o == OutcomeRateLimited, shareInput{full: c.fullPace(), rate: rate, tokensPerReq: c.tokensPerReq, tokens: float64(info.Tokens), latency: c.latency, now: now}) {
				if to := c.paceRate(); math.Abs(to-from) >= 0.1*from {
					c.record(c.limitLocked(), fmt.Sprintf("pacing share of the key (%.0f %% of its rate)", 100*to/rate))
				}
			}
		}
	}
	if c.p.ShareKey {
		c.tidyStart(o, info)
		c.loneTop(now, o, info)
		c.loneHold(o, info)
	}
	if o == OutcomeError || ((o == OutcomeOK || c.share.haveAnchor) && !c.share.longProbe) {
		c.share.heard = true
	}
	switch o {
	case OutcomeRateLimited:
		after, _ := c.announcedRate()
		c.lastRecover = now
		c.rateLimitedLocked(now, t, info, before > 0 && after >= 0.99*before)
	case OutcomeOK:
		lat := now.Sub(t.start)
		if c.latency == 0 {
			c.latency = lat
		} else {
			c.latency = (c.latency*7 + lat) / 8
		}
		c.okLocked(now, info)
	}
}

func (c *Controller) cooldown(retryAfter time.Duration) time.Duration {
	d := c.p.MinCooldown
	lat := c.latency
	if lat == 0 {
		lat = time.Second // no answer yet: assume a model call takes a second
	}
	if 2*lat > d {
		d = 2 * lat
	}
	if retryAfter > d {
		d = retryAfter
	}
	return d
}

// cutBase is what a cut multiplies: the limit, or the requests in flight
// (counting the one just answered) when fewer and CutFromInFlight is set.
func (c *Controller) cutBase() float64 {
	if f := float64(c.inflight + 1); c.p.CutFromInFlight && f < c.limit {
		return f
	}
	return c.limit
}

// rateLimitedLocked answers a 429. underRate: the request was refused
// under the rate the provider had announced before, and still announces
// (not the answer that first told the rate, or a lower one).
func (c *Controller) rateLimitedLocked(now time.Time, t *Ticket, info RateInfo, underRate bool) {
	c.win.rateLimited++
	c.win.pushback = true
	c.lastRateLimited = now
	if info.RetryAfter > 0 {
		c.lastRetryAfter = info.RetryAfter
	}
	if c.p.Pace && c.p.Fixed == 0 && !c.pacing && c.paceGap() > 0 {
		c.pacing = true
		c.record(c.limitLocked(), "pacing on (429)")
	}
	if c.p.Hold && info.RetryAfter > 0 {
		if until := now.Add(info.RetryAfter); until.After(c.holdUntil) {
			c.holdUntil = until
		}
	}
	if c.p.Fixed > 0 {
		return
	}
	// One cut per episode: 429s inside the cooldown, or for requests sent
	// before the last cut, belong to the episode already answered.
	if now.Before(c.cooldownUntil) || t.start.Before(c.lastCut) || (t.retryOf > 0 && t.retryOf == c.episodes) {
		t.episode = c.episodes
		return
	}
	c.episodes++
	c.win.episodes++
	t.episode = c.episodes
	from := c.limitLocked()
	if rate, complete := c.announcedRate(); c.p.Little && rate > 0 && complete {
		// Pacing holds the rate, so the answer to a 429 is a slower pace,
		// not fewer connections: cutting the limit below what is in flight
		// would stop admissions for a whole latency (30 s at 30 s a call).
		reason := "rate-limit episode (429): limit announced"
		if underRate {
			// Refused under the rate it announces: what the provider
			// really takes is less (short-interval enforcement, tokens per
			// request above the average, other callers on the key).
			c.paceFactor = math.Max(c.paceFactor*0.9, c.p.PaceFactor/20)
			reason = fmt.Sprintf("rate-limit episode (429): pace %.0f %% of the announced rate", 100*c.paceFactor)
		}
		if target := c.littleTarget(); target > 0 && target < c.limit {
			c.limit = math.Max(math.Max(target, float64(c.inflight+1)), float64(c.p.Min))
		}
		c.lastCut = now
		c.cooldownUntil = now.Add(max(c.p.MinCooldown, time.Second, info.RetryAfter))
		c.record(from, reason)
		return
	}
	nl := math.Floor(c.cutBase() * c.p.Cut)
	if nl < float64(c.p.Min) {
		nl = float64(c.p.Min)
	}
	c.limit = nl
	c.ssthresh = nl
	c.lastCut = now
	c.cooldownUntil = now.Add(c.cooldown(info.RetryAfter))
	c.saturated = false
	reason := "rate-limit episode (429)"
	if info.RetryAfter > 0 {
		reason = fmt.Sprintf("rate-limit episode (429, retry-after %s)", info.RetryAfter)
	}
	c.record(from, reason)
}

func (c *Controller) okLocked(now time.Time, info RateInfo) {
	if c.p.Fixed > 0 {
		return
	}
	if c.p.Little {
		if rate, _ := c.announcedRate(); rate > 0 {
			c.littleLocked(now, info)
			return
		}
	}
	if c.p.Pace {
		switch {
		case !c.pacing && info.Fraction >= 0 && info.Fraction <= c.p.LowFraction && c.paceGap() > 0:
			c.pacing = true
			c.record(c.limitLocked(), "pacing on (remaining quota low)")
		case c.pacing && info.Fraction > 2*c.p.LowFraction:
			c.pacing = false
			c.record(c.limitLocked(), "pacing off (quota recovered)")
		case c.pacing && info.Fraction < 0 && now.Sub(c.lastRateLimited) > 2*c.cooldown(0):
			c.pacing = false
			c.record(c.limitLocked(), "pacing off (no 429 lately)")
		}
	}
	if c.p.ReadHeaders && info.Fraction >= 0 {
		if info.Fraction <= c.p.CriticalFraction || info.Remaining == 0 {
			c.win.pushback = true
			if !now.Before(c.gentleUntil) && !now.Before(c.cooldownUntil) {
				from := c.limitLocked()
				nl := math.Floor(c.cutBase() * c.p.GentleCut)
				if nl < float64(c.p.Min) {
					nl = float64(c.p.Min)
				}
				c.limit = nl
				if nl < c.ssthresh {
					c.ssthresh = nl
				}
				c.gentleUntil = now.Add(c.cooldown(0))
				c.saturated = false
				c.record(from, "remaining quota nearly exhausted")
			}
			return
		}
		if info.Fraction <= c.p.LowFraction {
			c.win.pushback = true
			return
		}
	}
	if now.Before(c.cooldownUntil) || now.Before(c.gentleUntil) {
		return
	}
	if c.p.GrowOnlySaturated && !c.saturated {
		return
	}
	top := float64(c.ceiling)
	if c.limit >= top {
		return
	}
	from := c.limitLocked()
	reason := "additive increase"
	// Slow start below the last cut, or while the provider reports at least
	// half its quota left (plenty of headroom: growing slowly wastes it).
	if c.limit < c.ssthresh || (c.p.ReadHeaders && info.Fraction >= 0.5) {
		c.limit++
		reason = "slow start"
	} else {
		c.limit += 1 / c.limit
	}
	if c.limit > top {
		c.limit = top
	}
	if c.limitLocked() != from {
		c.saturated = false
		c.record(from, reason)
	}
}

// littleLocked moves the limit when the provider announces its rate.
// Pacing holds the rate; the limit only has to carry rate × latency
// requests, so it goes straight to that target once requests fill it (no
// slow climb over many round trips at 30-second latencies), and down to it
// when the rate or the latency falls. Remaining-quota headers are a pacing
// matter here, never a reason to stop.
func (c *Controller) littleLocked(now time.Time, info RateInfo) {
	// The pace climbs back toward PaceFactor while no 429 comes.
	if c.paceFactor < c.p.PaceFactor && !now.Before(c.cooldownUntil) {
		if !c.lastRecover.IsZero() {
			c.paceFactor = math.Min(c.p.PaceFactor, c.paceFactor*(1+0.01*now.Sub(c.lastRecover).Seconds()))
		}
	}
	c.lastRecover = now
	// Remaining quota, low or gone, is neither a reason to move the limit
	// nor pushback here: paced at 97 % of the rate, a bucket another client
	// emptied refills by only 3 % of the rate, so it reads near zero for
	// minutes while every request goes through; counted as pushback, it
	// would swing the ramp up and down. 429s are the pushback.
	target := c.littleTarget()
	if target <= 0 {
		// A TPM limit with the tokens a request uses still unknown:
		// grow as AIMD would until the first answers tell.
		if c.saturated && !now.Before(c.cooldownUntil) && c.limit < float64(c.ceiling) {
			from := c.limitLocked()
			c.limit = math.Min(c.limit+1, float64(c.ceiling))
			c.saturated = false
			c.record(from, "slow start")
		}
		return
	}
	target = math.Max(math.Min(target, float64(c.ceiling)), float64(c.p.Min))
	from := c.limitLocked()
	switch {
	case target < 0.85*c.limit:
		// Down only on a real change (a lower limit, faster answers), not
		// on every wobble of the measured latency; and no lower than what
		// is in flight, so the pace, not the limit, sets the rate while the
		// calls sent at the old rate finish.
		c.limit = math.Min(c.limit, math.Max(target, float64(c.inflight+1)))
		c.record(from, "little's law (rate × latency fell)")
	case target > c.limit && (c.saturated || !c.p.GrowOnlySaturated) && !now.Before(c.cooldownUntil):
		c.limit = target
		c.saturated = false
		c.record(from, "little's law (rate × latency)")
	}
}

// SetCeiling sets the most the limit may grow to (the ramp raises it, R3).
// Lowering it below the limit brings the limit down; 0 hands the ceiling
// back to the policy's own (its Max, else the hard ceiling). Fixed mode
// ignores it.
func (c *Controller) SetCeiling(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p.Fixed > 0 {
		return
	}
	if n <= 0 {
		n = c.p.Max
	}
	if n < c.p.Min {
		n = c.p.Min
	}
	if n > c.p.HardMax {
		n = c.p.HardMax
	}
	if n == c.ceiling {
		return
	}
	from := c.limitLocked()
	c.ceiling = n
	if c.limit > float64(n) {
		c.limit = float64(n)
	}
	c.record(from, "ceiling")
	c.wakeLocked()
}

// Clamp sets the ceiling to where the limit already fell (R2). Fixed mode ignores it.
func (c *Controller) Clamp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p.Fixed > 0 {
		return
	}
	from := c.limitLocked()
	c.ceiling = from
	if c.ceiling < c.p.Min {
		c.ceiling = c.p.Min
	}
	c.record(from, "clamp")
}

// ControllerWindow is what the controller saw since the last call of Window.
type ControllerWindow struct {
	Episodes, RateLimited, Peak, InFlight, Limit, Ceiling int
	Saturated, Pushback                                   bool
	// Need is how many calls in flight this gateway's pace keeps busy at
	// the measured latency (pace × latency; 0 while either is unknown):
	// the ramp tends sooner while the setpoints add up to less.
	Need int
}

// Window returns and resets the controller's per-window counters.
// Saturated also reports a window whose admissions ran at 90 % or more of
// the pace: then the provider's rate, not the sample limit, holds work back.
func (c *Controller) Window() ControllerWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	w := ControllerWindow{
		Episodes: c.win.episodes, RateLimited: c.win.rateLimited, Peak: c.win.peak,
		InFlight: c.inflight, Limit: c.limitLocked(), Ceiling: c.ceiling,
		Saturated: c.win.saturated || c.rateBoundLocked(now),
		// The key over its target while requests waited (waitedLocked):
		// the provider takes no more from this gateway (share.go).
		Pushback: c.win.pushback || (c.p.ShareKey && c.share.over && c.waitedLocked()),
	}
	if p := c.paceRate(); p > 0 && c.latency > 0 && c.p.Fixed == 0 {
		w.Need = int(math.Ceil(p * c.latency.Seconds()))
	}
	c.win = controllerWindow{peak: c.inflight, start: now}
	return w
}

// waitedLocked reports whether requests waited in the window: one was held
// back in it (by the limit or the pace), or some are waiting now (for the
// limit, the pace or a 429's Retry-After: while the key reads over, each
// means the provider takes no more from this gateway). A
// waiter asleep on the pace's timer tries no admission until the timer
// fires, so at a slow pace (a gateway yielded to its floor on a key others
// fill: a minute between admissions at 45 a minute) the last hold can be
// far older than the window while the queue never emptied; read from the
// holds alone, the key over reported pushback only in the windows an
// admission, an answer or a new ceiling happened to wake the queue, never
// two in a row, and the ramp never reversed.
func (c *Controller) waitedLocked() bool {
	return c.share.heldAt.After(c.win.start) || c.waiters.Len() > 0
}

// rateBoundLocked reports whether admissions since the window started ran
// at 90 % of the pace or more.
func (c *Controller) rateBoundLocked(now time.Time) bool {
	if !c.pacing || c.p.Fixed > 0 {
		return false
	}
	rate, _ := c.announcedRate()
	el := now.Sub(c.win.start).Seconds()
	return rate > 0 && el > 0 && float64(c.win.admitted) >= 0.9*c.paceRate()*el
}

// Episodes is the number of rate-limit episodes since start.
func (c *Controller) Episodes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.episodes
}

// lonePace is the most a lone gateway paces at, a share of the rate:
// above PaceFactor only while its buckets read full and tidy (loneTop).
const lonePace = 0.995

// loneTop moves the lone gateway's boost on an answer. A gateway alone on
// the key paces at PaceFactor of the rate, which keeps the bucket full and
// lets the rest of its refill go unused. While the answers find every
// bucket at its top and tidy (nobody else took from it just before: see
// keyShare.tidy), the pace climbs toward lonePace, 1 % of the rate a
// second. A bucket below its top (the key used up to its refill, by this
// gateway's jitter or by someone else), a reading that is not tidy, a 429
// or a share of the key ends the boost at once.
func (c *Controller) loneTop(now time.Time, o Outcome, info RateInfo) {
	if o == OutcomeError {
		return
	}
	full := o == OutcomeOK && c.share.heard && c.share.lone() && c.share.lastTidy > 0 && c.paceFactor >= c.p.PaceFactor
	for k := range info.Buckets {
		if full && info.Buckets[k].OK && info.Buckets[k].fraction() < shareAtTop {
			full = false
		}
	}
	if !full {
		c.boost = 0
	} else if !c.boostAt.IsZero() {
		c.boost = math.Min(c.boost+0.01*now.Sub(c.boostAt).Seconds(), math.Max(lonePace-c.p.PaceFactor, 0))
	}
	c.boostAt = now
}
