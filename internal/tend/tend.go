// Package tend is the supervisor's control loop (R1–R6): once per window it
// reads _steward.yaml's samples_ramp again, follows `steward ramp
// hold|resume`, feeds the ramp the tasks' saturation, their errored
// attempts and the gateway's window signals, applies the ramp's decision
// (the scheduler's caps, the gateway's connection ceiling) and keeps it:
// ramp history in the record, and the live state `steward tend` shows.
package tend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
)

// HoldKey is the record control that holds the ramp (R5); its value is the reason.
const HoldKey = "ramp.hold"

// LiveRefresh is how often, at most, the live state `steward tend` shows
// is rewritten between tends when its counts changed: a long tend_interval
// no longer leaves it at "0 running" while hundreds run.
const LiveRefresh = time.Second

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

// TaskLive is one task's row of a snapshot: the scheduler's live counts,
// its share of the budget (Setpoint) and the ramp's cap over it.
type TaskLive struct {
	sched.Live
	Setpoint, Cap int
}

// Run is what the loop reads of the run it tends and tells it.
type Run interface {
	// Snapshot reads the counts line and every task's live row at one
	// moment, by one definition of running (sched.Live).
	Snapshot() (report.Counts, []TaskLive)
	// TakeErrored returns each task's errored attempts since it was last
	// called, and counts again from zero.
	TakeErrored() []int
	// Held is told the ramp's hold reason ("": not held) at every tend.
	Held(reason string)
	// Live and Tended are told what the loop wrote to the record.
	Live(*LiveState)
	Tended(points []record.RampPoint)
}

// Config is one run's loop.
type Config struct {
	// RunID, EvalSet (its file), Plan (the PLAN line), Tasks (their names)
	// and Budget are what the live state names.
	RunID, EvalSet, Plan string
	Tasks                []string
	Budget               int
	// Interval is tend_interval (0: 10 s).
	Interval time.Duration
	// FleetFile (_steward.yaml) is read again at every tend with Getenv and
	// Flags (flags keep winning); Range is samples_ramp as the launch read it.
	FleetFile string
	Getenv    func(string) string
	Flags     evalset.FleetOverrides
	Range     evalset.RampRange
	// FixedConnections: max_connections is set, so the loop leaves the
	// gateway's connection ceiling alone (C5).
	FixedConnections bool
	Ramp             *ramp.Controller
	Disp             *sched.Dispatcher
	Gateway          *gateway.Gateway
	DB               *record.DB
	Run              Run
	Stderr           io.Writer
}

// Loop runs one control step per window until stop closes or ctx ends.
func Loop(ctx context.Context, cfg Config, stop <-chan struct{}) {
	interval := cfg.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	n := len(cfg.Tasks)
	t := &tender{cfg: cfg, rng: cfg.Range, saturated: make([]bool, n), budgetBound: make([]bool, n)}
	// A ceiling of 0 means no ramp is active: leave the gateway's own ceiling alone.
	if c := cfg.Ramp.Ceiling(); c > 0 && !cfg.FixedConnections {
		cfg.Gateway.SetCeiling(c)
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
			tick.Reset(cfg.Ramp.Next(interval))
		}
	}
}

