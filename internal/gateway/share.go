package gateway

import (
	"math"
	"net/http"
	"sort"
	"strings"
	"time"
)

// One key, many gateways (issue 25). Matrix shards and parallel
// invocations each run a gateway of their own, and every one of them talks
// to the provider with the same key: paced at 97 % of the whole key's rate,
// N gateways ask for N times what the key allows. There is no service
// between them (shards run on different machines); what they share is what
// the provider tells every client of the key. Its remaining counts fall
// with everyone's use, not just this gateway's, so the difference between
// how far the bucket fell and what this gateway itself sent in the same
// span is the others' use. The rule, per answer:
//
//   - Every answer with limit, remaining and reset headers is a reading of
//     the key's bucket at the moment the request reached the provider (its
//     send time here): the level as a fraction of the bucket, and, from the
//     reset time, the bucket's interval (so the fraction's drift converts
//     into requests or tokens a second).
//   - Between two readings at least a span apart (2 s, or half a call's
//     latency if longer; 250 ms when the newer one is a 429, which comes
//     back at once), the key's use ρ is the refill minus the drift, as a
//     share of the limit; this gateway's own use u is what it sent in the
//     span that was not refused. What it got through, which the steps
//     below scale, is measured from when its pace began if that is later,
//     and after a 429 over a whole span back (not the quarter second);
//     a 429 that finds nothing got through since a pace begun less than a
//     span ago measures over the whole span back all the same (a sliver
//     of one or two refused requests reads 0, and sent the pace to the
//     floor).
//   - Alone (its own use is at least 0.9 of the key's, and the reading is
//     not a 429: at an empty bucket ρ reads no more than 1 whatever the
//     demand, so the biggest user would read alone and every other yield):
//     the lone gateway's pace, 97 % of the rate plus what a long bucket has
//     banked, exactly as before.
//   - Shared, and over the target τ (the lone gateway's share of the rate,
//     × 0.97 to leave the others room for jitter and for the burst a
//     joining gateway sends before it knows the rate): the pace becomes
//     what the provider admitted from this gateway in the span, scaled by
//     1 + β(τ/ρ − 1) (β = 0.5). Every gateway of the key does the same, so
//     the key's total moves by β × (τ − ρ) whatever their number, each
//     keeping its share of it: no gateway needs to know how many others
//     there are. After a 429 (the bucket empty, so ρ reads 1 whatever the
//     demand) this is what the provider let through, at once.
//   - Room (ρ under τ): the same proportional step up (at most × 1.5),
//     plus an additive 0.5 % of the key's rate a second, the same for every
//     gateway: additive increase and multiplicative decrease make the
//     shares fairer each cycle.
//   - At the bucket's top (85 % full or more) the refill it cannot hold is
//     lost, ρ reads high and says nothing of the room: the pace probes up
//     5 % a second (and the additive step), until the bucket leaves its top
//     or a 429 answers; each update in a row that finds the top again
//     probes 1.5 times faster, up to 1.5⁴. This is how a shard that ended
//     early is noticed by the others when their buckets refill to the top.
//     With both a requests and a tokens bucket, the one this gateway uses
//     most binds, and ρ is read from a bucket not at its top.
//   - Both climbs (the probe and the additive step) are per second while
//     the feedback comes within 4 s (a call's latency plus a span); at
//     slower calls they are slower in proportion (at 10 s calls, 4 ÷ 15),
//     so that a climb is the same per round of feedback: the readings that
//     answer it come a latency later, and climbing on all the while
//     overshoots into 429s.
//   - Shares at slow calls (the same slowdown): the top probe is scaled
//     by the gateway's share of the key (× 4 u/ρ, within ¼–2), so that
//     eight gateways climb together no faster than two; at faster calls
//     it is not (scaled, a gateway squeezed small climbs too slowly when
//     the others end). The proportional steps keep shares as they are and
//     the additive one moves them too little at this feedback delay, so
//     a gateway with more than half of the key's use (u/ρ, or after a
//     429 the last exact one) yields the excess, its pace × (1 − (u/ρ −
//     ½)), and at the top one with more than 0.65 of it does not probe:
//     the room goes to the smaller ones. Otherwise a gateway that joined
//     a key another filled stays small, and when the big one ends it must
//     climb the whole key back by probing.
//   - Joining (before its first answer): the gateway knows nothing of the
//     key, so it probes with four requests a second instead of the
//     connection limit's worth at once, and after two seconds with one
//     every two seconds (at slow calls no answer comes for a latency, and
//     four a second beside others that fill the key overflowed its bucket
//     for all of it); the first answer (a 429 too, which
//     comes back at once) ends the probe, and so does an answer with no
//     buckets (the provider tells none: nothing to wait for).
//   - Joining at slow calls (the first answer more than a span after its
//     request, from a bucket that then held less than that latency of
//     refill): that reading is from before the probe reached the key and
//     others may have emptied the bucket since, so the probe goes on until
//     a reading a span later; the pace then starts at half of what the
//     others (ρ − u over the probe) leave of the target, or at the probe's
//     own rate when that is more (the key over: the others cut too); alone,
//     the lone pace; at the top, half of it, or the probe's own rate if
//     less when none of its answers read tidy and some did not: the others
//     keep the key busy and its top is a moment's (probeStart); a tidy
//     answer or two among at least twice as many untidy ones, twice that
//     rate if less.
//   - Tidy readings: a reset in milliseconds times the rate is how far
//     the bucket was short of full; near its top, beyond what this
//     gateway's own requests of the last request's worth of refill still
//     hold, that is someone else's requests (tidy).
//   - Slow start: from its first answer a gateway paces at half the lone
//     pace, or, when the emptiest bucket is less full than that, at that
//     fraction of it (the fair guess: what the others leave of the key;
//     after a 429, the floor), or at the probe's rate when the first
//     reading was not tidy, or far below the top of a bucket that
//     refills within a span (the key in use: the fair guess may be more
//     than the others leave), and doubles it at every update that finds
//     room or the top, until one finds the key over (or it is alone, when
//     it takes the lone pace at once); in the slow start an update needs
//     half a second between readings (or half a latency), not a span.
//     Readings of requests sent before the pace began (its probes) do not
//     update it: the first update comes from a reading of the pace itself.
//   - A lone gateway whose answers find every bucket at its top and tidy
//     paces up to 99.5 % of the rate (Controller.loneTop).
//   - The others have left: a gateway holding a share (past its slow
//     start) whose answers over a span, at least shareTidyRun of them in a
//     row, all read tidy takes the lone pace at once instead of probing
//     the top back; readings of requests sent before that do not update
//     it. Another user's requests make about their rate ÷ the key's of the
//     readings untidy, so a run that long is rare while anyone else sends
//     more than a few per cent of the key. At slow calls answers come back
//     out of order (the latency varies by more than the gap between
//     requests), so an answer that is not tidy ends only the part of the
//     run sent before it (an answer to a request sent before the others
//     left, arriving late, says nothing of those sent after), and the
//     lone pace comes at the answer that completes the run, not at the
//     next update (tidyRunOf) — for a gateway with at most half of the
//     key's use: one with more, beside a joiner starved small, would
//     read the others gone while the joiner's requests were in flight.
//   - Alone by tokens stays alone: at slow calls a gateway alone at its
//     last update whose own use is read from the tokens bucket (an
//     estimate, ± 7 %) stays alone from shareStayAlone of the key's use
//     (stayAlone).
//   - A gateway whose requests neither waited for the limit or the pace
//     nor filled it (demand-bound) keeps its pace, but no more than a
//     quarter above what it sent.
//   - While the last update found the key over the lone target (97 % of
//     its rate, not just the shared one) and requests waited for
//     the pace (held back in the window, or still waiting at its end:
//     Controller.waitedLocked), the window reports pushback: the provider
//     cannot take more from this gateway, whatever the 429s (a gateway
//     that yields its share meets few of them), so the ramp stops
//     climbing and, if it lasts, reverses (R2).
//   - A 429 still lowers the pace factor as before (short-interval
//     enforcement, tokens above the average). The pace is kept as a share
//     of the lone gateway's, so it follows the announced rate and the
//     tokens a request uses between readings. The connection limit still
//     aims at the whole key's rate × latency: the pace, not the limit,
//     holds the share.

