package run

import (
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
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
		switch st {
		case status.Passed:
			c.Passed++
		case status.Failed:
			c.Failed++
		case status.Errored:
			c.Errored++
		case status.Infra:
			c.Infra++
		case status.Skipped:
			c.Skipped++
		case status.Interrupted:
			c.Interrupted++
		}
	}
	return c, rows
}

// panelLoop redraws the counts line on a TTY, or prints it as plain lines
// every PanelInterval (CI logs), only when it changed.
func (d *dispatch) panelLoop(stop chan struct{}) {
	every := d.opts.PanelInterval
	if d.opts.TTY {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d.panelDraw()
		}
	}
}

func (d *dispatch) panelDraw() {
	line := report.CountsLine(d.counts())
	d.tally.mu.Lock()
	if h := d.tally.hold; h != "" {
		line += " ramp held: " + h
	}
	d.tally.mu.Unlock()
	if line == d.panelLast {
		return
	}
	d.panelLast = line
	if d.opts.TTY {
		fmt.Fprintf(d.opts.Stderr, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(d.opts.Stderr, line)
	}
}

func (d *dispatch) panelFinal() {
	d.panelLast = ""
	d.panelDraw()
	if d.opts.TTY {
		fmt.Fprintln(d.opts.Stderr)
	}
}
