package sandbox

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The providers that exec through a shell wrapper (docker, kubernetes)
// collect output and end commands the same way; this is that one way.

// PIDMarker prefixes the line on which a provider's exec wrapper reports
// its pid on stderr, before anything of the command's.
const PIDMarker = "\x00steward-pid:"

// Capped keeps the first max bytes written to it and drops the rest,
// noting that it did. Writes never fail. It is safe for concurrent use.
type Capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

// NewCapped returns a Capped that keeps max bytes.
func NewCapped(max int) *Capped { return &Capped{max: max} }

func (c *Capped) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room >= len(b) {
		c.buf.Write(b)
		return len(b), nil
	}
	if room > 0 {
		c.buf.Write(b[:room])
	}
	c.truncated = true
	return len(b), nil
}

// Bytes is a copy of what was kept.
func (c *Capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

func (c *Capped) String() string { return string(c.Bytes()) }

// Truncated says whether anything was dropped.
func (c *Capped) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}

// Held is how many bytes are kept.
func (c *Capped) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len()
}

// PIDSniffer is a command's stderr: it takes the wrapper's pid line off
// the head, reports the pid on PID (closed without one when the head is
// not the wrapper's line), and keeps the rest capped.
type PIDSniffer struct {
	*Capped
	head    []byte
	done    bool
	pid     chan int
	wrote   atomic.Bool // any byte came
	started atomic.Bool // the wrapper's pid line came
}

// Wrote says whether any byte of the stream came. The wrapper writes its
// pid line first thing, so a command whose stream brought nothing by its
// deadline was never heard from: the daemon's stream stalled.
func (p *PIDSniffer) Wrote() bool { return p.wrote.Load() }

// Started says whether the wrapper's pid line came: the command's process
// ran. An exec that failed without it may never have started (runc's init
// refused a thread at the sandbox's PID limit, crashing with its own
// dump on the exec's stderr).
func (p *PIDSniffer) Started() bool { return p.started.Load() }

// NewPIDSniffer returns a PIDSniffer that keeps max bytes.
func NewPIDSniffer(max int) *PIDSniffer {
	return &PIDSniffer{Capped: NewCapped(max), pid: make(chan int, 1)}
}

// PID receives the wrapper's pid once, or is closed when none comes.
func (p *PIDSniffer) PID() <-chan int { return p.pid }

// Pending is how many bytes of a possible pid line are held back.
func (p *PIDSniffer) Pending() int { return len(p.head) }

func (p *PIDSniffer) Write(b []byte) (int, error) {
	n := len(b)
	if n > 0 {
		p.wrote.Store(true)
	}
	if p.done {
		_, _ = p.Capped.Write(b)
		return n, nil
	}
	p.head = append(p.head, b...)
	if !bytes.HasPrefix(p.head, []byte(PIDMarker)) && !bytes.HasPrefix([]byte(PIDMarker), p.head) {
		p.pass(p.head)
		return n, nil
	}
	i := bytes.IndexByte(p.head, '\n')
	if i < 0 {
		// The wrapper's line is short; a longer one is not the wrapper's
		// (a replaced /bin/sh): it is output, and no pid comes.
		if len(p.head) > len(PIDMarker)+20 {
			p.pass(p.head)
		}
		return n, nil
	}
	if pid, err := strconv.Atoi(string(p.head[len(PIDMarker):i])); err == nil {
		p.started.Store(true)
		p.pid <- pid
	}
	p.pass(p.head[i+1:])
	return n, nil
}

// pass ends the sniffing: rest is output.
func (p *PIDSniffer) pass(rest []byte) {
	p.done = true
	close(p.pid)
	p.head = nil
	_, _ = p.Capped.Write(rest)
}

// ExecOutput is an exec's stdout and stderr, each capped at max bytes
// (max <= 0: 1 MiB), stderr without the wrapper's pid line.
type ExecOutput struct {
	Stdout *Capped
	Stderr *PIDSniffer
}

// NewExecOutput returns empty output capped at max bytes a stream.
func NewExecOutput(max int) ExecOutput {
	if max <= 0 {
		max = 1 << 20
	}
	return ExecOutput{Stdout: NewCapped(max), Stderr: NewPIDSniffer(max)}
}

// Fill sets res's output from o.
func (o ExecOutput) Fill(res *ExecResult) {
	res.Stdout, res.Stderr = o.Stdout.Bytes(), o.Stderr.Bytes()
	res.Truncated = o.Stdout.Truncated() || o.Stderr.Truncated()
}

// WaitExec waits for an exec to end: done receives once the command's
// output has all been read, and ended says whether what it received means
// the command ended by itself (not a broken stream).
//
// When the timeout (0: none) passes or ctx ends first, a command that had
// ended already (noticed late: this process was stopped or starved) still
// counts as finished. Otherwise kill is given the pid the wrapper reported
// on pid (0 when none came within 2 s), and WaitExec waits up to 5 s for
// the output to end.
//
// It returns done's value when finished; timedOut says the timeout ended
// it (else, unfinished, ctx did).
func WaitExec[T any](ctx context.Context, timeout time.Duration, done <-chan T, ended func(T) bool, pid <-chan int, kill func(pid int)) (v T, finished, timedOut bool) {
	return WaitExecGrace(ctx, timeout, 0, done, ended, pid, nil, kill)
}

// WaitExecGrace is WaitExec with a grace period: when the timeout passes
// (not ctx) and grace and term are set, term is given the pid first and the
// command has grace to end by itself (finished and timedOut both true)
// before kill.
func WaitExecGrace[T any](ctx context.Context, timeout, grace time.Duration, done <-chan T, ended func(T) bool, pid <-chan int, term, kill func(pid int)) (v T, finished, timedOut bool) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	got := false
	select {
	case v = <-done:
		if ended(v) || ctx.Err() == nil {
			return v, true, false
		}
		got = true // the stream broke because ctx ended: interrupted
	case <-expired:
		timedOut = true
	case <-ctx.Done():
	}
	if !got {
		select {
		case v = <-done:
			if ended(v) {
				return v, true, false
			}
			got = true
		default:
		}
	}
	p := 0
	select {
	case p = <-pid:
	case <-time.After(2 * time.Second):
	}
	if timedOut && !got && grace > 0 && term != nil && p > 0 {
		term(p)
		t := time.NewTimer(grace)
		select {
		case v = <-done:
			t.Stop()
			if ended(v) {
				return v, true, true
			}
			got = true
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	kill(p)
	if !got {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
	var zero T
	return zero, false, timedOut
}
