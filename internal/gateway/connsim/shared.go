package connsim

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/mockmodel"
)

// Runner is one invocation (a matrix shard, or a parallel launch) with a
// gateway of its own, on the key the others use too.
type Runner struct {
	// Start is when it starts; Stop > 0 is when it stops sending new calls
	// (a shard ending early; calls in flight finish).
	Start, Stop time.Duration
	// Samples run at once (its setpoint); Work > 0 is how many samples it
	// has in all (it ends when they are done), 0: as many as there is time.
	Samples, Work int
	// FollowLimit: the samples at once follow the gateway's connection
	// limit instead of Samples (Inspect's samples follow its connections).
	FollowLimit bool
	// Tend, if set, is called when the runner starts and then after each
	// delay it returns (0 or less: never again). It sees the runner's
	// gateway and what happened since the last call, and may move the
	// samples at once (a ramp's setpoint) and the controller's ceiling.
	Tend func(*Tending) time.Duration
}

// Tending is what a runner's Tend sees and moves.
type Tending struct {
	// Now is the simulated clock's time, At the time since the run's start.
	Now time.Time
	At  time.Duration
	// Controller is the runner's gateway controller (Window, SetCeiling,
	// Clamp, as the tend loop calls them on a gateway).
	Controller *gateway.Controller
	// Samples is the runner's samples at once; Tend may change it. Running
	// samples are never stopped: a lower value only holds new ones back.
	Samples int
	// Since the last call: Saturated, the samples at once were all running
	// while samples waited to start (what the scheduler reports); Requests,
	// the calls that reached the gateway, and Retries, the 429s it retried
	// (the gateway's window counters); Errored, the samples that failed.
	Saturated                  bool
	Requests, Retries, Errored int
	// Running samples now, and samples not yet started (-1: unlimited).
	Running, Left int
}

// Shared is a run of several gateways on one key: the scenario's
// provider, latency, calls, policy and retries, and one gateway per runner.
// Scenario.Samples is unused (each runner has its own).
type Shared struct {
	Scenario
	Runners []Runner
	// EndWhenDone ends the run when every runner finished its Work (all
	// must have some) rather than at Duration.
	EndWhenDone bool
	// KeepCost: a retry costs the tokens its call drew on its first try
	// (the same request sent again). Off, every try draws anew, as the
	// shared-key figures were measured; then a call refused for its size
	// tends to come back smaller, which favours a rule with many 429s.
	KeepCost bool
}

// RunnerResult is what one runner did.
type RunnerResult struct {
	Requests, RateLimited, Admitted int
	Samples, FailedSamples          int
	// Finished is when its last sample ended (0: it had unlimited work or
	// did not finish).
	Finished time.Duration
}

// SharedResult is what a shared run did: the key's series (Point.InFlight
// and ConnLimit summed over the gateways), and each runner's figures.
type SharedResult struct {
	Result
	Runners []RunnerResult
}

type sgw struct {
	ctl      *gateway.Controller
	queue    []*scall
	wakeAt   time.Time
	active   bool
	started  int // samples started
	running  int
	inflight int
	samples  int // samples at once now (Runner.Samples, or as Tend set it)
	// Since the last tend (Tending).
	sat                        bool
	requests, retries, errored int
}

type scall struct {
	gw      int
	left    int
	failed  bool
	tries   int
	waited  time.Duration
	prev    *gateway.Ticket
	ticket  *gateway.Ticket
	info    gateway.RateInfo
	started time.Time
	cost    float64 // tokens drawn on the first try (KeepCost)
	draw    float64 // tokens this try costs, drawn when it first asks
}

const (
	evsArrive = iota
	evsDone
	evsWake
	evsStart
	evsStop
	evsStep
	evsTend
)

type sevent struct {
	at   time.Time
	seq  int
	kind int
	gw   int
	c    *scall
}

type sevents []sevent

