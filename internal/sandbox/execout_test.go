package sandbox

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A command that starts its stderr like the wrapper's pid line (a replaced
// /bin/sh in a reused sandbox runs the wrapper itself) and never ends the
// line cannot make the worker hold more than its output cap.
func TestPIDSnifferBounded(t *testing.T) {
	p := NewPIDSniffer(1 << 10)
	if _, err := p.Write([]byte(PIDMarker + "12")); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("7"), 64<<10)
	for i := 0; i < 64; i++ { // 4 MiB of digits, no newline
		if _, err := p.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if held := p.Pending() + p.Held(); held > 2<<10 {
		t.Fatalf("the sniffer holds %d bytes of a line that never ends (cap 1 KiB)", held)
	}
	if !p.Truncated() {
		t.Fatal("the output was cut but not marked truncated")
	}
	select {
	case pid, ok := <-p.PID():
		if ok {
			t.Fatalf("a pid line that never ended gave pid %d", pid)
		}
	default:
		t.Fatal("the pid channel was left open: Exec would wait for it")
	}
}

func TestPIDSnifferStripsMarker(t *testing.T) {
	cases := []struct {
		name   string
		writes []string
		pid    int // 0: none
		stderr string
	}{
		{"one write", []string{PIDMarker + "42\nerr\n"}, 42, "err\n"},
		{"split line", []string{PIDMarker + "4", "2\nhello"}, 42, "hello"},
		{"no marker", []string{"plain error\n"}, 0, "plain error\n"},
		{"bad pid", []string{PIDMarker + "x\nrest"}, 0, "rest"},
		{"runc's init crashed", []string{"runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n"}, 0, "runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPIDSniffer(100)
			for _, w := range c.writes {
				p.Write([]byte(w))
			}
			if got := <-p.PID(); got != c.pid {
				t.Errorf("pid %d, want %d", got, c.pid)
			}
			if p.String() != c.stderr {
				t.Errorf("stderr %q, want %q", p.String(), c.stderr)
			}
			// A runc init that crashed before the wrapper ran writes no pid
			// line: the command never started.
			if p.Started() != (c.pid != 0) {
				t.Errorf("started %v with pid %d", p.Started(), c.pid)
			}
		})
	}
}

func TestCappedTruncates(t *testing.T) {
	c := NewCapped(4)
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	if string(c.Bytes()) != "abcd" || !c.Truncated() {
		t.Fatalf("got %q truncated=%v", c.Bytes(), c.Truncated())
	}
	o := NewExecOutput(0)
	o.Stdout.Write([]byte("out"))
	o.Stderr.Write([]byte(PIDMarker + "7\nerr"))
	var res ExecResult
	o.Fill(&res)
	if string(res.Stdout) != "out" || string(res.Stderr) != "err" || res.Truncated {
		t.Fatalf("filled %+v", res)
	}
}

// How an exec ends: by itself, by its timeout (killed, by the pid its
// wrapper gave), by ctx, or by itself though noticed only after the
// timeout.
func TestWaitExec(t *testing.T) {
	ok := func(err error) bool { return err == nil }
	cases := []struct {
		name      string
		ready     bool // done already holds nil before WaitExec
		broken    bool // done holds a broken stream
		cancelled bool
		timeout   time.Duration
		finished  bool
		timedOut  bool
		killed    int // pid given to kill, -1 not called
	}{
		{name: "ended by itself", ready: true, timeout: time.Hour, finished: true, killed: -1},
		{name: "timed out", timeout: time.Nanosecond, timedOut: true, killed: 7},
		{name: "interrupted", cancelled: true, killed: 7},
		{name: "broken stream as ctx ends is an interruption", broken: true, cancelled: true, killed: 7},
		{name: "ended, noticed after the cancellation", ready: true, cancelled: true, finished: true, killed: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancelled {
				cancel()
			}
			done := make(chan error, 1)
			if c.ready {
				done <- nil
			}
			if c.broken {
				done <- context.Canceled
			}
			pid := make(chan int, 1)
			pid <- 7
			killed := -1
			_, finished, timedOut := WaitExec(ctx, c.timeout, done, ok, pid, func(p int) {
				killed = p
				if !c.broken {
					done <- context.Canceled // the kill ends the stream
				}
			})
			if finished != c.finished || timedOut != c.timedOut || killed != c.killed {
				t.Fatalf("finished %v timedOut %v killed %d, want %v %v %d", finished, timedOut, killed, c.finished, c.timedOut, c.killed)
			}
		})
	}
}
