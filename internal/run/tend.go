package run

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
)

// HoldKey is the record control that holds the ramp (R5); its value is the reason.
const HoldKey = "ramp.hold"

// LiveState is what `steward tend` shows of a running invocation.
type LiveState struct {
	RunID    string        `json:"run_id"`
	EvalSet  string        `json:"eval_set"`
	Plan     string        `json:"plan"`
	At       time.Time     `json:"at"`
	Counts   report.Counts `json:"counts"`
	Range    string        `json:"range"`
	Held     string        `json:"held,omitempty"`
	Decision ramp.Decision `json:"decision"`
	Tasks    []string      `json:"tasks"`
	// Setpoints are the tasks' shares of the sandbox budget now (0 while a
	// task waits or is finished; they never add up to more than the
	// budget); Caps the ramp's setpoints (or max_samples) that bound them.
	Setpoints []int `json:"setpoints"`
	Caps      []int `json:"caps,omitempty"`
	// Running, Starting and Queued per task, read at the same moment as
	// Counts and by the same definition, so they add up to its figures.
	Running  []int `json:"running"`
	Starting []int `json:"starting,omitempty"`
	Queued   []int `json:"queued"`
	Budget   int   `json:"budget"`
	// Tended is false before the first tend: Decision is then empty and the
	// setpoints are where the ramp starts.
	Tended bool `json:"tended"`
}

// LiveRefresh is how often, at most, the live state `steward tend` shows
// is rewritten between tends when its counts changed: a long tend_interval
// no longer leaves it at "0 running" while hundreds run.
const LiveRefresh = time.Second

// refreshLive rewrites the live state with the last decision when the
// counts or the task rows changed since it was last written.
func (t *tender) refreshLive(ctx context.Context, now time.Time) {
	c, rows := t.d.snapshot()
	key := fmt.Sprint(c, rows)
	if key == t.liveKey {
		return
	}
	t.liveKey = key
	t.d.writeLive(ctx, t.ctl, t.last, t.tended, now, c, rows)
}

// writeLive writes what `steward tend` shows, from one snapshot.
func (l *dispatch) writeLive(ctx context.Context, ctl *ramp.Controller, d ramp.Decision, tended bool, now time.Time, c report.Counts, rows []taskLive) {
	names := make([]string, len(l.p.Tasks))
	for i, t := range l.p.Tasks {
		names[i] = t.Task.Name
	}
	live := LiveState{RunID: l.runID, EvalSet: l.es.File, Plan: l.planLine, At: now, Counts: c, Decision: d, Tasks: names,
		Budget: l.budget, Tended: tended}
	live.Held, _ = ctl.Held()
	cur, _ := ctl.Range()
	live.Range = cur.String()
	for _, r := range rows {
		live.Setpoints = append(live.Setpoints, r.Setpoint)
		live.Caps = append(live.Caps, r.Cap)
		live.Running = append(live.Running, r.Running)
		live.Starting = append(live.Starting, r.Starting)
		live.Queued = append(live.Queued, r.Queued)
	}
	if b, err := json.Marshal(live); err == nil {
		if l.db.SetLive(ctx, l.runID, string(b), now) == nil {
			l.observe(Event{Live: &live})
		}
	}
}

// tendLoop runs one control step per window (R1–R6): read the limiter and
// gateway signals, move setpoints and the connection ceiling, keep history.
func (l *dispatch) tendLoop(ctx context.Context, ctl *ramp.Controller, stop chan struct{}) {
	interval := l.es.Fleet.TendInterval.D()
	if interval <= 0 {
		interval = 10 * time.Second
	}
	t := &tender{d: l, ctl: ctl, rng: l.es.Fleet.SamplesRamp, saturated: make([]bool, len(l.p.Tasks)), budgetBound: make([]bool, len(l.p.Tasks))}
	// A ceiling of 0 means no ramp is active: leave the gateway's own ceiling alone.
	if c := ctl.Ceiling(); c > 0 && !l.fixedConnections() {
		l.gw.SetCeiling(c)
		t.rampCeiling = true
	}
	// The starting setpoints are visible before the first tend (`steward tend`),
	// and the counts follow the run between tends.
	t.refreshLive(ctx, time.Now())
	// A tend comes every window, or sooner while the ramp says a known-idle
	// provider waits for the samples (ramp.Controller.Next).
	tick := time.NewTimer(interval)
	defer tick.Stop()
	live := time.NewTicker(min(interval, LiveRefresh))
	defer live.Stop()
	// Saturation is sampled often within the window (tender.sample).
	sample := time.NewTicker(max(interval/20, 10*time.Millisecond))
	defer sample.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-sample.C:
			t.sample()
		case <-live.C:
			t.refreshLive(ctx, time.Now())
		case <-tick.C:
			t.tend(ctx, time.Now())
			tick.Reset(ctl.Next(interval))
		}
	}
}

// tender is the state one run's tend loop keeps between windows.
type tender struct {
	d           *dispatch
	ctl         *ramp.Controller
	rng         evalset.RampRange // samples_ramp now (_steward.yaml is read again each tend)
	saturated   []bool            // per task, this window
	budgetBound []bool            // per task, this window
	badRange    string            // the last refused _steward.yaml, said once
	rampCeiling bool              // the ramp set the gateway's ceiling
	// The last decision and whether there was one (what the live state
	// shows between tends), and what the live state last showed.
	last    ramp.Decision
	tended  bool
	liveKey string
}