// Bucket is one of the provider's rate-limit buckets as one answer's
// headers describe it.
type Bucket struct {
	// Limit is the per-minute limit; Remaining what is left, in the same
	// per-minute unit; Reset how long until the bucket is full again.
	Limit, Remaining float64
	Reset            time.Duration
	// OK: all three were read.
	OK bool
	// Coarse: the reset came as a time of day to the second (Anthropic's
	// format), too coarse to tell a request's worth of the bucket (tidy).
	Coarse bool
}

// fraction is how full the bucket is (0–1).
func (b Bucket) fraction() float64 { return math.Min(1, math.Max(0, b.Remaining/b.Limit)) }

// short is how far the bucket is short of full, in requests or tokens:
// its reset times its rate (0 without a reset).
func (b Bucket) short() float64 { return b.Reset.Seconds() * b.Limit / 60 }

// interval is the bucket's refill interval in seconds (the time it takes
// to refill from empty) as the reset time tells it; 0 when the bucket is
// too full to tell (the reset's rounding then dominates).
func (b Bucket) interval() float64 {
	f := b.fraction()
	if !b.OK || f > 0.9 || b.Reset <= 0 {
		return 0
	}
	return b.Reset.Seconds() / (1 - f)
}

// parseBuckets reads the requests and tokens buckets (each format's
// RateHeaders: OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-*,
// whose reset is a time, to the second).
func parseBuckets(h http.Header, now time.Time) [2]Bucket {
	var out [2]Bucket
	names := bucketHeaders()
	for k := range names {
		for _, n := range names[k] {
			ls, rs, ts := h.Get(n[0]), h.Get(n[1]), strings.TrimSpace(h.Get(n[2]))
			if ls == "" || rs == "" || ts == "" {
				continue
			}
			l, ok1 := headerNumber(ls)
			r, ok2 := headerNumber(rs)
			if !ok1 || !ok2 || l <= 0 || r < 0 {
				continue
			}
			var reset time.Duration
			coarse := false
			if d, err := time.ParseDuration(ts); err == nil {
				reset = d
			} else if t, err := time.Parse(time.RFC3339, ts); err == nil {
				reset, coarse = max(t.Sub(now), 0), t.Nanosecond() == 0
			} else {
				continue
			}
			out[k] = Bucket{Limit: l, Remaining: math.Min(r, l), Reset: reset, OK: true, Coarse: coarse}
			break
		}
	}
	return out
}

// Constants of the shared-key rule.
const (
	shareStart      = 0.5                    // the pace at the first answer, a share of the lone gateway's
	shareSpan       = 2 * time.Second        // least span between readings for an update
	shareSpan429    = 250 * time.Millisecond // … when the newer reading is a 429
	shareSlowSpan   = 500 * time.Millisecond // … in the slow start (or half a call's latency if longer)
	shareGain       = 0.5                    // β
	shareAdditive   = 0.005                  // additive climb, a share of the key's rate a second
	shareAlone      = 0.9                    // a gateway with less of the key's use than this shares it
	shareSlack      = 0.94                   // … and aims at this much of the lone gateway's target
	shareProbe      = 0.05                   // climb at the bucket's top, a share of the pace a second
	shareAtTop      = 0.85                   // a bucket this full is "at its top": ρ reads high
	shareFloor      = 0.02                   // the pace never falls below this share of the key's rate
	shareDemandCap  = 1.25                   // a demand-bound pace is at most this × what was sent
	shareProbeGap   = 250 * time.Millisecond // before its first answer, one request this often
	probeDecayAfter = 2 * time.Second        // … for this long, then …
	probeDecayGap   = 2 * time.Second        // … one this often until it is heard
	shareDelay      = 4 * time.Second        // climbs are per second up to this feedback delay
	shareProbeAccel = 1.5                    // each update in a row at the top probes this much faster …
	shareProbeRuns  = 4                      // … up to this many times
	shareFair       = 0.5                    // at slow calls, a gateway with more of the key's use than this yields
	shareTopHold    = 0.65                   // … and with more than this, does not probe at the top
	shareScaleK     = 4.0                    // at slow calls the top probe is × this × the own share …
	shareScaleMin   = 0.25                   // … at least this …
	shareScaleMax   = 2.0                    // … and at most this
	shareTidyRun    = 20                     // this many tidy readings in a row, over a span: the others have left
	shareStayAlone  = 0.8                    // at slow calls, a gateway alone by tokens stays alone from this much of the key's use
	shareBusyTidy   = 2                      // a long probe at the top with at most this many tidy answers …
	shareBusyRatio  = 2                      // … and this many untidy ones for each joins a busy key too (probeStart)
)

