package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/eventlog"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/tend"
)

// launchEvents reads a launch's `--events` through a FIFO: a test waits on
// what the launch says as it happens (an attempt published, a tend
// decision) instead of re-reading its record on a timer. The test holds the
// FIFO open for reading and writing, so the launch finds its reader at once.
type launchEvents struct {
	path    string
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each line
	// What the launch said so far, in its order.
	attempts []eventlog.AttemptEvent
	tends    []record.RampPoint
	lives    []tend.LiveState
	end      *eventlog.EndEvent
	bad      error // a line that is not one of the four kinds
}

func newLaunchEvents(t testing.TB, dir string) *launchEvents {
	t.Helper()
	p, f := openFIFO(t, dir, "events.fifo")
	e := &launchEvents{path: p, changed: make(chan struct{})}
	go e.read(f)
	return e
}

func (e *launchEvents) read(f *os.File) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var kind struct{ Event string }
		err := json.Unmarshal(line, &kind)
		e.mu.Lock()
		switch {
		case err != nil:
		case kind.Event == "attempt":
			var a eventlog.AttemptEvent
			if err = json.Unmarshal(line, &a); err == nil {
				e.attempts = append(e.attempts, a)
			}
		case kind.Event == "tend":
			var p eventlog.TendEvent
			if err = json.Unmarshal(line, &p); err == nil {
				e.tends = append(e.tends, p.Point())
			}
		case kind.Event == "live":
			var l eventlog.LiveEvent
			if err = json.Unmarshal(line, &l); err == nil {
				e.lives = append(e.lives, l.Live)
			}
		case kind.Event == "end":
			var end eventlog.EndEvent
			if err = json.Unmarshal(line, &end); err == nil {
				e.end = &end
			}
		default:
			err = fmt.Errorf("unknown event %q", kind.Event)
		}
		if err != nil && e.bad == nil {
			e.bad = fmt.Errorf("events line %q: %v", line, err)
		}
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
	}
}

// wait returns once cond holds of what the launch has said (cond runs with
// the events locked). It fails the test if the launch ends first, if a line
// is not an event, or after bound (a broken run fails instead of hanging).
func (e *launchEvents) wait(t testing.TB, what string, bound time.Duration, cond func(*launchEvents) bool) {
	t.Helper()
	if err := e.until(bound, cond); err != nil {
		t.Fatalf("never saw %s: %v; tends:\n%s", what, err, fmtHistory(e.tendsNow()))
	}
}

// until is wait without a test to fail (for a goroutine): nil once cond
// holds, else why it never will.
func (e *launchEvents) until(bound time.Duration, cond func(*launchEvents) bool) error {
	deadline := time.After(bound)
	for {
		e.mu.Lock()
		ok, ch, end, bad := cond(e), e.changed, e.end, e.bad
		e.mu.Unlock()
		switch {
		case bad != nil:
			return bad
		case ok:
			return nil
		case end != nil:
			return fmt.Errorf("the launch ended first (%+v)", *end)
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("not within %s", bound)
		}
	}
}

// waitTends waits until cond holds of the tend decisions so far and returns them.
func (e *launchEvents) waitTends(t testing.TB, what string, cond func([]record.RampPoint) bool) []record.RampPoint {
	t.Helper()
	e.wait(t, what, 3*time.Minute, func(e *launchEvents) bool { return cond(e.tends) })
	return e.tendsNow()
}

func (e *launchEvents) tendsNow() []record.RampPoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]record.RampPoint(nil), e.tends...)
}

// runID is the run the first attempt published belongs to.
func (e *launchEvents) runID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.attempts) == 0 {
		return ""
	}
	return e.attempts[0].RunID
}