// tender is the state one run's loop keeps between windows.
type tender struct {
	cfg         Config
	rng         evalset.RampRange // samples_ramp now
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
	t.cfg.Disp.With(func(s *sched.State) {
		for i := range t.saturated {
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
	cfg := t.cfg
	t.rereadFleet()
	t.followHold(ctx)
	w := cfg.Gateway.Window()
	g := ramp.Signals{Pushback: w.Pushback || w.Episodes > 0, Retries: w.Retries, Requests: w.Requests, ConnLimit: w.Limit, ConnFixed: w.Fixed, ConnNeed: w.Need}
	ts := taskSignals(t.saturated, t.budgetBound, cfg.Run.TakeErrored(), gatewayBound(w))
	for i := range t.saturated {
		t.saturated[i], t.budgetBound[i] = false, false
	}
	d := cfg.Ramp.Tend(now, g, ts)
	cfg.Disp.With(func(s *sched.State) {
		for i, sp := range d.Setpoints {
			s.SetCap(i, sp)
		}
	})
	t.applyCeiling(d)
	var pts []record.RampPoint
	for i, td := range d.Tasks {
		pts = append(pts, record.RampPoint{
			At: now, Task: td.Name, Setpoint: td.Setpoint, Ceiling: d.Ceiling, ConnLimit: w.Limit,
			Decision: string(td.Action), Reason: td.Reason, Pushback: g.Pushback, Retries: w.Retries,
			Errored: ts[i].Errored, Saturated: ts[i].Saturated,
		})
	}
	if err := cfg.DB.AddRamp(ctx, cfg.RunID, pts); err != nil {
		fmt.Fprintf(cfg.Stderr, "steward: %v\n", err)
	} else {
		cfg.Run.Tended(pts)
	}
	t.last, t.tended = d, true
	c, rows := cfg.Run.Snapshot()
	t.liveKey = fmt.Sprint(c, rows)
	t.writeLive(ctx, now, c, rows)
}

// applyCeiling moves the gateway's connection ceiling as the ramp decided
// (R2, R3), unless connections are fixed.
func (t *tender) applyCeiling(d ramp.Decision) {
	if t.cfg.FixedConnections {
		return
	}
	gw := t.cfg.Gateway
	if d.Clamp {
		gw.Clamp()
	}
	if d.Ceiling > 0 {
		gw.SetCeiling(d.Ceiling)
	} else if t.rampCeiling {
		// samples_ramp turned false on a live run: hand the limit back (R4).
		gw.SetCeiling(0)
	}
	t.rampCeiling = d.Ceiling > 0
}

// rereadFleet follows _steward.yaml's samples_ramp on a live run (R4); a
// refused file is said once and the range kept.
func (t *tender) rereadFleet() {
	cfg := t.cfg
	f, err := evalset.LoadFleet(cfg.FleetFile, cfg.Getenv, cfg.Flags)
	if err != nil {
		if msg := err.Error(); msg != t.badRange {
			fmt.Fprintf(cfg.Stderr, "steward: _steward.yaml refused, keeping samples_ramp %s: %v\n", Range(t.rng), err)
			t.badRange = msg
		}
		return
	}
	t.badRange = ""
	if r := Range(f.SamplesRamp); r != Range(t.rng) {
		if err := cfg.Ramp.SetRange(r); err != nil {
			fmt.Fprintf(cfg.Stderr, "steward: samples_ramp %s refused: %v\n", r, err)
		} else {
			fmt.Fprintf(cfg.Stderr, "steward: samples_ramp is now %s\n", r)
			t.rng = f.SamplesRamp
		}
	}
}

// followHold applies `steward ramp hold|resume`, which reaches a live run
// through the record (R5).
func (t *tender) followHold(ctx context.Context) {
	reason, err := t.cfg.DB.Control(ctx, HoldKey)
	if err != nil {
		return
	}
	cur, held := t.cfg.Ramp.Held()
	switch {
	case reason != "" && (!held || cur != reason):
		t.cfg.Ramp.Hold(reason)
	case reason == "" && held:
		t.cfg.Ramp.Resume()
	}
	t.cfg.Run.Held(reason)
}

// refreshLive rewrites the live state with the last decision when the
// counts or the task rows changed since it was last written.
func (t *tender) refreshLive(ctx context.Context, now time.Time) {
	c, rows := t.cfg.Run.Snapshot()
	key := fmt.Sprint(c, rows)
	if key == t.liveKey {
		return
	}
	t.liveKey = key
	t.writeLive(ctx, now, c, rows)
}

// writeLive writes what `steward tend` shows, from one snapshot.
func (t *tender) writeLive(ctx context.Context, now time.Time, c report.Counts, rows []TaskLive) {
	cfg := t.cfg
	live := LiveState{RunID: cfg.RunID, EvalSet: cfg.EvalSet, Plan: cfg.Plan, At: now, Counts: c, Decision: t.last, Tasks: cfg.Tasks,
		Budget: cfg.Budget, Tended: t.tended}
	live.Held, _ = cfg.Ramp.Held()
	cur, _ := cfg.Ramp.Range()
	live.Range = cur.String()
	for _, r := range rows {
		live.Setpoints = append(live.Setpoints, r.Setpoint)
		live.Caps = append(live.Caps, r.Cap)
		live.Running = append(live.Running, r.Running)
		live.Starting = append(live.Starting, r.Starting)
		live.Queued = append(live.Queued, r.Queued)
	}
	if b, err := json.Marshal(live); err == nil {
		if cfg.DB.SetLive(ctx, cfg.RunID, string(b), now) == nil {
			cfg.Run.Live(&live)
		}
	}
}

// Range is samples_ramp as the ramp reads it.
func Range(r evalset.RampRange) ramp.Range {
	return ramp.Range{Enabled: r.Enabled, Lo: r.Lo, Hi: r.Hi}
}

// gatewayBound: requests filled the connection limit while it sat below its
// ceiling, so the provider, not the sample limit, holds work back: more
// samples would only wait at the gateway, and no task climbs.
func gatewayBound(w gateway.Signals) bool {
	return w.Saturated && w.Ceiling > 0 && w.Limit < w.Ceiling
}

// taskSignals are the ramp's per-task signals for one window: a task
// saturated at its cap climbs unless the gateway is the bound; a task is
// budget-bound only when it was not also saturated.
func taskSignals(saturated, budgetBound []bool, errored []int, gwBound bool) []ramp.TaskSignals {
	ts := make([]ramp.TaskSignals, len(saturated))
	for i := range ts {
		ts[i] = ramp.TaskSignals{Saturated: saturated[i] && !gwBound, BudgetBound: budgetBound[i] && !saturated[i], Errored: errored[i]}
	}
	return ts
}