type shareReading struct {
	at time.Time
	f  [2]float64
	ok [2]bool
	// top: the bucket was at its top (shareAtTop full, or short of full
	// by no more than this answer's own request: ownOnly).
	top [2]bool
}

// keyShare is a gateway's estimate of its share of the key (its own pace),
// from the provider's readings of the key's buckets.
type keyShare struct {
	// pace is the own pace in requests a second at the last update, and
	// frac that pace as a share of the lone gateway's pace then (0: none
	// yet, or alone: the lone gateway's pace). The controller paces at
	// frac × its lone pace, so the pace follows the announced rate and the
	// tokens a request uses between updates.
	pace, frac float64
	// ivl is each bucket's interval in seconds, as last learned.
	ivl [2]float64
	// anchor is the reading the next update measures from.
	anchor     shareReading
	haveAnchor bool
	// sends are this gateway's admissions in time order; refused the send
	// times of those answered 429, in time order.
	sends, refused []time.Time
	// heldAt is the last time an admission waited (for the limit or the
	// pace): a gateway that waited is not demand-bound.
	heldAt time.Time
	// over: the last update found the key over its target (others, or
	// this gateway with them, take more than it allows).
	over bool
	// slow: since the first answer, no update found the key over: the
	// pace starts at half the lone gateway's and doubles per update, so
	// that a gateway joining a key others fill does not send them a
	// whole key's worth before its first update (slow start).
	slow bool
	// heard: an answer came (the provider told the key's buckets, or
	// that it tells none). Until then the gateway probes, not the
	// connection limit's worth at once: four requests a second from
	// probeBegan, after probeDecayAfter one every probeDecayGap; the next
	// from probeNext on.
	heard      bool
	probeNext  time.Time
	probeBegan time.Time
	// longProbe: the first answer came more than a span after its request
	// (slow calls), so its reading is stale: the probe goes on until a
	// reading a span later tells what the key did while it probed, and the
	// pace starts from that (probeStart).
	longProbe bool
	// probeTidy and probeUntidy count the answers before the pace starts
	// (the first, and the long probe's) that read tidy and not tidy: at
	// the bucket's top, a probe none of whose answers read tidy while
	// some did not joins a key the others keep busy (probeStart).
	probeTidy, probeUntidy int
	// paceSince is when the first reading set the pace (the answer's
	// arrival): readings of requests sent before it say nothing of what
	// that pace does to the key.
	paceSince time.Time
	// topRun counts the updates in a row that found the bucket at its
	// top and probed: each probes faster (a shard that ended leaves room
	// that stays).
	topRun int
	// lastTidy is the last answer's tidy reading (1 tidy, -1 not, 0 cannot
	// tell; see tidy).
	lastTidy int
	// tidySends are the send times, in time order, of the answers in a
	// row that read tidy (tidyRunOf): a long run says the others have
	// left the key (shareTidyRun).
	tidySends []time.Time
	// readAt is the send time of the last answer that told a bucket.
	readAt time.Time
	// updates counts the updates (for tests and history).
	updates int
	// last is what the last update measured.
	lastRho, lastOwn float64
	// ownShare is this gateway's share of the key's use (u ÷ ρ) at the
	// last update that read ρ exactly (a bucket below its top, no 429):
	// 0 before one did, except that at slow calls, counted in requests,
	// a 429 before any exact reading sets it from its own u ÷ ρ.
	ownShare float64
}

// heldFor is how long the emptiest bucket of r would last at the key's
// rate with no refill: its level × its interval (from the reset time, as
// learned or as this reading tells it); 0 when no interval is known.
func (s *keyShare) heldFor(r shareReading, b [2]Bucket) time.Duration {
	held := math.Inf(1)
	for k := range r.f {
		if !r.ok[k] {
			continue
		}
		iv := s.ivl[k]
		if iv <= 0 && r.f[k] < 1 && b[k].Reset > 0 {
			iv = b[k].Reset.Seconds() / (1 - r.f[k])
		}
		if iv <= 0 {
			return 0
		}
		held = math.Min(held, r.f[k]*iv)
	}
	if math.IsInf(held, 1) {
		return 0
	}
	return nanos(held * float64(time.Second))
}

// startFrac is the pace at the first reading, a share of the lone
// gateway's: half of it (slow start), or, when the emptiest bucket is
// less full than that, its fraction (the fair guess: the others leave
// this much of the key unused), never under the floor. A 429 (the bucket
// empty) starts at the floor.
func (s *keyShare) startFrac(r shareReading, in shareInput) float64 {
	f := 1.0
	for k := range r.f {
		if r.ok[k] {
			f = math.Min(f, r.f[k])
		}
	}
	return math.Max(math.Min(shareStart, f), shareFloor*in.rate/in.full)
}

