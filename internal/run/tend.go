package run

import (
	"context"
	"path/filepath"

	"github.com/steward-evals/steward/internal/ramp"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/tend"
)

// tendLoop runs the run's control loop (internal/tend) until stop closes:
// the dispatch stage is the tend.Run it reads and tells.
func (d *dispatch) tendLoop(ctx context.Context, ctl *ramp.Controller, stop chan struct{}) {
	names := make([]string, len(d.p.Tasks))
	for i, t := range d.p.Tasks {
		names[i] = t.Task.Name
	}
	tend.Loop(ctx, tend.Config{RunID: d.runID, EvalSet: d.es.File, Plan: d.planLine, Tasks: names, Budget: d.budget,
		Interval: d.es.Fleet.TendInterval.D(), FleetFile: filepath.Join(d.es.Dir, "_steward.yaml"), Getenv: d.opts.Getenv,
		Flags: d.opts.FleetFlags, Range: d.es.Fleet.SamplesRamp, FixedConnections: d.es.Model.MaxConnections > 0,
		Ramp: ctl, Disp: d.disp, Gateway: d.gw, DB: d.db, Run: d, Stderr: d.opts.Stderr}, stop)
}

// Snapshot is the tallies' and the scheduler's counts at one moment (tend.Run).
func (d *dispatch) Snapshot() (c report.Counts, rows []tend.TaskLive) { return d.snapshot() }

// TakeErrored returns the window's errored attempts per task and clears them (tend.Run).
func (d *dispatch) TakeErrored() []int {
	d.tally.mu.Lock()
	defer d.tally.mu.Unlock()
	out := append([]int(nil), d.tally.errWin...)
	clear(d.tally.errWin)
	return out
}

// Held notes the ramp's hold reason for the panel (tend.Run).
func (d *dispatch) Held(reason string) {
	d.tally.mu.Lock()
	d.tally.hold = reason
	d.tally.mu.Unlock()
}

// Live tells Observe of the live state the loop wrote (tend.Run).
func (d *dispatch) Live(s *tend.LiveState) { d.observe(Event{Live: s}) }

// Tended tells Observe of a tend's ramp history (tend.Run).
func (d *dispatch) Tended(points []record.RampPoint) {
	d.observe(Event{Tend: &Tended{RunID: d.runID, Points: points}})
}
