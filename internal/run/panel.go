package run

import (
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sched"
)

// counts is the live counts line (L1): record statuses plus the scheduler's
// running and queued.
func (l *launcher) counts() report.Counts {
	var c report.Counts
	c.Total = len(l.p.Attempts)
	if l.disp != nil {
		l.disp.With(func(s *sched.State) {
			ph := s.Counts()
			c.Queued = ph[sched.Queued]
			c.Running = ph[sched.Running] + ph[sched.Backoff] + ph[sched.Resuming]
		})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Reused = l.reused
	for _, st := range l.published {
		switch st {
		case report.StatusPassed:
			c.Passed++
		case report.StatusFailed:
			c.Failed++
		case report.StatusErrored:
			c.Errored++
		case report.StatusInfra:
			c.Infra++
		case report.StatusSkipped:
			c.Skipped++
		case report.StatusInterrupted:
			c.Interrupted++
		}
	}
	return c
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
