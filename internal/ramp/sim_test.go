package ramp

// A deterministic, event-driven simulation of a fleet of agentic samples
// calling a rate-limited model provider through an adaptive connection
// limiter, used to choose the step-down policy (R2) and to compare sample
// policies (BenchmarkRampPolicies). Everything runs on a simulated clock
// (float64 seconds); randomness comes from a seeded PCG, so every run with
// the same parameters gives the same figures.

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// simConfig is one workload against one provider.
type simConfig struct {
	Name           string
	Tasks          int
	SamplesPerTask int
	Turns          int     // model calls per sample, one after another
	RPM, TPM       float64 // provider limits per minute; 0 = none
	Unit           string  // "rpm" or "tpm": the limit goodput is measured against
	BurstSeconds   float64 // bucket depth, in seconds of refill
	HalveAt        float64 // both limits halve at this time (0 = never)
	Horizon        float64 // simulated seconds
	Window         float64 // tend interval
	LatBase        float64 // seconds per successful call ...
	LatPerOut      float64 // ... plus this per output token
	ThinkLo        float64 // tool time between calls, uniform in [ThinkLo, ThinkHi]
	ThinkHi        float64
	InBase         int // input tokens of the first call ...
	InPerTurn      int // ... growing by this per turn (the conversation grows)
	OutTok         int
	MaxRetries     int     // gateway retries per call before the sample errors
	SampleTimeout  float64 // a sample running longer than this fails
	Seed           uint64
}

func baseSim() simConfig {
	return simConfig{
		Tasks: 4, SamplesPerTask: 5000, Turns: 8, BurstSeconds: 6,
		Horizon: 900, Window: 10, LatBase: 1.5, LatPerOut: 0.005, ThinkLo: 0.5, ThinkHi: 1.5,
		InBase: 1000, InPerTurn: 700, OutTok: 150, MaxRetries: 6, SampleTimeout: 600, Seed: 7,
	}
}

// simScenarios are the provider limits the benchmarks compare.
func simScenarios() []simConfig {
	rpm := baseSim()
	rpm.Name, rpm.RPM, rpm.Unit = "rpm", 10000, "rpm"
	tpm := baseSim()
	tpm.Name, tpm.RPM, tpm.TPM, tpm.Unit = "tpm", 1e6, 25e6, "tpm"
	half := baseSim()
	half.Name, half.RPM, half.Unit, half.HalveAt = "rpm-halved", 10000, "rpm", 450
	small := baseSim()
	small.Name, small.RPM, small.Unit = "rpm-small", 2000, "rpm"
	return []simConfig{rpm, tpm, half, small}
}

type policyKind int

const (
	polRamp      policyKind = iota // Steward: this package + Steward's gateway limiter
	polFixed                       // max_samples fixed, Steward's gateway limiter
	polInspect                     // Inspect-style: samples follow the adaptive connection limit
	polUnlimited                   // every sample at once, no connection limit
)

type simPolicy struct {
	Name  string
	Kind  policyKind
	Down  StepDown // polRamp
	Fixed int      // polFixed: max_samples per task
	// QueueGate (polRamp): report a task as not saturated while requests
	// wait for a gateway connection (an experiment in how Saturated is fed).
	QueueGate bool
}

// limiterPolicy mirrors the behaviours the gateway issue asks for (slow start
// then additive increase, a multiplicative cut once per rate-limit episode
// with a cooldown honouring Retry-After, and optionally growth only while
// saturated, reading rate-limit headers, and a hold while Retry-After runs).
type limiterPolicy struct {
	start, min, max           float64
	cut                       float64
	growOnlySaturated         bool
	readHeaders               bool
	hold                      bool
	minCooldown               float64
	lowFrac, critFrac, gentle float64
}

func stewardLimiter() limiterPolicy {
	return limiterPolicy{start: 20, min: 1, max: 100, cut: 0.75, growOnlySaturated: true, readHeaders: true,
		hold: true, minCooldown: 0.5, lowFrac: 0.10, critFrac: 0.03, gentle: 0.9}
}

func inspectLimiter() limiterPolicy {
	return limiterPolicy{start: 20, min: 10, max: 100, cut: 0.8, minCooldown: 1}
}

