package run

import (
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
)

// counts is the live counts line (L1): record statuses plus the scheduler's
// running, starting and queued.
func (l *launcher) counts() report.Counts {
	c, _ := l.snapshot()
	return c
}

// taskLive is one task's row of a snapshot.
type taskLive struct {
	sched.Live
	Setpoint, Cap int
}

// snapshot reads the counts line and every task's live row at one moment,
// by one definition of running (sched.Live): the total line and the
// per-task rows of `steward tend` always agree.
func (l *launcher) snapshot() (report.Counts, []taskLive) {
	var c report.Counts
	c.Total = len(l.p.Attempts)
	var rows []taskLive
	if l.disp != nil {
		rows = make([]taskLive, len(l.p.Tasks))
		l.disp.With(func(s *sched.State) {
			for i := range rows {
				rows[i] = taskLive{Live: s.TaskLive(i), Setpoint: s.Setpoint(i), Cap: s.Cap(i)}
				c.Queued += rows[i].Queued
				c.Starting += rows[i].Starting
				c.Running += rows[i].Running
			}
		})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Reused = l.reused
	for _, st := range l.published {
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
func (l *launcher) panelLoop(stop chan struct{}) {
	every := l.opts.PanelInterval
	if l.opts.TTY {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.panelDraw()
		}
	}
}

func (l *launcher) panelDraw() {
	line := report.CountsLine(l.counts())
	l.mu.Lock()
	if h := l.hold; h != "" {
		line += " ramp held: " + h
	}
	l.mu.Unlock()
	if line == l.panelLast {
		return
	}
	l.panelLast = line
	if l.opts.TTY {
		fmt.Fprintf(l.opts.Stderr, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(l.opts.Stderr, line)
	}
}

func (l *launcher) panelFinal() {
	l.panelLast = ""
	l.panelDraw()
	if l.opts.TTY {
		fmt.Fprintln(l.opts.Stderr)
	}
}
