// Package panel draws a launch's live counts line (L1, report.CountsLine)
// on its stderr: on a terminal redrawn in place five times a second,
// otherwise (CI logs) printed as a plain line every interval, and only when
// it changed. What the line says is the caller's (Line).
package panel

import (
	"fmt"
	"io"
	"time"
)

// ttyEvery is how often a terminal's line is redrawn.
const ttyEvery = 200 * time.Millisecond

// Panel draws one line. Loop, Draw and Final are called from one goroutine
// at a time (Final once the loop has stopped).
type Panel struct {
	w     io.Writer
	tty   bool
	every time.Duration
	line  func() string
	last  string // the last line drawn
}

// New is a panel writing to w, redrawing in place when tty is set and
// otherwise printing a line every interval, the line line returns.
func New(w io.Writer, tty bool, interval time.Duration, line func() string) *Panel {
	if tty {
		interval = ttyEvery
	}
	return &Panel{w: w, tty: tty, every: interval, line: line}
}

// Loop draws the line every interval until stop closes.
func (p *Panel) Loop(stop <-chan struct{}) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.Draw()
		}
	}
}

// Draw draws the line unless it is the one drawn last.
func (p *Panel) Draw() {
	line := p.line()
	if line == p.last {
		return
	}
	p.last = line
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// Final draws the line once more, changed or not, and ends it on a
// terminal: the last counts stay on screen above what follows.
func (p *Panel) Final() {
	p.last = ""
	p.Draw()
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