type limiter struct {
	p                                              limiterPolicy
	unlimited                                      bool
	limit, ssthresh, ceiling                       float64
	cooldownUntil, lastCut, gentleUntil, holdUntil float64
	latency                                        float64
	saturated                                      bool
	// per window
	pushback bool
	episodes int
}

func newLimiter(p limiterPolicy) *limiter {
	return &limiter{p: p, limit: p.start, ssthresh: math.Inf(1), ceiling: p.max}
}

func (l *limiter) cooldown(retryAfter float64) float64 {
	return max(l.p.minCooldown, 2*l.latency, retryAfter)
}

func (l *limiter) on429(now, sentAt, retryAfter float64) {
	l.pushback = true
	if l.p.hold && retryAfter > 0 {
		l.holdUntil = max(l.holdUntil, now+retryAfter)
	}
	if now < l.cooldownUntil || sentAt < l.lastCut {
		l.cooldownUntil = max(l.cooldownUntil, now+retryAfter)
		return
	}
	l.episodes++
	l.limit = max(l.p.min, math.Floor(l.limit*l.p.cut))
	l.ssthresh = l.limit
	l.lastCut = now
	l.cooldownUntil = now + l.cooldown(retryAfter)
	l.saturated = false
}

func (l *limiter) onOK(now, frac, lat float64) {
	if l.latency == 0 {
		l.latency = lat
	} else {
		l.latency = (l.latency*7 + lat) / 8
	}
	if l.p.readHeaders {
		if frac <= l.p.critFrac {
			l.pushback = true
			if now >= l.gentleUntil && now >= l.cooldownUntil {
				l.limit = max(l.p.min, math.Floor(l.limit*l.p.gentle))
				l.ssthresh = min(l.ssthresh, l.limit)
				l.gentleUntil = now + l.cooldown(0)
				l.saturated = false
			}
			return
		}
		if frac <= l.p.lowFrac {
			l.pushback = true
			return
		}
	}
	if now < l.cooldownUntil || now < l.gentleUntil {
		return
	}
	if l.p.growOnlySaturated && !l.saturated {
		return
	}
	if l.limit >= l.ceiling {
		return
	}
	from := int(l.limit)
	if l.limit < l.ssthresh {
		l.limit++
	} else {
		l.limit += 1 / l.limit
	}
	l.limit = min(l.limit, l.ceiling)
	if int(l.limit) != from {
		l.saturated = false
	}
}

func (l *limiter) setCeiling(n int) {
	l.ceiling = max(float64(n), l.p.min)
	l.limit = min(l.limit, l.ceiling)
}

func (l *limiter) clamp() { l.ceiling = max(math.Floor(l.limit), l.p.min) }

// provider is a token-bucket rate limiter for requests and tokens.
type provider struct {
	rpm, tpm     float64
	rCap, tCap   float64
	rTok, tTok   float64
	last         float64
	burstSeconds float64
}

func newProvider(rpm, tpm, burst float64) *provider {
	p := &provider{burstSeconds: burst}
	p.set(rpm, tpm)
	p.rTok, p.tTok = p.rCap, p.tCap
	return p
}

func (p *provider) set(rpm, tpm float64) {
	p.rpm, p.tpm = rpm, tpm
	p.rCap, p.tCap = rpm/60*p.burstSeconds, tpm/60*p.burstSeconds
	p.rTok, p.tTok = min(p.rTok, p.rCap), min(p.tTok, p.tCap)
}

func (p *provider) refill(now float64) {
	dt := now - p.last
	p.last = now
	if p.rpm > 0 {
		p.rTok = min(p.rCap, p.rTok+dt*p.rpm/60)
	}
	if p.tpm > 0 {
		p.tTok = min(p.tCap, p.tTok+dt*p.tpm/60)
	}
}

