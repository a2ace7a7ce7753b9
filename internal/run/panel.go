package run

import (
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/tend"
)

// counts is the live counts line (L1): record statuses plus the scheduler's
// running, starting and queued.
func (d *dispatch) counts() report.Counts {
	c, _ := d.snapshot()
	return c
}

// snapshot reads the counts line and every task's live row at one moment,
// by one definition of running (sched.Live): the total line and the
// per-task rows of `steward tend` always agree.
func (d *dispatch) snapshot() (report.Counts, []tend.TaskLive) {
	var c report.Counts
	c.Total = len(d.p.Attempts)
	var rows []tend.TaskLive
	if d.disp != nil {
		rows = make([]tend.TaskLive, len(d.p.Tasks))
		d.disp.With(func(s *sched.State) {
			for i := range rows {
				rows[i] = tend.TaskLive{Live: s.TaskLive(i), Setpoint: s.Setpoint(i), Cap: s.Cap(i)}
				c.Queued += rows[i].Queued
				c.Starting += rows[i].Starting
				c.Running += rows[i].Running
			}
		})
	}
	d.tally.mu.Lock()
	defer d.tally.mu.Unlock()
	c.Reused = d.tally.reused
	for _, st := range d.tally.published {
		c.Add(st)
	}
	return c, rows
}

// panelLine is the live panel's line (internal/panel): the counts, and
// why the ramp holds.
func (d *dispatch) panelLine() string {
	line := report.CountsLine(d.counts())
	d.tally.mu.Lock()
	defer d.tally.mu.Unlock()
	if h := d.tally.hold; h != "" {
		line += " ramp held: " + h
	}
	return line
}