// probe reports whether a request may go now while no answer has come
// yet (four a second), and when the next may; it notes the admission.
func (s *keyShare) probe(now time.Time) (bool, time.Duration) {
	if s.heard {
		return true, 0
	}
	if now.Before(s.probeNext) {
		return false, s.probeNext.Sub(now)
	}
	if s.probeBegan.IsZero() {
		s.probeBegan = now
	}
	gap := shareProbeGap
	if now.Sub(s.probeBegan) >= probeDecayAfter {
		gap = probeDecayGap
	}
	s.probeNext = now.Add(gap)
	return true, 0
}

// shareKeep bounds the sends and refusals kept between updates (a
// provider that stops answering with headers must not grow them forever).
const shareKeep = 1 << 16

func (s *keyShare) sent(at time.Time) {
	if len(s.sends) >= shareKeep {
		s.sends = append(s.sends[:0:0], s.sends[len(s.sends)/2:]...)
	}
	s.sends = append(s.sends, at)
}

// held notes that an admission waited at now.
func (s *keyShare) held(now time.Time) { s.heldAt = now }

func (s *keyShare) refuse(at time.Time) {
	if len(s.refused) >= shareKeep {
		s.refused = append(s.refused[:0:0], s.refused[len(s.refused)/2:]...)
	}
	i := sort.Search(len(s.refused), func(i int) bool { return s.refused[i].After(at) })
	s.refused = append(s.refused, time.Time{})
	copy(s.refused[i+1:], s.refused[i:])
	s.refused[i] = at
}

// count is how many of ts fall in (a, b].
func count(ts []time.Time, a, b time.Time) int {
	lo := sort.Search(len(ts), func(i int) bool { return ts[i].After(a) })
	hi := sort.Search(len(ts), func(i int) bool { return ts[i].After(b) })
	return hi - lo
}

// trim forgets sends and refusals more than keep before the anchor.
func (s *keyShare) trim(keep time.Duration) {
	if !s.haveAnchor {
		return
	}
	cut := func(ts []time.Time) []time.Time {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].After(s.anchor.at.Add(-keep)) })
		if i > len(ts)/2 {
			return append(ts[:0:0], ts[i:]...)
		}
		return ts
	}
	s.sends, s.refused = cut(s.sends), cut(s.refused)
}

// shareInput is what the controller knows when a reading arrives.
type shareInput struct {
	// full is the lone gateway's pace (requests a second): PaceFactor of
	// the key's rate plus the bank it may spend; rate the key's rate in
	// requests a second (the binding limit).
	full, rate float64
	// tokensPerReq is what a request costs against the tokens bucket (0:
	// unknown).
	tokensPerReq float64
	// tokens is what this answer's request cost against the tokens bucket
	// (its usage; 0: unknown).
	tokens float64
	// latency is the smoothed call latency.
	latency time.Duration
	// now is when the answer arrived (0: its send time).
	now time.Time
}

