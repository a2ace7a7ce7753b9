package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/tend"
)

// gatedWriter blocks every Write until open is closed, as a FIFO whose
// reader has stopped reading does.
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	b    bytes.Buffer
	err  error
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return 0, g.err
	}
	return g.b.Write(p)
}

// Each kind is one JSON line with its "event" name, in the order observed,
// "end" last; what the record keeps of an agent's words (answer,
// explanation, log) is not written.
func TestEventLogLines(t *testing.T) {
	g := &gatedWriter{open: make(chan struct{})}
	close(g.open)
	e := New(g)
	score := 1.0
	e.Observe(run.Event{Attempt: &record.Attempt{RunID: "r1", Seq: 3, Task: "t", Sample: "s", Attempt: 1, Status: status.Passed, Score: &score,
		Answer: "ANSWER-TEXT", Explanation: "EXPLANATION-TEXT", Log: "AGENT-LOG", Duration: 1500 * time.Millisecond, Requests: 2}})
	e.Observe(run.Event{Tend: &run.Tended{RunID: "r1", Points: []record.RampPoint{{Task: "t", Setpoint: 24, Decision: "up", Reason: "gates passed"}, {Task: "u", Setpoint: 4, Decision: "hold"}}}})
	e.Observe(run.Event{Live: &tend.LiveState{RunID: "r1", Tended: true}})
	e.End(&report.Report{RunIDs: []string{"r1"}, Counts: report.Counts{Total: 1, Passed: 1}}, true, nil)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := g.b.String()
	for _, secret := range []string{"ANSWER-TEXT", "EXPLANATION-TEXT", "AGENT-LOG"} {
		if strings.Contains(out, secret) {
			t.Errorf("the events carry %s:\n%s", secret, out)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var kinds []string
	for _, l := range lines {
		var k struct{ Event string }
		if err := json.Unmarshal([]byte(l), &k); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		kinds = append(kinds, k.Event)
	}
	if got := strings.Join(kinds, ","); got != "attempt,tend,tend,live,end" {
		t.Fatalf("kinds %s:\n%s", got, out)
	}
	var a AttemptEvent
	var p TendEvent
	var end EndEvent
	if json.Unmarshal([]byte(lines[0]), &a) != nil || a.Seq != 3 || a.Status != status.Passed || a.Seconds != 1.5 || a.Score == nil || *a.Score != 1 {
		t.Errorf("attempt line %s", lines[0])
	}
	if json.Unmarshal([]byte(lines[1]), &p) != nil || p.Point().Setpoint != 24 || p.RunID != "r1" || p.Reason != "gates passed" {
		t.Errorf("tend line %s", lines[1])
	}
	if json.Unmarshal([]byte(lines[4]), &end) != nil || !end.Cancelled || end.Counts.Passed != 1 {
		t.Errorf("end line %s", lines[4])
	}
}

// A reader that stops reading never holds the launch up: Observe returns at
// once while the writer is blocked, past MaxQueued bytes lines are dropped
// and counted (a "dropped" line says where, once the reader reads again),
// and Close gives up when its context ends. Nothing is taken after Close.
func TestEventLogNeverBlocksTheLaunch(t *testing.T) {
	g := &gatedWriter{open: make(chan struct{})}
	e := New(g)
	e.MaxQueued = 64 << 10
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for i := 0; i < 10000; i++ { // ~50 bytes a line: far past MaxQueued
			e.Observe(run.Event{Live: &tend.LiveState{RunID: "r"}})
		}
	}()
	select {
	case <-observed:
	case <-time.After(time.Minute): // a guard: Observe that blocked would never return
		t.Fatal("Observe blocked on a stalled reader")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Close(ctx); !errors.Is(err, ErrBehind) {
		t.Fatalf("Close with a stalled reader: %v, want ErrBehind", err)
	}
	e.Observe(run.Event{Live: &tend.LiveState{RunID: "late"}})
	close(g.open)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := g.b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var written, dropped int
	for i, l := range lines {
		var d DroppedEvent
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		switch d.Event {
		case "live":
			written++
		case "dropped": // one per gap: the writer may have met more than one
			dropped += d.Lines
		default:
			t.Fatalf("line %d: %q", i, l)
		}
	}
	// At most MaxQueued waits, plus the batch the writer holds.
	if len(out) > 2*(64<<10)+100 || dropped == 0 || written+dropped != 10000 || strings.Contains(out, "late") {
		t.Fatalf("%d bytes, %d lines written and %d said dropped, want the 10000 observed before Close within the bound", len(out), written, dropped)
	}
}

// countingWriter fails its first write and counts every call.
type countingWriter struct{ calls int }

func (c *countingWriter) Write([]byte) (int, error) {
	c.calls++
	return 0, errors.New("broken pipe")
}

// A write error ends the log: nothing more is written, and Close reports it.
func TestEventLogWriteError(t *testing.T) {
	c := &countingWriter{}
	e := New(c)
	e.Observe(run.Event{Tend: &run.Tended{RunID: "r", Points: []record.RampPoint{{Task: "a"}, {Task: "b"}, {Task: "c"}}}})
	e.Observe(run.Event{Live: &tend.LiveState{RunID: "r"}})
	if err := e.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("Close: %v, want the write error", err)
	}
	if c.calls != 1 {
		t.Fatalf("%d writes, want none after the first failed", c.calls)
	}
}

// A launch that failed still ends its log: "end" with the error and no report.
func TestEventLogEndsAFailedLaunch(t *testing.T) {
	g := &gatedWriter{open: make(chan struct{})}
	close(g.open)
	e := New(g)
	e.End(nil, false, errors.New("plan: no task matches"))
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var end EndEvent
	if err := json.Unmarshal(g.b.Bytes(), &end); err != nil || end.Event != "end" || end.Error != "plan: no task matches" {
		t.Fatalf("end line %q (%v)", g.b.String(), err)
	}
}