func (e sevents) Len() int { return len(e) }
func (e sevents) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	if (e[i].kind == evsStep) != (e[j].kind == evsStep) {
		return e[i].kind == evsStep
	}
	return e[i].seq < e[j].seq
}
func (e sevents) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *sevents) Push(x any)   { *e = append(*e, x.(sevent)) }
func (e *sevents) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// RunShared simulates s: every runner's gateway (a Controller of
// s.Policy, each on the simulation's clock) in front of one provider
// limiter, so the headers each gateway reads move with everyone's use.
func RunShared(s Shared) SharedResult {
	if s.RetryLimit == 0 {
		s.RetryLimit = 8
	}
	if s.RetryBudget == 0 {
		s.RetryBudget = 10 * time.Minute
	}
	if s.BackoffBase == 0 {
		s.BackoffBase = time.Second
	}
	if s.BackoffMax == 0 {
		s.BackoffMax = time.Minute
	}
	if s.Step == 0 {
		s.Step = time.Second
	}
	if s.CallsPerSample <= 0 {
		s.CallsPerSample = 1
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	lim := fakeprovider.NewLimiter(s.RPM, s.TPM, s.Interval, start)
	gws := make([]*sgw, len(s.Runners))
	out := SharedResult{Runners: make([]RunnerResult, len(s.Runners))}
	var (
		q   sevents
		seq int
		cur Point
	)
	push := func(at time.Time, kind, gw int, c *scall) {
		seq++
		heap.Push(&q, sevent{at: at, seq: seq, kind: kind, gw: gw, c: c})
	}
	for i, r := range s.Runners {
		gws[i] = &sgw{ctl: gateway.NewController(s.Policy, clk), samples: r.Samples}
		if s.Ceiling > 0 {
			gws[i].ctl.SetCeiling(s.Ceiling)
		}
		push(start.Add(r.Start), evsStart, i, nil)
		if r.Stop > 0 {
			push(start.Add(r.Stop), evsStop, i, nil)
		}
	}
	push(start.Add(s.Step), evsStep, 0, nil)
	tokens := float64(s.TokensPerCall)
	cost := func() float64 { return math.Round(tokens * (1 + s.TokenJitter*(2*rng.Float64()-1))) }
	latency := func() time.Duration {
		return time.Duration(float64(s.Latency) * (1 + s.Jitter*(2*rng.Float64()-1)))
	}
	backoff := func(n int, ra time.Duration) time.Duration {
		d := math.Min(float64(s.BackoffBase)*math.Pow(2, float64(n)), float64(s.BackoffMax))
		d = d/2 + d/2*rng.Float64()
		if ra > 0 {
			if j := float64(ra) * (1 + 0.1*rng.Float64()); j > d {
				d = j
			}
		}
		return time.Duration(d)
	}
	// fill starts samples on gateway i up to its setpoint and its work.
	fill := func(i int) {
		g, r := gws[i], s.Runners[i]
		target := g.samples
		if r.FollowLimit {
			target = g.ctl.Limit()
		}
		for g.active && g.running < target && (r.Work == 0 || g.started < r.Work) {
			g.started++
			g.running++
			g.requests++
			push(clk.Now(), evsArrive, i, &scall{gw: i, left: s.CallsPerSample, started: clk.Now()})
		}
		if g.active && g.running >= target && (r.Work == 0 || g.started < r.Work) {
			g.sat = true
		}
	}
	finishSample := func(i int, failed bool) {
		g := gws[i]
		g.running--
		out.Runners[i].Samples++
		out.Result.Samples++
		if failed {
			out.Runners[i].FailedSamples++
			out.Result.FailedSamples++
			g.errored++
		}
		r := s.Runners[i]
		if r.Work > 0 && g.started >= r.Work && g.running == 0 {
			out.Runners[i].Finished = clk.Now().Sub(start)
		}
		fill(i)
	}
	next := func(c *scall, ok bool) {
		out.Calls++
		if !ok {
			out.FailedCalls++
			c.failed = true
		}
		c.left--
		if c.left > 0 && !c.failed && gws[c.gw].active {
			gws[c.gw].requests++
			push(clk.Now(), evsArrive, c.gw, &scall{gw: c.gw, left: c.left, failed: false, started: clk.Now()})
			return
		}
		finishSample(c.gw, c.failed)
	}
	drain := func(i int) {
		g := gws[i]
		for len(g.queue) > 0 {
			// The call's tokens are drawn before it asks (a request's size
			// is known before it goes: the gateway weighs its gap by it).
			c := g.queue[0]
			if c.draw == 0 {
				c.draw = cost()
				if s.KeepCost && c.cost != 0 {
					c.draw = c.cost
				}
			}
			t, wait := g.ctl.TryAcquireSized(c.draw)
			if t == nil {
				if wait > 0 {
					at := clk.Now().Add(wait)
					if g.wakeAt.IsZero() || at.Before(g.wakeAt) || !g.wakeAt.After(clk.Now()) {
						g.wakeAt = at
						push(at, evsWake, i, nil)
					}
				}
				return
			}
			g.queue = g.queue[1:]
			t.RetryOf(c.prev)
			c.ticket = t
			out.Requests++
			out.Runners[i].Requests++
			n := c.draw
			c.draw = 0 // a retry draws again (KeepCost: its first try's)
			if s.KeepCost && c.cost == 0 {
				c.cost = n
			}
			d := lim.Admit(clk.Now(), n)
			h := http.Header{}
			d.Header(h, mockmodel.OpenAI)
			info := gateway.ParseRateInfo(h, clk.Now())
			if d.OK {
				g.inflight++
				cur.Admitted++
				cur.Tokens += int(n)
				out.Runners[i].Admitted++
				info.Tokens, info.InputTokens = int64(n), int64(n)
				c.info = info
				push(clk.Now().Add(latency()), evsDone, i, c)
				continue
			}
			out.RateLimited++
			out.Runners[i].RateLimited++
			cur.RateLimited++
			g.ctl.Done(t, gateway.OutcomeRateLimited, info)
			w := backoff(c.tries, info.RetryAfter)
			if d.RetryAfter < 0 || c.tries >= s.RetryLimit || c.waited+w > s.RetryBudget {
				next(c, false)
				continue
			}
			c.tries++
			c.waited += w
			c.prev = t
			g.retries++
			push(clk.Now().Add(w), evsArrive, i, c)
		}
	}
	end := start.Add(s.Duration)
	for q.Len() > 0 {
		e := heap.Pop(&q).(sevent)
		if e.at.After(end) {
			break
		}
		clk.Advance(e.at.Sub(clk.Now()))
		g := gws[e.gw]
		switch e.kind {
		case evsStart:
			g.active = true
			if s.Runners[e.gw].Tend != nil {
				push(clk.Now(), evsTend, e.gw, nil)
			} else {
				fill(e.gw)
			}
		case evsTend:
			r := s.Runners[e.gw]
			v := &Tending{Now: clk.Now(), At: clk.Now().Sub(start), Controller: g.ctl, Samples: g.samples,
				Saturated: g.sat, Requests: g.requests, Retries: g.retries, Errored: g.errored, Running: g.running, Left: -1}
			if r.Work > 0 {
				v.Left = r.Work - g.started
			}
			g.sat, g.requests, g.retries, g.errored = false, 0, 0, 0
			if d := r.Tend(v); d > 0 {
				push(clk.Now().Add(d), evsTend, e.gw, nil)
			}
			g.samples = v.Samples
			fill(e.gw)
		case evsStop:
			// The shard ends: what waits at its gateway goes with it.
			g.active = false
			for range g.queue {
				finishSample(e.gw, false)
			}
			g.queue = nil
		case evsArrive:
			if !g.active {
				finishSample(e.gw, false)
				continue
			}
			g.queue = append(g.queue, e.c)
		case evsDone:
			g.inflight--
			g.ctl.Done(e.c.ticket, gateway.OutcomeOK, e.c.info)
			next(e.c, true)
			if s.Runners[e.gw].FollowLimit {
				fill(e.gw) // the limit may have grown
			}
		case evsWake:
		case evsStep:
			cur.T = clk.Now().Sub(start)
			cur.LimitRate = limitRate(lim, tokens)
			cur.RPM, cur.TPM = lim.Limits()
			for i, g := range gws {
				pace, _, _ := g.ctl.SharePace()
				cur.Paces = append(cur.Paces, pace)
				cur.InFlight += g.inflight
				cur.ConnLimit += g.ctl.Limit()
				cur.Running += g.running
				if s.Runners[i].FollowLimit {
					cur.Setpoint += g.ctl.Limit()
				} else {
					cur.Setpoint += g.samples
				}
			}
			out.PeakInFlight = max(out.PeakInFlight, cur.InFlight)
			cur.BucketRequests, cur.BucketTokens = lim.Level(clk.Now())
			out.Series = append(out.Series, cur)
			cur = Point{}
			push(clk.Now().Add(s.Step), evsStep, 0, nil)
			continue
		}
		drain(e.gw)
		if s.EndWhenDone && allDone(s.Runners, out.Runners) {
			break
		}
	}
	return out
}

// allDone reports whether every runner has work and finished it.
func allDone(rs []Runner, out []RunnerResult) bool {
	for i, r := range rs {
		if r.Work == 0 || out[i].Finished == 0 {
			return false
		}
	}
	return true
}

// SharedSummary is what the shared-key benchmark reports for one run.
type SharedSummary struct {
	// Goodput is what the provider admitted from all runners from the
	// first runner's start plus the warm-up to the end of the measured
	// span, as a share of what the limit allowed then (refill plus what
	// the bucket gave up).
	Goodput float64
	// Share429 is the share of all upstream requests answered 429.
	Share429 float64
	// FailedSamples across the runners.
	FailedSamples int
}

// SummarizeShared measures r over [from, to).
func SummarizeShared(s Shared, r SharedResult, from, to time.Duration) SharedSummary {
	sum := SharedSummary{FailedSamples: r.FailedSamples}
	if r.Requests > 0 {
		sum.Share429 = float64(r.RateLimited) / float64(r.Requests)
	}
	step := s.Step
	if step == 0 {
		step = time.Second
	}
	lo, hi := int(from/step), min(int(to/step), len(r.Series))
	if lo >= 1 && hi > lo {
		adm, tok := 0, 0
		for _, p := range r.Series[lo:hi] {
			adm += p.Admitted
			tok += p.Tokens
		}
		span := float64(hi-lo) * step.Seconds()
		a, b := r.Series[lo-1], r.Series[hi-1]
		if s.RPM > 0 {
			sum.Goodput = float64(adm) / (float64(s.RPM)/60*span + a.BucketRequests - b.BucketRequests)
		}
		if s.TPM > 0 {
			sum.Goodput = math.Max(sum.Goodput, float64(tok)/(float64(s.TPM)/60*span+a.BucketTokens-b.BucketTokens))
		}
	}
	return sum
}