// reading takes one answer's buckets, sent at at, and returns true when it
// moved the pace.
func (s *keyShare) reading(at time.Time, b [2]Bucket, rateLimited bool, in shareInput) bool {
	if in.full <= 0 || in.rate <= 0 {
		return false
	}
	r := shareReading{at: at}
	for k := range b {
		if b[k].OK {
			r.f[k], r.ok[k] = b[k].fraction(), true
			r.top[k] = r.f[k] >= shareAtTop || !rateLimited && ownOnly(b[k], k, in)
			if iv := b[k].interval(); iv > 0 {
				s.ivl[k] = iv
			}
		}
	}
	if !r.ok[0] && !r.ok[1] {
		return false
	}
	s.readAt = at
	s.lastTidy = 0
	if !rateLimited {
		s.lastTidy = s.tidy(at, b, in)
	}
	// At slow calls a gateway with at most half of the key's use (the
	// one left small when a shard ends) counts its tidy run by send time
	// and takes the lone pace at the answer that completes it
	// (tidyRunOf). One with more keeps the run by arrival and the update
	// cadence: beside a joiner starved to a few per cent of the key, a
	// run by send time read "the others have left" while the joiner's
	// requests were still in flight, and it squeezed the joiner further
	// (seed 8, 2 invocations at 10 s, 0.88 → 0.80).
	if !s.haveAnchor || s.longProbe {
		switch {
		case s.lastTidy > 0:
			s.probeTidy++
		case s.lastTidy < 0:
			s.probeUntidy++
		}
	}
	quickLeft := slowFeedback(in.latency) && s.ownShare <= shareFair
	s.tidyRunOf(at, rateLimited, quickLeft)
	if !s.haveAnchor {
		s.anchor, s.haveAnchor = r, true
		if !rateLimited && in.now.Sub(at) > shareSpan && s.heldFor(r, b) < in.now.Sub(at) {
			// A slow call: this reading is a latency old, from before the
			// probe's own requests reached the key, and the bucket held
			// less than a latency of refill then (others may have emptied
			// it since). Probe on.
			s.longProbe = true
			return false
		}
		s.frac, s.slow = s.startFrac(r, in), true
		if s.lastTidy < 0 || (s.lastTidy == 0 && !rateLimited && usedLately(b)) {
			// Someone else took from the bucket just before this
			// request, or (cannot tell) the bucket was far below its
			// top yet refills within a span: someone took from it
			// lately (a lone gateway holds it low: lone.go, the bank).
			// The key is in use, and the fair guess may be far more
			// than the others leave. Start at the probe's rate; the
			// slow start finds the room.
			s.frac = math.Min(s.frac, math.Max(float64(time.Second/shareProbeGap), shareFloor*in.rate)/in.full)
		}
		s.paceSince = in.now
		if s.paceSince.Before(at) {
			s.paceSince = at
		}
		return true
	}
	if s.longProbe {
		return s.probeStart(at, r, b, rateLimited, in)
	}
	span := max(shareSpan, in.latency/2)
	if rateLimited {
		span = shareSpan429
	} else if s.slow {
		span = max(shareSlowSpan, in.latency/2)
	}
	dt := at.Sub(s.anchor.at)
	// The others have left (see below). With quickLeft this is taken at
	// the answer that completes the run (at least a quarter second after
	// the last update's reading), not at the next update: that is up to
	// a span (5 s at 10 s calls) of the lone pace lost.
	left := !rateLimited && !s.slow && !s.lone() && len(s.tidySends) >= shareTidyRun && at.Sub(s.tidySends[0]) >= span
	if dt < span && !(left && quickLeft && dt >= shareSpan429) {
		return false
	}
	// A reading of a request sent before the pace started (the joining
	// gateway's probes), or a 429 as it barely began, says nothing of
	// what the pace does: the update waits for the next.
	if at.Before(s.paceSince.Add(shareSpan429)) {
		return false
	}
	waited := s.heldAt.After(s.anchor.at)
	own := math.Max(float64(count(s.sends, s.anchor.at, at)-count(s.refused, s.anchor.at, at)), 0)
	// What this gateway sent and got through (what the steps below
	// scale) is measured over the span, but after a 429 (a short span)
	// over a whole span back, so that the few requests of a quarter second
	// do not decide it; and from when its pace started if that was later:
	// the probes before it are not its pace. But a 429 that finds the pace
	// begun less than a span ago with nothing got through since measures
	// a sliver (a request or two, all refused): nothing, which is not what
	// the pace gets through. The rate is then what got through over the
	// whole span back, the probe's admissions with it.
	from := s.anchor.at
	if rateLimited {
		if back := at.Add(-max(shareSpan, in.latency/2)); back.Before(from) {
			from = back
		}
	}
	whole := from
	if s.paceSince.After(from) {
		from = s.paceSince
	}
	admitted := func(from time.Time) float64 {
		return math.Max(float64(count(s.sends, from, at)-count(s.refused, from, at)), 0)
	}
	ownFrom := admitted(from)
	sentN := float64(count(s.sends, from, at))
	ownRate, sentRate := ownFrom/at.Sub(from).Seconds(), sentN/at.Sub(from).Seconds()
	rho, ownU, atTop, have, byTokens := s.measure(r, b, own/dt.Seconds(), dt, in)
	// Counted in requests, a sliver that got less through than the whole
	// span back did (a request of the pace admitted, the next refused) is
	// counted over the whole span too: a joiner whose probe ended on a 429
	// and whose pace's first second got one request through read 0.67 a
	// second and sat at 0.6 beside a gateway that then read itself alone
	// (2 invocations at 10 s, seed 8: 0.82 of the limit; 35: 0.81 → 0.89).
	// By tokens it cost 8 invocations runs at the 1 % 429 line (82 → 78).
	sliver := rateLimited && (ownFrom == 0 || !byTokens) && from.After(whole) && at.Sub(from) < max(shareSpan, in.latency/2)
	if sliver { // counted before trim drops the span's older sends
		ownRate = math.Max(ownRate, admitted(whole)/at.Sub(whole).Seconds())
	}
	// Alone at the last update, at slow calls, with its own use read from
	// the tokens bucket (an estimate): it stays alone from shareStayAlone
	// of the key's use (stayAlone).
	stay := s.stayAlone(rateLimited, byTokens, in.latency+span)
	s.anchor = r
	s.trim(max(shareSpan, in.latency/2))
	if !have {
		return false
	}
	sec := dt.Seconds()
	if s.frac <= 0 {
		s.pace = in.full
	} else {
		s.pace = s.frac * in.full
	}
	tau := in.full / in.rate
	before := s.pace
	if left {
		// The others have left: a share of the key, past the slow
		// start, and every answer over a span (at least shareTidyRun of
		// them) found the buckets near their top with nothing in them but
		// this gateway's own requests. At the top ρ says nothing of the
		// room, and probing it back a round of feedback at a time took
		// 30–60 s at slow calls: take the lone pace at once. Readings of
		// requests sent before it (at the old pace) do not update it.
		ownU = rho
		s.paceSince = in.now
		if at.After(in.now) {
			s.paceSince = at
		}
	}
	alone := shareAlone
	if stay {
		alone = shareStayAlone
	}
	if ownU >= alone*rho && !rateLimited {
		// Alone on the key (what it used is what the key used): the lone
		// gateway's pace.
		s.pace, s.frac, s.slow, s.over = in.full, 0, false, false
		s.updates++
		s.lastRho, s.lastOwn = rho, ownU
		return s.pace != before
	}
	// Others use the key too: leave them room for jitter and for the
	// burst a gateway that joins sends before it knows the rate.
	tau *= shareSlack
	paceBound := waited || sentRate >= 0.85*s.pace
	// The additive climb, the same for every gateway of the key: what
	// makes shares fair over time.
	//
	// Both climbs are per second up to a feedback delay of shareDelay (a
	// call's latency and a span); at slower calls the readings that
	// answer a climb come later, so it is slower in proportion: the same
	// climb per round of feedback.
	slowdown := math.Min(1, shareDelay.Seconds()/(in.latency+span).Seconds())
	add := shareAdditive * in.rate * sec * slowdown
	s.over = false
	if !atTop {
		s.topRun = 0
	}
	switch {
	case s.slow && (rho <= tau || atTop) && !rateLimited:
		s.pace = 2 * math.Max(s.pace, ownRate)
	case rho > tau && !atTop:
		// Over: to what the provider admitted from this gateway, scaled.
		// Over the lone target too (not just the shared slack): pushback.
		s.slow, s.over = false, rho > tau/shareSlack
		target := ownRate * (1 + shareGain*(tau/rho-1))
		if paceBound {
			s.pace = target
		} else {
			s.pace = math.Min(s.pace, math.Max(target, shareDemandCap*sentRate))
		}
	case !paceBound:
		// Demand-bound: the pace is not what holds this gateway back.
		s.pace = math.Min(s.pace, math.Max(shareDemandCap*sentRate, shareFloor*in.rate))
	case rho <= tau:
		// Room, and ρ is exact (or, at the top, an upper bound): the
		// proportional step up, at most ×1.5.
		s.pace = math.Max(s.pace, ownRate) + ownRate*shareGain*math.Min(tau/rho-1, 1) + add
	default:
		// At the bucket's top the refill it cannot hold is lost, so ρ
		// reads high and says nothing of the room: probe, 5 % a second.
		scale := 1.0
		if slowdown < 1 {
			scale = s.probeScale()
		}
		s.pace = math.Max(s.pace, ownRate)*(1+shareProbe*sec*slowdown*scale*math.Pow(shareProbeAccel, float64(min(s.topRun, shareProbeRuns)))) + add
		s.topRun++
	}
	if slowdown < 1 {
		// Slow calls: a gateway with more than half of the key's use
		// yields the excess over half, in proportion (× (1 − (x − ½))):
		// the proportional steps keep shares as they are, and the
		// additive one equalises them too slowly at this feedback delay,
		// so without this a gateway that joined a key another filled
		// stays small, and when the big one ends it must climb the whole
		// key back by probing. x is read from this update when ρ is exact,
		// else (a 429's reading) the last exact one; at the top it is not
		// cut (the probe is held instead: probeScale).
		x := 0.0
		switch {
		case !atTop && !rateLimited && rho > 0:
			x = ownU / rho
		case rateLimited && !atTop:
			x = s.ownShare
		}
		if x > shareFair {
			s.pace *= 1 - (x - shareFair)
		}
	}
	s.pace = math.Min(math.Max(s.pace, shareFloor*in.rate), in.full)
	s.frac = s.pace / in.full
	s.updates++
	s.lastRho, s.lastOwn = rho, ownU
	switch {
	case !atTop && !rateLimited && rho > 0:
		s.ownShare = ownU / rho
	case rateLimited && !atTop && s.ownShare == 0 && rho > 0 && !byTokens && slowFeedback(in.latency):
		// No exact reading yet (every one at the top or a 429): at slow
		// calls the share is taken from this 429, u ÷ ρ, counted in
		// requests. Unknown (0), the top probe ran unscaled and never held,
		// so a gateway with most of the key whose readings after a join
		// were all at the top or 429s climbed back into the joiner's room
		// (8 invocations at 10 s calls bound by requests: 88 → 90 of seeds
		// 1–90, 85 → 90 of 91–180). By tokens u is an estimate and it cost
		// 8 invocations bound by tokens runs (82 → 76 of 90): not there.
		s.ownShare = math.Min(ownU/rho, 1)
	}
	return s.pace != before
}

