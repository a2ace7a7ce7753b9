package panel

import (
	"bytes"
	"testing"
	"time"
)

// In a CI log the line is printed as a plain line, and only when it
// changed; the last one is printed again at the end.
func TestPlainLines(t *testing.T) {
	var out bytes.Buffer
	line := "a"
	p := New(&out, false, time.Hour, func() string { return line })
	p.Draw()
	p.Draw()
	line = "b"
	p.Draw()
	p.Final()
	if got, want := out.String(), "a\nb\nb\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// On a terminal the line is redrawn in place, and ended at the end.
func TestTerminalRedraw(t *testing.T) {
	var out bytes.Buffer
	line := "a"
	p := New(&out, true, time.Hour, func() string { return line })
	if p.every != ttyEvery {
		t.Errorf("a terminal's line is redrawn every %s, want %s", p.every, ttyEvery)
	}
	p.Draw()
	p.Draw()
	line = "b"
	p.Draw()
	p.Final()
	if got, want := out.String(), "\r\033[Ka\r\033[Kb\r\033[Kb\n"; got != want {
		t.Errorf("drew %q, want %q", got, want)
	}
}

// Loop returns once stop closes, having drawn nothing more than it was
// asked to (an hour's interval never ticks here).
func TestLoopStops(t *testing.T) {
	var out bytes.Buffer
	p := New(&out, false, time.Hour, func() string { return "a" })
	stop := make(chan struct{})
	close(stop)
	p.Loop(stop)
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
}
