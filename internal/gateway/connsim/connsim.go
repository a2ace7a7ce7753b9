// Package connsim is a discrete-event simulation of the gateway's
// connection controller against a provider's rate limiter, on simulated
// time. It drives the real gateway.Controller (TryAcquire and Done, as the
// gateway's proxy does) and the fake provider's real Limiter, whose headers
// go through the gateway's own parser, so a run of minutes or hours at
// 30-second call latencies takes milliseconds and is exactly repeatable.
//
// What it leaves out is what the loopback benchmarks measure: HTTP, the
// proxy's own cost, and scheduling jitter. Answers to a refused request come
// back at once, as they do from a provider that refuses at the door.
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

// Scenario is one simulated run.
type Scenario struct {
	// Latency is the mean time a call takes from admission to its last
	// byte; Jitter spreads it uniformly by ± that fraction (0.2: ±20 %).
	Latency time.Duration
	Jitter  float64
	// RPM and TPM are the provider's limits per minute (0: unlimited),
	// enforced over Interval (0: a minute).
	RPM, TPM int
	Interval time.Duration
	// TokensPerCall is what one call costs against TPM (input + output)
	// on average; TokenJitter spreads it uniformly by ± that fraction.
	TokensPerCall int
	TokenJitter   float64
	// HalveAt halves both limits at that time (0: never).
	HalveAt time.Duration
	// Duration is how long the run lasts.
	Duration time.Duration
	// Samples run at once, each making CallsPerSample calls one after
	// another (at most one in flight); a finished sample is replaced at once.
	Samples, CallsPerSample int
	// Policy is the controller's; Ceiling > 0 is applied with SetCeiling
	// (the ramp's sum of setpoints).
	Policy  gateway.Policy
	Ceiling int
	// RetryLimit and RetryBudget bound a call's retries as the gateway does
	// (0: 8 retries, 10 minutes); BackoffBase and BackoffMax as well (1 s, 1 min).
	RetryLimit              int
	RetryBudget             time.Duration
	BackoffBase, BackoffMax time.Duration
	// Step is the resolution of the recorded series (0: 1 s).
	Step time.Duration
	Seed uint64
}

// Point is one step of the recorded series.
type Point struct {
	T time.Duration
	// Admitted requests and tokens the provider took in the step, and the
	// 429s it answered.
	Admitted, Tokens, RateLimited int
	// LimitRate is the provider's limit in requests per second at the end
	// of the step (the tighter of RPM and TPM ÷ tokens per call), and
	// RPM and TPM the limits themselves.
	LimitRate float64
	RPM, TPM  int
	// InFlight and ConnLimit at the end of the step.
	InFlight, ConnLimit int
	// Running samples and the samples at once allowed at the end of the
	// step, summed over the runners (RunShared only).
	Running, Setpoint int
	// BucketRequests and BucketTokens are what the provider's buckets held
	// at the end of the step.
	BucketRequests, BucketTokens float64
	// Paces is each gateway's pace (requests a second) at the end of the
	// step, in a shared-key run (RunShared): what SHAREDBENCH_DEBUG shows.
	Paces []float64
}

// Result is what a run did.
type Result struct {
	Series []Point
	// Requests the provider saw (retries included), and how many it refused.
	Requests, RateLimited int
	// Samples finished and failed (a call gave up after its retries).
	Samples, FailedSamples int
	Calls, FailedCalls     int
	// PeakInFlight is the most calls admitted at once.
	PeakInFlight int
	// History is the controller's limit history.
	History []gateway.LimitChange
}

type call struct {
	sample  int
	tries   int
	waited  time.Duration
	prev    *gateway.Ticket
	ticket  *gateway.Ticket
	info    gateway.RateInfo
	started time.Time
}

type event struct {
	at   time.Time
	seq  int
	kind int
	c    *call
}