// unread takes a served answer, sent at at, that told no bucket (a
// completion: its usage came back). Some providers tell their buckets on
// 429s only: a 429 sets the share (the bucket empty: the floor), and at
// the floor no 429 comes again, so nothing would ever update it. Served
// answers and no reading for a span since the last one drop the share:
// the lone pace, which the 429s' pace factor holds back as it did a lone
// gateway's. Only completions count (usage the agent cannot fake): an
// agent cannot drop the share with requests the provider answers without
// buckets (a models list, a 400).
func (s *keyShare) unread(at time.Time, latency time.Duration) {
	if s.lone() || !s.haveAnchor || at.Sub(s.readAt) < max(shareSpan, latency/2) {
		return
	}
	s.frac, s.slow, s.over, s.longProbe, s.haveAnchor = 0, false, false, false, false
	s.topRun, s.ownShare = 0, 0
	s.tidySends = s.tidySends[:0]
	// The next reading is a new join's first: the old one's probe
	// answers must not decide how it starts (a busy top).
	s.probeTidy, s.probeUntidy = 0, 0
}

// slowFeedback: the feedback comes later than shareDelay (a call's
// latency and a span), as at 10 s calls: the climbs are slowed in
// proportion and the readings come back out of order.
func slowFeedback(latency time.Duration) bool {
	return latency+max(shareSpan, latency/2) > shareDelay
}

// shareTidyKeep bounds tidySends (a lone gateway's answers read tidy for
// as long as it runs): past it the oldest half is forgotten, so the run
// reads shorter and later than it is, never longer.
const shareTidyKeep = 1024

// tidyRunOf counts the answer sent at at (s.lastTidy its tidy reading) in
// the run of tidy answers. A 429 ends the run. Otherwise an answer that
// is not tidy (or cannot tell) ends it too, except bySend (at slow calls,
// slowFeedback, for a gateway with at most half of the key's use), when
// it ends only the part of the run sent before it:
// there a call's latency varies by more than the gap between requests
// (± 2 s at 10 s calls), so answers come back out of order, and an answer
// to a request sent before the others left, arriving late, said nothing
// of the tidy answers to requests sent after it; it broke their run, and
// the lone pace came a run of 20 later (or never, while such late answers
// kept coming).
func (s *keyShare) tidyRunOf(at time.Time, rateLimited, bySend bool) {
	after := func() int { return sort.Search(len(s.tidySends), func(i int) bool { return s.tidySends[i].After(at) }) }
	switch {
	case s.lastTidy > 0 && !rateLimited: // a 429 keeps the last answer's lastTidy: it ends the run
		if len(s.tidySends) >= shareTidyKeep {
			s.tidySends = append(s.tidySends[:0:0], s.tidySends[len(s.tidySends)/2:]...)
		}
		i := after()
		s.tidySends = append(s.tidySends, time.Time{})
		copy(s.tidySends[i+1:], s.tidySends[i:])
		s.tidySends[i] = at
	case bySend && !rateLimited:
		s.tidySends = append(s.tidySends[:0], s.tidySends[after():]...)
	default:
		s.tidySends = s.tidySends[:0]
	}
}

