package gateway

import "math"

// A gateway alone on its key (issue 25, the single runner's makespan).
// Two rules, both only for a gateway that reads itself alone:
//
//   - The hold (loneHold). At 97 % of the rate a lone gateway's bucket
//     sits at its top, and the refill it cannot hold is lost; the boost
//     (loneTop) climbs to 99.5 % only while every answer reads tidy,
//     which a tokens bucket charged with requests of 500–1 500 tokens
//     seldom does (this gateway's own requests' sizes are not known when
//     they leave), and the pace, from the average tokens a request uses,
//     swings by ±10 % with it. So, while the answers come back within
//     shareDelay (a call's latency plus a span: the feedback is quick), a
//     lone gateway paces at lonePace of the rate plus what holds each
//     bucket holdShort requests' worth under its top (holdShortTokens for
//     the tokens bucket): (target − short) ÷ max(3 latencies, 1 s), within
//     ±holdMax of the rate. How far a bucket is short of full is its reset
//     time × its rate (OpenAI's resets, to the millisecond), so it needs
//     no interval. Near its top the bucket loses no refill, and anything
//     else taking from it (another gateway joining) lowers the pace at
//     once. The targets stay within what a joining gateway reads as
//     someone else's requests (tidy: more than its own plus 0.1 request,
//     less than its own plus 3), so a joiner still starts at the probe's
//     rate. Not at slower calls (the readings come a latency late: the
//     boost as before), nor with a long bucket's bank to spend, nor
//     while the pace is down after a 429, nor with Anthropic's resets
//     (to the second).
//   - The tidy start (tidyStart). From its first answer a gateway paces at
//     half the lone pace until an update reads its own pace, about a
//     latency and a half later (at 1.5 s calls, 2 s at half the rate).
//     When the first tidyStartRun readings in a row (the probe's answers
//     and the first paced ones) all find every bucket at its top and
//     tidy, nobody else took from the key at any of those moments: the
//     gateway takes the lone pace at once. A key another gateway keeps
//     busy reads untidy most of the time (at its top, about 87 % of the
//     readings when the other paces at 97 %; with the hold, every one),
//     so four in a row hardly happen there (0.13⁴ ≈ 0.03 %).
//   - The bank (bankWant). A gateway that started alone by the tidy start
//     spends what its buckets held at the start, once: the hold aims at
//     bankFloor of each bucket's capacity (at least bankFloorMin requests'
//     worth) instead of two requests under its top, climbing to it at up to
//     bankUp of the rate, and keeps it there: a bucket held at any level
//     loses no refill, so the bank is spent once and for all. The capacity
//     is learned from the first readings under the top (short ÷ (1 −
//     fraction)). A 429, or a reading under half the floor (someone else
//     takes from the key), ends it. A joiner's first reading then finds
//     the bucket far below its top, which tidy cannot tell; a bucket that
//     refills within a span yet is far below its top has been used lately,
//     so the join starts at the probe's rate as on an untidy reading
//     (share.go: usedLately).

// Constants of the lone gateway's rules.
const (
	holdShort       = 2.0 // requests under the top the hold aims at
	holdShortTokens = 3.0 // … in the tokens bucket, in requests' worth of tokens
	holdMax         = 0.1 // the hold moves the pace by at most this share of the rate
	tidyStartRun    = 4   // tidy readings at the top in a row that start a gateway alone
	bankFloor       = 0.2 // a gateway that started alone holds its buckets this full (the bank)
	bankFloorMin    = 4.0 // … but never under this many requests (or requests' worth of tokens)
	bankUp          = 0.5 // … spending it at up to this share of the rate on top of the pace
)

// loneHold sets the hold from an answer (see above).
func (c *Controller) loneHold(o Outcome, info RateInfo) {
	if o == OutcomeError {
		return
	}
	rate, complete := c.announcedRate()
	on := o == OutcomeOK && rate > 0 && complete && c.paceFactor >= c.p.PaceFactor &&
		c.bankReq < 0 && c.bankTok < 0 && c.latency > 0 && c.latency+shareSpan <= shareDelay
	extra := math.Inf(1)
	horizon := math.Max(3*c.latency.Seconds(), 1)
	for k, b := range info.Buckets {
		if !on {
			break
		}
		if !b.OK {
			continue
		}
		if b.Coarse {
			on = false
			break
		}
		short := b.short() // requests, or tokens
		want := holdShort
		if k == 1 {
			if c.tokensPerReq <= 0 {
				on = false
				break
			}
			short /= c.tokensPerReq
			want = holdShortTokens
		}
		if c.bank {
			want = math.Max(want, c.bankWant(k, b, short))
		}
		extra = math.Min(extra, (want-short)/horizon)
	}
	if o == OutcomeRateLimited {
		c.bank = false
	}
	c.hold = on && !math.IsInf(extra, 1)
	if c.hold {
		up := holdMax
		if c.bank {
			up = bankUp
		}
		c.holdExtra = math.Max(math.Min(extra, up*rate), -holdMax*rate)
	}
}

// tidyStart counts the readings from the first answer on, before the
// key share's first update, and takes the lone pace after tidyStartRun
// in a row at the top and tidy (see above).
func (c *Controller) tidyStart(o Outcome, info RateInfo) {
	s := &c.share
	if c.tidyRun < 0 || !s.haveAnchor || s.longProbe || s.updates > 0 || !s.slow || s.frac <= 0 {
		return
	}
	ok := o == OutcomeOK && s.lastTidy > 0
	for _, b := range info.Buckets {
		if b.OK && b.fraction() < shareAtTop {
			ok = false
		}
	}
	if !ok {
		c.tidyRun = -1
		return
	}
	c.tidyRun++
	if c.tidyRun >= tidyStartRun {
		s.frac, s.slow, s.over = 0, false, false
		s.updates++
		c.bank = true
		c.record(c.limitLocked(), "pacing alone (tidy start)")
	}
}

// bankWant is how far under its top the bank holds bucket k (in requests,
// or requests' worth of tokens, as short is): (1 − bankFloor) of its
// capacity, leaving at least bankFloorMin; 0 while the capacity is not
// known, and once a reading finds the bucket under half that floor (the
// bank ends). A bucket's capacity is how far it is short of full over the share
// of it that is empty (short ÷ (1 − fraction)): learned once the hold has
// taken it a little under its top.
func (c *Controller) bankWant(k int, b Bucket, short float64) float64 {
	if f := b.fraction(); c.bankCap[k] <= 0 && short >= 1 && f < 0.95 {
		c.bankCap[k] = short / (1 - f)
	}
	if c.bankCap[k] <= 0 {
		return 0
	}
	if short > c.bankCap[k]-0.5*math.Max(bankFloor*c.bankCap[k], bankFloorMin) {
		// Under half its floor: someone else takes from it. The bank
		// ends; the hold takes the bucket back toward its top.
		c.bank = false
		return 0
	}
	return math.Max(math.Min((1-bankFloor)*c.bankCap[k], c.bankCap[k]-bankFloorMin), 0)
}