// sample notes, per task, whether at this moment its setpoint (cap) was full
// of running attempts (sandbox up and executing: attempts still starting do
// not count) with work queued — saturated — or its share of the budget,
// below its cap, was what was full — budget-bound.
func (t *tender) sample() {
	t.d.disp.With(func(s *sched.State) {
		for i := range t.d.p.Tasks {
			lv, cp, sp := s.TaskLive(i), s.Cap(i), s.Setpoint(i)
			if lv.Queued == 0 || !s.Ready(i) {
				continue
			}
			switch {
			case cp > 0 && lv.Running >= cp:
				t.saturated[i] = true
			case sp < cp && lv.Units >= sp && lv.Running >= lv.Units:
				t.budgetBound[i] = true
			}
		}
	})
}

// tend closes a window: it follows _steward.yaml and hold/resume, asks the
// ramp for its decision on the window's signals, applies it to the
// scheduler and the gateway, and records it.
func (t *tender) tend(ctx context.Context, now time.Time) {
	l, ctl := t.d, t.ctl
	t.rereadFleet()
	t.followHold(ctx)
	w := l.gw.Window()
	g := ramp.Signals{Pushback: w.Pushback || w.Episodes > 0, Retries: w.Retries, Requests: w.Requests, ConnLimit: w.Limit, ConnFixed: w.Fixed, ConnNeed: w.Need}
	l.tally.mu.Lock()
	ts := taskSignals(t.saturated, t.budgetBound, l.tally.errWin, gatewayBound(w))
	for i := range ts {
		l.tally.errWin[i] = 0
		t.saturated[i], t.budgetBound[i] = false, false
	}
	l.tally.mu.Unlock()
	d := ctl.Tend(now, g, ts)
	l.disp.With(func(s *sched.State) {
		for i, sp := range d.Setpoints {
			s.SetCap(i, sp)
		}
	})
	if !l.fixedConnections() {
		if d.Clamp {
			l.gw.Clamp()
		}
		if d.Ceiling > 0 {
			l.gw.SetCeiling(d.Ceiling)
		} else if t.rampCeiling {
			// samples_ramp turned false on a live run: hand the limit back (R4).
			l.gw.SetCeiling(0)
		}
		t.rampCeiling = d.Ceiling > 0
	}
	var pts []record.RampPoint
	for i, td := range d.Tasks {
		pts = append(pts, record.RampPoint{
			At: now, Task: td.Name, Setpoint: td.Setpoint, Ceiling: d.Ceiling, ConnLimit: w.Limit,
			Decision: string(td.Action), Reason: td.Reason, Pushback: g.Pushback, Retries: w.Retries,
			Errored: ts[i].Errored, Saturated: ts[i].Saturated,
		})
	}
	if err := l.db.AddRamp(ctx, l.runID, pts); err != nil {
		fmt.Fprintf(l.opts.Stderr, "steward: %v\n", err)
	} else {
		l.observe(Event{Tend: &Tended{RunID: l.runID, Points: pts}})
	}
	t.last, t.tended = d, true
	c, rows := l.snapshot()
	t.liveKey = fmt.Sprint(c, rows)
	l.writeLive(ctx, ctl, d, true, now, c, rows)
}

// rereadFleet follows _steward.yaml's samples_ramp on a live run (R4); a
// refused file is said once and the range kept.
func (t *tender) rereadFleet() {
	l := t.d
	f, err := evalset.LoadFleet(filepath.Join(l.es.Dir, "_steward.yaml"), l.opts.Getenv, l.opts.FleetFlags)
	if err != nil {
		if msg := err.Error(); msg != t.badRange {
			fmt.Fprintf(l.opts.Stderr, "steward: _steward.yaml refused, keeping samples_ramp %s: %v\n", toRange(t.rng), err)
			t.badRange = msg
		}
		return
	}
	t.badRange = ""
	if r := toRange(f.SamplesRamp); r != toRange(t.rng) {
		if err := t.ctl.SetRange(r); err != nil {
			fmt.Fprintf(l.opts.Stderr, "steward: samples_ramp %s refused: %v\n", r, err)
		} else {
			fmt.Fprintf(l.opts.Stderr, "steward: samples_ramp is now %s\n", r)
			t.rng = f.SamplesRamp
		}
	}
}

// followHold applies `steward ramp hold|resume`, which reaches a live run
// through the record (R5).
func (t *tender) followHold(ctx context.Context) {
	reason, err := t.d.db.Control(ctx, HoldKey)
	if err != nil {
		return
	}
	cur, held := t.ctl.Held()
	switch {
	case reason != "" && (!held || cur != reason):
		t.ctl.Hold(reason)
	case reason == "" && held:
		t.ctl.Resume()
	}
	t.d.tally.mu.Lock()
	t.d.tally.hold = reason
	t.d.tally.mu.Unlock()
}

func (l *dispatch) fixedConnections() bool { return l.es.Model.MaxConnections > 0 }