// stayAlone: a gateway alone at the last update (past its slow start)
// stays alone on an answer that is not a 429 while its use reads at least
// shareStayAlone of the key's, not shareAlone, when calls are slow (the
// feedback takes longer than shareDelay) and its use was read from the
// tokens bucket. There its use is own requests × the EWMA of the tokens
// a request used (1/8 weighting: ± 7 % at ± 50 % token jitter), and ρ the
// tokens the bucket actually lost, so a gateway alone on the key reads
// 0.85–0.9 of it on some spans; read as shared, the key over and its
// share more than half of it, it yielded to 0.6 of its pace for a round
// of feedback (15 s at 10 s calls) with no one to take the room. A
// gateway that joins makes itself known all the same: its probe (four
// requests a second, a fifth of the key at 20 a second) puts the key
// over, and 429s never read alone. Counted in requests, u is exact and
// the threshold stays; at faster calls a wrong yield costs a second or
// two and the threshold stays too.
func (s *keyShare) stayAlone(rateLimited, byTokens bool, delay time.Duration) bool {
	return s.lone() && s.updates > 0 && !s.slow && !rateLimited && byTokens && delay > shareDelay
}

// probeScale scales the probe at the bucket's top by this gateway's share
// of the key: every gateway's probe is its share of the key's, so the
// key's total climbs by the same whatever their number (eight gateways
// at an eighth each climb as one), and a gateway left with most of a key
// whose other users ended climbs into their room as fast as the key may.
//
// A gateway with more than shareTopHold of the key does not probe at all:
// it is above its fair share whatever the number of gateways, and a probe
// scaled by its large share would take the room from the small ones.
func (s *keyShare) probeScale() float64 {
	if s.ownShare <= 0 {
		return 1
	}
	if s.ownShare > shareTopHold {
		return 0
	}
	return math.Min(math.Max(shareScaleK*s.ownShare, shareScaleMin), shareScaleMax)
}

// measure reads the key's use of each bucket between the anchor and r, dt
// apart (ρ, a share of its refill), this gateway's (u, the same, from own
// requests a second got through), and whether the bucket is at its top.
// The bucket this gateway uses most binds; a bucket at its top reads ρ
// high, so ρ is read from the others. byTokens: u was read from the
// tokens bucket (own requests × the average tokens a request uses, an
// estimate), not counted in requests.
func (s *keyShare) measure(r shareReading, b [2]Bucket, own float64, dt time.Duration, in shareInput) (rho, ownU float64, atTop, have, byTokens bool) {
	topU, topTokens := -1.0, false // the most-used bucket at its top: its u
	for k := range b {
		if !r.ok[k] {
			continue
		}
		refill := b[k].Limit / 60 // a second, in requests
		if k == 1 {
			if in.tokensPerReq <= 0 {
				continue
			}
			refill /= in.tokensPerReq
		}
		u := own / refill
		if r.top[k] {
			if u > topU {
				topU, topTokens = u, k == 1
			}
			continue
		}
		if !s.anchor.ok[k] || s.ivl[k] <= 0 {
			continue
		}
		if x := 1 - (r.f[k]-s.anchor.f[k])*s.ivl[k]/dt.Seconds(); !have || x > rho {
			rho, ownU, have, byTokens = x, u, true, k == 1
		}
	}
	if topU >= 0 && (!have || topU > ownU) {
		// A bucket this gateway uses more is at its top.
		atTop = true
		if !have || rho <= in.full/in.rate {
			rho, ownU, have, byTokens = 1, topU, true, topTokens
		}
	}
	return rho, ownU, atTop, have, byTokens
}

// ownOnly: an answer (not a 429) found bucket k short of full by no more
// than its own request (a request, or this answer's tokens, and the
// slack of a tidy reading), from a reset to the millisecond: the bucket
// was full when it came, at its top whatever its fraction. A bucket of a
// few requests (a small key enforced per second: 2 requests at 120 a
// minute) reads half full after every request of a gateway alone on it;
// its level then never drifts, ρ read 1 (the key over), and a gateway at
// the floor stayed there with pushback in every window after the others
// had left. A bucket of 8 requests' worth or more (8 of the largest
// request's tokens) short of no more than that is at shareAtTop anyway:
// there this adds nothing.
func ownOnly(b Bucket, k int, in shareInput) bool {
	if !b.OK || b.Coarse || b.Reset <= 0 {
		return false
	}
	short := b.short()
	if k == 0 {
		return short <= 1+shareTidySlack
	}
	return in.tokens > 0 && in.tokensPerReq > 0 && short <= in.tokens+0.5*in.tokensPerReq
}

