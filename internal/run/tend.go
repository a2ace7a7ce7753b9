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

func toRange(r evalset.RampRange) ramp.Range {
	return ramp.Range{Enabled: r.Enabled, Lo: r.Lo, Hi: r.Hi}
}

func (l *launcher) newRamp() (*ramp.Controller, error) {
	var tasks []ramp.TaskSpec
	for _, t := range l.p.Tasks {
		tasks = append(tasks, ramp.TaskSpec{Name: t.Task.Name, MaxSamples: t.Task.MaxSamples})
	}
	c, err := ramp.New(ramp.Config{Range: toRange(l.es.Fleet.SamplesRamp), Budget: l.budget}, tasks)
	if err != nil {
		return nil, badInput("samples_ramp: %v", err)
	}
	return c, nil
}

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

// publishLive writes what `steward tend` shows, from one snapshot.
func (l *launcher) publishLive(ctx context.Context, ctl *ramp.Controller, d ramp.Decision, tended bool, now time.Time) {
	c, rows := l.snapshot()
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
func (l *launcher) tendLoop(ctx context.Context, ctl *ramp.Controller, stop chan struct{}) {
	interval := l.es.Fleet.TendInterval.D()
	if interval <= 0 {
		interval = 10 * time.Second
	}
	// A ceiling of 0 means no ramp is active: leave the gateway's own ceiling alone.
	rampCeiling := false
	if c := ctl.Ceiling(); c > 0 && !l.fixedConnections() {
		l.gw.SetCeiling(c)
		rampCeiling = true
	}
	// The starting setpoints are visible before the first tend (`steward tend`).
	l.publishLive(ctx, ctl, ramp.Decision{}, false, time.Now())
	var badRange string
	tick := time.NewTicker(interval)
	defer tick.Stop()
	saturated := make([]bool, len(l.p.Tasks))
	budgetBound := make([]bool, len(l.p.Tasks))
	// Saturation is sampled often within the window: a task is saturated
	// when, at some moment of the window, its setpoint (cap) was full of
	// running attempts (sandbox up and executing: attempts still starting do
	// not count) with work queued. It is budget-bound instead when its share
	// of the budget, below its cap, was what was full.
	sample := time.NewTicker(max(interval/20, 10*time.Millisecond))
	defer sample.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-sample.C:
			l.disp.With(func(s *sched.State) {
				for i := range l.p.Tasks {
					lv, cp, sp := s.TaskLive(i), s.Cap(i), s.Setpoint(i)
					if lv.Queued == 0 || !s.Ready(i) {
						continue
					}
					switch {
					case cp > 0 && lv.Running >= cp:
						saturated[i] = true
					case sp < cp && lv.Units >= sp && lv.Running >= lv.Units:
						budgetBound[i] = true
					}
				}
			})
			continue
		case <-tick.C:
		}
		now := time.Now()
		// R4: the running supervisor re-reads _steward.yaml at each tend.
		if f, err := evalset.LoadFleet(filepath.Join(l.es.Dir, "_steward.yaml"), l.opts.Getenv, l.opts.FleetFlags); err != nil {
			if msg := err.Error(); msg != badRange {
				fmt.Fprintf(l.opts.Stderr, "steward: _steward.yaml refused, keeping samples_ramp %s: %v\n", toRange(l.es.Fleet.SamplesRamp), err)
				badRange = msg
			}
		} else {
			badRange = ""
			if r := toRange(f.SamplesRamp); r != toRange(l.es.Fleet.SamplesRamp) {
				if err := ctl.SetRange(r); err != nil {
					fmt.Fprintf(l.opts.Stderr, "steward: samples_ramp %s refused: %v\n", r, err)
				} else {
					fmt.Fprintf(l.opts.Stderr, "steward: samples_ramp is now %s\n", r)
					l.es.Fleet.SamplesRamp = f.SamplesRamp
				}
			}
		}
		// R5: hold and resume reach a live run through the record.
		if reason, err := l.db.Control(ctx, HoldKey); err == nil {
			cur, held := ctl.Held()
			switch {
			case reason != "" && (!held || cur != reason):
				ctl.Hold(reason)
			case reason == "" && held:
				ctl.Resume()
			}
			l.mu.Lock()
			l.hold = reason
			l.mu.Unlock()
		}
		w := l.gw.Window()
		g := ramp.Signals{Pushback: w.Pushback || w.Episodes > 0, Retries: w.Retries, Requests: w.Requests, ConnLimit: w.Limit, ConnFixed: w.Fixed}
		l.mu.Lock()
		ts := taskSignals(saturated, budgetBound, l.errWin, gatewayBound(w))
		for i := range ts {
			l.errWin[i] = 0
			saturated[i], budgetBound[i] = false, false
		}
		l.mu.Unlock()
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
			} else if rampCeiling {
				// samples_ramp turned false on a live run: hand the limit back (R4).
				l.gw.SetCeiling(0)
			}
			rampCeiling = d.Ceiling > 0
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
		}
		l.publishLive(ctx, ctl, d, true, now)
	}
}

func (l *launcher) fixedConnections() bool { return l.es.Model.MaxConnections > 0 }