// try admits a request of n tokens: ok and the remaining fraction, or a 429
// and its Retry-After.
func (p *provider) try(now float64, n int) (ok bool, retryAfter, frac float64) {
	p.refill(now)
	frac = 1
	wait := 0.0
	if p.rpm > 0 && p.rTok < 1 {
		wait = max(wait, (1-p.rTok)/(p.rpm/60))
	}
	if p.tpm > 0 && p.tTok < float64(n) {
		wait = max(wait, (float64(n)-p.tTok)/(p.tpm/60))
	}
	if wait > 0 {
		return false, math.Ceil(wait*1000) / 1000, 0
	}
	if p.rpm > 0 {
		p.rTok--
		frac = min(frac, p.rTok/p.rCap)
	}
	if p.tpm > 0 {
		p.tTok -= float64(n)
		frac = min(frac, p.tTok/p.tCap)
	}
	return true, 0, frac
}

type simSample struct {
	task      int
	turn      int
	done      bool
	inBackoff bool
}

type simRequest struct {
	s      *simSample
	tokens int
	tries  int
	sentAt float64
}

type evKind int

const (
	evResponse evKind = iota
	evRetry
	evThink
	evTend
	evTimeout
	evHalve
	evWake
)

type event struct {
	t     float64
	seq   int
	kind  evKind
	req   *simRequest
	s     *simSample
	ok    bool
	ra    float64 // retry-after (429)
	frac  float64 // remaining fraction (ok)
	lat   float64
	units float64
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simTask struct {
	pending, running int
	sp               int
	satWin           bool
	errWin           int
}

// windowStat is what one tend window saw.
type windowStat struct {
	T        float64 // end of window
	Good     float64 // units (requests or tokens) served
	Capacity float64 // units the provider allowed
	Total    int     // sum of setpoints after the tend (admission limit)
	Conn     int     // connection limit at the tend
	Pushback bool
	Decision string
}

// simResult is one run's figures.
type simResult struct {
	Scenario, Policy string
	Goodput          float64 // served / allowed, over the whole run
	Share429         float64 // 429 responses / upstream requests
	Failed           int     // samples that errored or timed out
	Completed        int
	Settle           float64 // seconds to steady state (after the halving, when there is one); -1 never
	Reversals        int     // direction changes of the total setpoint
	Swing            float64 // std/mean of the total setpoint over the last half
	Idle             float64 // share of running-sample time spent waiting for model capacity
	Windows          []windowStat
}

type sim struct {
	cfg   simConfig
	pol   simPolicy
	rng   *rand.Rand
	now   float64
	seq   int
	evq   eventQueue
	prov  *provider
	lim   *limiter
	ctl   *Controller
	tasks []*simTask
	queue []*simRequest
	qHead int
	woken bool

	queuedWin                   bool
	inflight, backoff, waitingQ int
	lastAcc                     float64
	runInt, waitInt             float64

	requests, n429, failed, completed int
	winReq, winRetries                int
	winGood                           float64
	good                              float64
	windows                           []windowStat
	capacity                          float64
}

func (s *sim) at(t float64, e *event) {
	e.t = t
	s.seq++
	e.seq = s.seq
	heap.Push(&s.evq, e)
}

func (s *sim) setpoint(i int) int {
	switch s.pol.Kind {
	case polInspect:
		return max(1, int(s.lim.limit))
	case polUnlimited:
		return math.MaxInt
	}
	return s.tasks[i].sp
}

func (s *sim) admit(i int) {
	t := s.tasks[i]
	for t.pending > 0 {
		if t.running >= s.setpoint(i) {
			t.satWin = true
			return
		}
		t.pending--
		t.running++
		sm := &simSample{task: i}
		s.at(s.now+s.cfg.SampleTimeout, &event{kind: evTimeout, s: sm})
		s.enqueue(&simRequest{s: sm, tokens: s.cfg.InBase + s.cfg.OutTok})
	}
}

func (s *sim) admitAll() {
	for i := range s.tasks {
		s.admit(i)
	}
}

func (s *sim) enqueue(r *simRequest) {
	s.queue = append(s.queue, r)
	s.waitingQ++
}

func (s *sim) dispatch() {
	for s.qHead < len(s.queue) {
		r := s.queue[s.qHead]
		if r.s.done {
			s.qHead++
			s.waitingQ--
			continue
		}
		if !s.lim.unlimited {
			if s.now < s.lim.holdUntil {
				if !s.woken {
					s.woken = true
					s.at(s.lim.holdUntil, &event{kind: evWake})
				}
				break
			}
			if s.inflight >= int(s.lim.limit) {
				s.lim.saturated = true
				s.queuedWin = true
				break
			}
		}
		s.qHead++
		s.waitingQ--
		s.send(r)
	}
	if s.qHead > 4096 && s.qHead*2 > len(s.queue) {
		s.queue = append([]*simRequest(nil), s.queue[s.qHead:]...)
		s.qHead = 0
	}
}

func (s *sim) units(r *simRequest) float64 {
	if s.cfg.Unit == "tpm" {
		return float64(r.tokens)
	}
	return 1
}

func (s *sim) send(r *simRequest) {
	s.inflight++
	s.requests++
	s.winReq++
	r.sentAt = s.now
	ok, ra, frac := s.prov.try(s.now, r.tokens)
	if ok {
		lat := (s.cfg.LatBase + float64(s.cfg.OutTok)*s.cfg.LatPerOut) * (0.8 + 0.4*s.rng.Float64())
		s.at(s.now+lat, &event{kind: evResponse, req: r, ok: true, frac: frac, lat: lat, units: s.units(r)})
		return
	}
	s.at(s.now+0.05, &event{kind: evResponse, req: r, ok: false, ra: ra})
}

func (s *sim) fail(sm *simSample) {
	if sm.done {
		return
	}
	sm.done = true
	s.failed++
	t := s.tasks[sm.task]
	t.running--
	t.errWin++
	s.admit(sm.task)
}

func (s *sim) accumulate() {
	dt := s.now - s.lastAcc
	s.lastAcc = s.now
	running := 0
	for _, t := range s.tasks {
		running += t.running
	}
	s.runInt += dt * float64(running)
	s.waitInt += dt * float64(s.waitingQ+s.backoff)
}

func (s *sim) handle(e *event) {
	switch e.kind {
	case evResponse:
		s.inflight--
		r := e.req
		sm := r.s
		if e.ok {
			s.lim.onOK(s.now, e.frac, e.lat)
			s.good += e.units
			s.winGood += e.units
			if !sm.done {
				sm.turn++
				if sm.turn >= s.cfg.Turns {
					sm.done = true
					s.completed++
					s.tasks[sm.task].running--
					s.admit(sm.task)
				} else {
					think := s.cfg.ThinkLo + (s.cfg.ThinkHi-s.cfg.ThinkLo)*s.rng.Float64()
					s.at(s.now+think, &event{kind: evThink, s: sm})
				}
			}
		} else {
			s.n429++
			if !s.lim.unlimited {
				s.lim.on429(s.now, r.sentAt, e.ra)
			}
			r.tries++
			if r.tries > s.cfg.MaxRetries {
				s.fail(sm)
			} else if !sm.done {
				s.winRetries++
				backoff := max(e.ra, math.Min(60, math.Pow(2, float64(r.tries-1)))) * (1 + 0.25*s.rng.Float64())
				sm.inBackoff = true
				s.backoff++
				s.at(s.now+backoff, &event{kind: evRetry, req: r})
			}
		}
		if s.pol.Kind == polInspect {
			s.admitAll()
		}
		s.dispatch()
	case evRetry:
		sm := e.req.s
		sm.inBackoff = false
		s.backoff--
		if !sm.done {
			s.enqueue(e.req)
			s.dispatch()
		}
	case evThink:
		if !e.s.done {
			s.enqueue(&simRequest{s: e.s, tokens: s.cfg.InBase + s.cfg.InPerTurn*e.s.turn + s.cfg.OutTok})
			s.dispatch()
		}
	case evTimeout:
		if !e.s.done {
			if e.s.inBackoff {
				e.s.inBackoff = false
				s.backoff--
			}
			s.fail(e.s)
			s.dispatch()
		}
	case evWake:
		s.woken = false
		s.dispatch()
	case evHalve:
		s.prov.set(s.prov.rpm/2, s.prov.tpm/2)
	case evTend:
		s.tend()
		if s.now+s.cfg.Window <= s.cfg.Horizon+1e-9 {
			s.at(s.now+s.cfg.Window, &event{kind: evTend})
		}
	}
}

func (s *sim) rate() float64 {
	if s.cfg.Unit == "tpm" {
		return s.prov.tpm / 60
	}
	return s.prov.rpm / 60
}

func (s *sim) tend() {
	w := windowStat{T: s.now, Good: s.winGood, Capacity: s.capacity, Pushback: s.lim.pushback || s.lim.episodes > 0}
	if s.lim.unlimited {
		w.Pushback = false
	}
	switch s.pol.Kind {
	case polRamp:
		g := Signals{Pushback: w.Pushback, Retries: s.winRetries, Requests: s.winReq, ConnLimit: int(s.lim.limit)}
		ts := make([]TaskSignals, len(s.tasks))
		for i, t := range s.tasks {
			ts[i] = TaskSignals{Saturated: t.satWin || (t.pending > 0 && t.running >= t.sp), Errored: t.errWin}
			if s.pol.QueueGate && s.queuedWin {
				ts[i].Saturated = false
			}
		}
		d := s.ctl.Tend(time.Unix(0, 0).Add(time.Duration(s.now*float64(time.Second))), g, ts)
		if d.Clamp {
			s.lim.clamp()
		}
		if d.Ceiling > 0 {
			s.lim.setCeiling(d.Ceiling)
		}
		for i, t := range s.tasks {
			t.sp = d.Setpoints[i]
		}
		w.Decision = d.Reason
	}
	tot := 0
	for i := range s.tasks {
		sp := s.setpoint(i)
		if sp == math.MaxInt {
			tot = -1
			break
		}
		tot += sp
	}
	w.Total = tot
	w.Conn = int(s.lim.limit)
	s.windows = append(s.windows, w)
	s.winGood, s.winReq, s.winRetries = 0, 0, 0
	s.lim.pushback, s.lim.episodes = false, 0
	s.queuedWin = false
	for _, t := range s.tasks {
		t.satWin, t.errWin = false, 0
	}
	s.admitAll()
	s.dispatch()
}

// runSim runs one policy on one scenario.
func runSim(cfg simConfig, pol simPolicy) simResult {
	s := &sim{cfg: cfg, pol: pol, rng: rand.New(rand.NewPCG(cfg.Seed, 99))}
	s.prov = newProvider(cfg.RPM, cfg.TPM, cfg.BurstSeconds)
	specs := make([]TaskSpec, cfg.Tasks)
	for i := range specs {
		specs[i] = TaskSpec{Name: fmt.Sprintf("task%d", i)}
		s.tasks = append(s.tasks, &simTask{pending: cfg.SamplesPerTask})
	}
	switch pol.Kind {
	case polRamp:
		s.lim = newLimiter(stewardLimiter())
		c, err := New(Config{Range: DefaultRange, Down: pol.Down}, specs)
		if err != nil {
			panic(err)
		}
		s.ctl = c
		for i, sp := range c.Setpoints() {
			s.tasks[i].sp = sp
		}
		s.lim.setCeiling(c.Ceiling())
	case polFixed:
		s.lim = newLimiter(stewardLimiter())
		for _, t := range s.tasks {
			t.sp = pol.Fixed
		}
		s.lim.setCeiling(pol.Fixed * cfg.Tasks)
	case polInspect:
		s.lim = newLimiter(inspectLimiter())
	case polUnlimited:
		s.lim = &limiter{unlimited: true}
	}
	s.at(cfg.Window, &event{kind: evTend})
	if cfg.HalveAt > 0 {
		s.at(cfg.HalveAt, &event{kind: evHalve})
	}
	s.admitAll()
	s.dispatch()
	for s.evq.Len() > 0 {
		e := heap.Pop(&s.evq).(*event)
		if e.t > cfg.Horizon {
			break
		}
		s.capacity += (e.t - s.now) * s.rate()
		s.now = e.t
		s.accumulate()
		if e.kind == evTend {
			// capacity of this window is complete; reset after recording
			s.handle(e)
			s.capacity = 0
			continue
		}
		s.handle(e)
	}
	return s.result()
}

func (s *sim) result() simResult {
	r := simResult{Scenario: s.cfg.Name, Policy: s.pol.Name, Failed: s.failed, Completed: s.completed, Windows: s.windows}
	var good, capa float64
	for _, w := range s.windows {
		good += w.Good
		capa += w.Capacity
	}
	if capa > 0 {
		r.Goodput = good / capa
	}
	if s.requests > 0 {
		r.Share429 = float64(s.n429) / float64(s.requests)
	}
	if s.runInt > 0 {
		r.Idle = s.waitInt / s.runInt
	}
	// Steady state: the phase after the last change of limit.
	start := 0.0
	if s.cfg.HalveAt > 0 {
		start = s.cfg.HalveAt
	}
	var phase []windowStat
	for _, w := range s.windows {
		if w.T > start+1e-9 {
			phase = append(phase, w)
		}
	}
	r.Settle = settle(phase, start, s.cfg.Window)
	var totals []int
	for _, w := range s.windows {
		if w.Total >= 0 {
			totals = append(totals, w.Total)
		}
	}
	r.Reversals = reversals(totals)
	if len(totals) > 1 {
		r.Swing = swing(totals[len(totals)/2:])
	}
	return r
}

// settle is how long after start the 30-second moving average of goodput
// took to reach 90% of its final level (the mean over the last third of the
// phase) and hold it for a minute; -1 if it never did. The AIMD sawtooth
// keeps goodput moving by ±10-15% around its level, so "reached and held"
// is measured, not "never left"; the oscillation columns show the movement.
func settle(ws []windowStat, start, window float64) float64 {
	if len(ws) < 3 {
		return -1
	}
	g := make([]float64, len(ws))
	for i, w := range ws {
		if w.Capacity > 0 {
			g[i] = w.Good / w.Capacity
		}
	}
	ma := make([]float64, len(g))
	for i := range g {
		lo := max(0, i-2)
		sum := 0.0
		for _, x := range g[lo : i+1] {
			sum += x
		}
		ma[i] = sum / float64(i+1-lo)
	}
	final := 0.0
	tail := ma[len(ma)*2/3:]
	for _, x := range tail {
		final += x
	}
	final /= float64(len(tail))
	if final <= 0 {
		return -1
	}
	const hold = 6 // windows the level must hold once reached
	for i := range ma {
		ok := true
		for _, x := range ma[i:min(len(ma), i+hold)] {
			if x < 0.9*final {
				ok = false
				break
			}
		}
		if ok {
			return ws[i].T - start
		}
	}
	return -1
}

func reversals(xs []int) int {
	n, dir := 0, 0
	for i := 1; i < len(xs); i++ {
		d := xs[i] - xs[i-1]
		if d == 0 {
			continue
		}
		sd := 1
		if d < 0 {
			sd = -1
		}
		if dir != 0 && sd != dir {
			n++
		}
		dir = sd
	}
	return n
}

func swing(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	if mean == 0 {
		return 0
	}
	v := 0.0
	for _, x := range xs {
		v += (float64(x) - mean) * (float64(x) - mean)
	}
	return math.Sqrt(v/float64(len(xs))) / mean
}

// writeTable prints results as a Markdown table.
func writeTable(w io.Writer, rs []simResult) {
	fmt.Fprintln(w, "| limit | policy | goodput | 429 share | failed samples | completed | steady after | setpoint reversals | setpoint swing | waiting share |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		st := "never"
		if r.Settle >= 0 {
			st = fmt.Sprintf("%.0f s", r.Settle)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f%% | %.2f%% | %d | %d | %s | %d | %.1f%% | %.0f%% |\n",
			r.Scenario, r.Policy, 100*r.Goodput, 100*r.Share429, r.Failed, r.Completed, st, r.Reversals, 100*r.Swing, 100*r.Idle)
	}
}

// trace renders a run's windows, for debugging.
func trace(r simResult) string {
	var b strings.Builder
	for _, w := range r.Windows {
		fmt.Fprintf(&b, "%6.0f good %.2f total %d conn %d push %v  %s\n", w.T, w.Good/math.Max(w.Capacity, 1e-9), w.Total, w.Conn, w.Pushback, w.Decision)
	}
	return b.String()
}