// probeStart ends a long probe (slow calls): from the first reading to
// this one, at least a span later (or a 429), what the key used while this
// gateway probed says where its pace starts. Alone: the lone pace. At the
// bucket's top: half of it (room of unknown size, as at a fresh start),
// or, when none of the probe's answers read tidy and some read not tidy
// (the others keep the key busy), the probe's admitted rate if less.
// A tidy answer or two among at least twice as many untidy ones is a busy
// key too: twice the probe's admitted rate if less (shareBusyTidy,
// shareBusyRatio).
// After a 429: the probe's admitted rate, cut. Otherwise half of what the
// others leave of the target, or the probe's admitted rate if more (not
// the old fair guess from the bucket's level: with eight gateways that
// started joiners at up to half the key, into 429s). Then the slow start
// goes on as after any first reading.
func (s *keyShare) probeStart(at time.Time, r shareReading, b [2]Bucket, rateLimited bool, in shareInput) bool {
	span := max(shareSpan, in.now.Sub(at)/2)
	dt := at.Sub(s.anchor.at)
	if !rateLimited && dt < span {
		return false
	}
	s.longProbe, s.slow = false, true
	s.paceSince = in.now
	from := s.anchor.at
	sec := math.Max(dt.Seconds(), shareSpan429.Seconds())
	admitted := math.Max(float64(count(s.sends, from, at)-count(s.refused, from, at)), 0)
	own := admitted / sec
	rho, ownU, atTop, have, _ := s.measure(r, b, own, dt, in)
	s.anchor = r
	tau := in.full / in.rate
	switch {
	case rateLimited:
		s.pace = math.Max(own*(1-shareGain*(1-tau*shareSlack)), shareFloor*in.rate)
	case have && ownU >= shareAlone*rho:
		s.pace, s.frac, s.slow = in.full, 0, false
		s.updates++
		s.lastRho, s.lastOwn = rho, ownU
		return true
	case atTop && s.probeUntidy > 0 && s.probeTidy == 0:
		// At the top, but none of the probe's answers read tidy (item
		// 11: someone else had taken from the bucket before every one
		// that could tell): the others keep the key busy, and the top is
		// a moment's (a bucket of a second's refill, the others just cut
		// for the probe itself). Half the lone pace sent the key a
		// second's worth more than it allows for a latency (with eight
		// gateways at 10 s calls, the largest share of the joins' 429s): the
		// probe's admitted rate, which the slow start doubles; never more
		// than half the lone pace (the probe's four a second can be more
		// on a small key, and a gateway that re-joins after unread has
		// heard and probes at its pace, not at four a second).
		s.pace = math.Min(own, shareStart*in.full)
	case atTop && s.probeTidy > 0 && s.probeTidy <= shareBusyTidy && s.probeUntidy >= shareBusyRatio*s.probeTidy:
		// At the top, and a tidy answer or two among at least twice as
		// many untidy ones: a busy key all the same (with seven others at
		// 10 s calls, a joiner's probe read one tidy answer among five
		// untidy, started at half the lone pace, and sent the key 9–10
		// requests a second more than it allowed for a latency: the
		// largest cluster of 429s left in such runs). Its probe found the
		// key less busy than one with no tidy answer, so it starts one
		// doubling ahead: twice the probe's admitted rate, never more
		// than half the lone pace.
		s.pace = math.Min(2*own, shareStart*in.full)
	case atTop || !have:
		s.pace = shareStart * in.full
	default:
		// Half of what the others leave of the target (ρ − u is their
		// use), or the probe's rate if that is more: over the target, the
		// probe's rate (the others cut too); with room, a step into it
		// that a second joiner's step cannot double into an overshoot.
		others := math.Max(rho-ownU, 0)
		s.pace = math.Max(own, 0.5*math.Max(tau*shareSlack-others, 0)*in.rate)
	}
	s.pace = math.Min(math.Max(s.pace, shareFloor*in.rate), in.full)
	s.frac = s.pace / in.full
	s.updates++
	s.lastRho, s.lastOwn = rho, ownU
	return true
}

// lone: the gateway paces at the lone gateway's pace: alone on the key,
// or no reading has set a share yet.
func (s *keyShare) lone() bool { return s.frac <= 0 }

// Tidy readings.
const (
	// shareTidySlack is what a tidy reading may be short of full beyond
	// this gateway's own requests, in requests: the reset's rounding (to
	// the millisecond) and timing.
	shareTidySlack = 0.1
	// shareTidyNear: a bucket short of full by more than this many
	// requests beyond this gateway's own is not near its top, and tidy
	// cannot tell.
	shareTidyNear = 3
)

// tidy tells whether the key's buckets, as this gateway's request at at
// found them, held anything but this gateway's own recent requests: 1 if
// not (tidy), -1 if they did, 0 if it cannot tell (no reset finer than a
// second). The reset is how long a bucket takes to refill; times its rate,
// how much it is short of full. A request's worth refills in a request's
// cost ÷ the rate, so this gateway's own requests account for what they
// have not refilled yet (each of its requests of the last request's worth
// of time, this one included; in the tokens bucket this request at its
// usage, earlier ones at the average). Anything more is someone else's,
// taken just before. At a bucket's top the drift of its level says
// nothing of who uses the key (the refill it cannot hold is lost); this
// does: a gateway alone on the key reads tidy every time, and another
// user's requests make a share of the readings untidy, about their rate ×
// the time a request's worth takes to refill.
func (s *keyShare) tidy(at time.Time, b [2]Bucket, in shareInput) int {
	v := 0
	if req := b[0]; req.OK && !req.Coarse && req.Limit > 0 {
		rate := req.Limit / 60
		own := s.stillHeld(at, 1, rate, true)
		if v = tidyOf(req.short(), own, shareTidyNear, shareTidySlack); v <= 0 {
			return v
		}
	}
	if tok := b[1]; tok.OK && !tok.Coarse && tok.Limit > 0 && in.tokensPerReq > 0 && in.tokens > 0 {
		rate := tok.Limit / 60 // tokens a second
		own := in.tokens + s.stillHeld(at, in.tokensPerReq, rate, false)
		v = tidyOf(tok.short(), own, shareTidyNear*in.tokensPerReq, 0.5*in.tokensPerReq)
	}
	return v
}

// stillHeld is what this gateway's requests sent in the last cost ÷ rate
// before at (at itself too when withAt) still hold of a bucket refilling
// at rate, each having taken cost from it.
func (s *keyShare) stillHeld(at time.Time, cost, rate float64, withAt bool) float64 {
	from := at.Add(-time.Duration(float64(time.Second) * cost / rate))
	i := sort.Search(len(s.sends), func(i int) bool { return s.sends[i].After(from) })
	held := 0.0
	for _, t := range s.sends[i:] {
		if t.After(at) || !withAt && t.Equal(at) {
			break
		}
		held += math.Max(cost-at.Sub(t).Seconds()*rate, 0)
	}
	return held
}

// tidyOf judges a bucket short of full by short, of which this gateway's
// own requests hold own: 0 (cannot tell) when it is more than near beyond
// them (far from full: it has been short for a while, this gateway's own
// use too, so nothing tells who took it), -1 (not tidy) when more than
// slack beyond them, 1 (tidy) otherwise.
func tidyOf(short, own, near, slack float64) int {
	switch {
	case short > own+near:
		return 0
	case short > own+slack:
		return -1
	}
	return 1
}

// usedLately: a bucket with a reset finer than a second refills within
// shareSpan, so whatever it is short of full was taken within the last
// span (a reading far below the top of such a bucket: the key is in use).
func usedLately(b [2]Bucket) bool {
	for _, x := range b {
		if x.OK && !x.Coarse && x.Reset > 0 && x.Reset <= shareSpan {
			return true
		}
	}
	return false
}