const (
	evArrive = iota // a call joins the gateway's queue
	evDone          // the provider finished a call
	evWake          // a pacing gap or a hold ended
	evHalve
	evStep
)

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	// A step closes before anything else happens at its instant.
	if (e[i].kind == evStep) != (e[j].kind == evStep) {
		return e[i].kind == evStep
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// Run simulates s.
func Run(s Scenario) Result {
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
	clk := clock.NewFake(start) // moved to each event's instant; the controller's timers are never waited on (TryAcquire only)
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	ctl := gateway.NewController(s.Policy, clk)
	if s.Ceiling > 0 {
		ctl.SetCeiling(s.Ceiling)
	}
	lim := fakeprovider.NewLimiter(s.RPM, s.TPM, s.Interval, start)
	var (
		q        events
		seq      int
		queue    []*call // waiting for admission, in arrival order
		wakeAt   time.Time
		res      Result
		cur      Point
		inflight int
		left     = make([]int, s.Samples) // calls left per sample slot
		failed   = make([]bool, s.Samples)
	)
	push := func(at time.Time, kind int, c *call) {
		seq++
		heap.Push(&q, event{at: at, seq: seq, kind: kind, c: c})
	}
	newSample := func(i int, at time.Time) {
		left[i], failed[i] = s.CallsPerSample, false
		push(at, evArrive, &call{sample: i, started: at})
	}
	for i := 0; i < s.Samples; i++ {
		// Spread the first calls over a millisecond so their order is stable.
		newSample(i, start.Add(time.Duration(i)*time.Microsecond))
	}
	push(start.Add(s.Step), evStep, nil)
	if s.HalveAt > 0 {
		push(start.Add(s.HalveAt), evHalve, nil)
	}
	tokens := float64(s.TokensPerCall)
	cost := func() float64 {
		return math.Round(tokens * (1 + s.TokenJitter*(2*rng.Float64()-1)))
	}
	latency := func() time.Duration {
		j := 1 + s.Jitter*(2*rng.Float64()-1)
		return time.Duration(float64(s.Latency) * j)
	}
	backoff := func(n int, ra time.Duration) time.Duration {
		d := float64(s.BackoffBase) * math.Pow(2, float64(n))
		d = math.Min(d, float64(s.BackoffMax))
		d = d/2 + d/2*rng.Float64()
		if ra > 0 {
			if j := float64(ra) * (1 + 0.1*rng.Float64()); j > d {
				d = j
			}
		}
		return time.Duration(d)
	}
	// next ends one call of a sample and starts its next call, or a new sample.
	next := func(c *call, ok bool) {
		res.Calls++
		i := c.sample
		if !ok {
			res.FailedCalls++
			failed[i] = true
		}
		left[i]--
		if left[i] > 0 && !failed[i] {
			push(clk.Now(), evArrive, &call{sample: i, started: clk.Now()})
			return
		}
		res.Samples++
		if failed[i] {
			res.FailedSamples++
		}
		newSample(i, clk.Now())
	}
	drain := func() {
		for len(queue) > 0 {
			t, wait := ctl.TryAcquire()
			if t == nil {
				if wait > 0 {
					at := clk.Now().Add(wait)
					if wakeAt.IsZero() || at.Before(wakeAt) || !wakeAt.After(clk.Now()) {
						wakeAt = at
						push(at, evWake, nil)
					}
				}
				return
			}
			c := queue[0]
			queue = queue[1:]
			t.RetryOf(c.prev)
			c.ticket = t
			res.Requests++
			n := cost()
			d := lim.Admit(clk.Now(), n)
			h := http.Header{}
			d.Header(h, mockmodel.OpenAI)
			info := gateway.ParseRateInfo(h, clk.Now())
			if d.OK {
				inflight++
				res.PeakInFlight = max(res.PeakInFlight, inflight)
				cur.Admitted++
				cur.Tokens += int(n)
				info.Tokens = int64(n)
				c.info = info
				push(clk.Now().Add(latency()), evDone, c)
				continue
			}
			res.RateLimited++
			cur.RateLimited++
			ctl.Done(t, gateway.OutcomeRateLimited, info)
			w := backoff(c.tries, info.RetryAfter)
			if d.RetryAfter < 0 || c.tries >= s.RetryLimit || c.waited+w > s.RetryBudget {
				next(c, false)
				continue
			}
			c.tries++
			c.waited += w
			c.prev = t
			push(clk.Now().Add(w), evArrive, c)
		}
	}
	end := start.Add(s.Duration)
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		if e.at.After(end) {
			break
		}
		clk.Advance(e.at.Sub(clk.Now()))
		switch e.kind {
		case evArrive:
			queue = append(queue, e.c)
		case evDone:
			inflight--
			ctl.Done(e.c.ticket, gateway.OutcomeOK, e.c.info)
			next(e.c, true)
		case evWake:
		case evHalve:
			rpm, tpm := lim.Limits()
			lim.SetLimits(rpm/2, tpm/2, clk.Now())
		case evStep:
			cur.T = clk.Now().Sub(start)
			cur.LimitRate = limitRate(lim, tokens)
			cur.RPM, cur.TPM = lim.Limits()
			cur.InFlight, cur.ConnLimit = inflight, ctl.Limit()
			cur.BucketRequests, cur.BucketTokens = lim.Level(clk.Now())
			res.Series = append(res.Series, cur)
			cur = Point{}
			push(clk.Now().Add(s.Step), evStep, nil)
			continue
		}
		drain()
	}
	res.History = ctl.History()
	return res
}

// limitRate is the provider's limit in requests per second.
func limitRate(l *fakeprovider.Limiter, tokens float64) float64 {
	rpm, tpm := l.Limits()
	r := math.Inf(1)
	if rpm > 0 {
		r = float64(rpm) / 60
	}
	if tpm > 0 && tokens > 0 {
		r = math.Min(r, float64(tpm)/60/tokens)
	}
	return r
}
