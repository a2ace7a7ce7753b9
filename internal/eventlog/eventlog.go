// Package eventlog writes a launch's events as JSON Lines (`steward
// launch --events FILE`), from what the launch tells run.Options.Observe.
package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/tend"
)

// Log writes a launch's events as JSON Lines (`steward launch --events
// FILE`), one object per line, the "event" field naming its kind:
//
//	attempt  an attempt's row, as it is published to the record
//	tend     one task's ramp decision at a tend (a line per task)
//	live     the live state `steward tend` shows (at the start, after each tend, and
//	         between tends when its counts change, at most once a second)
//	dropped  how many lines a stalled reader made the log drop
//	end      the launch is over: its counts, whether it was cancelled, its error
//
// It never blocks the launch: lines queue in memory (at most MaxQueued
// bytes; past that they are dropped and counted) and one goroutine writes
// them, so a slow reader (a FIFO, a pipe) holds back only the log. It
// writes what the record holds of each attempt but not its answer,
// explanation, log or transcript.
type Log struct {
	// MaxQueued bounds the bytes waiting for the reader (default 8 MiB;
	// the batch being written is held besides).
	MaxQueued int

	mu      sync.Mutex
	wake    *sync.Cond
	queue   [][]byte
	queued  int // bytes in queue
	dropped int // lines dropped since the last "dropped" line
	closing bool
	err     error
	done    chan struct{}
}

// New starts writing to w.
func New(w io.Writer) *Log {
	e := &Log{MaxQueued: 8 << 20, done: make(chan struct{})}
	e.wake = sync.NewCond(&e.mu)
	go e.write(w)
	return e
}

// AttemptEvent is an "attempt" line.
type AttemptEvent struct {
	Event        string         `json:"event"`
	RunID        string         `json:"run_id"`
	Seq          int            `json:"seq"`
	Task         string         `json:"task"`
	Sample       string         `json:"sample"`
	Attempt      int            `json:"attempt"`
	Status       status.Attempt `json:"status"`
	Score        *float64       `json:"score,omitempty"`
	Reason       string         `json:"reason,omitempty"`
	CarriedFrom  string         `json:"carried_from,omitempty"`
	Source       string         `json:"source,omitempty"`
	Finished     time.Time      `json:"finished"`
	Seconds      float64        `json:"seconds"`
	InputTokens  int64          `json:"input_tokens"`
	OutputTokens int64          `json:"output_tokens"`
	CostUSD      float64        `json:"cost_usd"`
	Requests     int64          `json:"requests"`
}

// TendEvent is a "tend" line: the fields of the ramp history's row.
type TendEvent struct {
	Event     string    `json:"event"`
	RunID     string    `json:"run_id"`
	At        time.Time `json:"at"`
	Task      string    `json:"task"`
	Setpoint  int       `json:"setpoint"`
	Ceiling   int       `json:"ceiling"`
	ConnLimit int       `json:"conn_limit"`
	Decision  string    `json:"decision"`
	Reason    string    `json:"reason"`
	Pushback  bool      `json:"pushback"`
	Retries   int       `json:"retries"`
	Errored   int       `json:"errored"`
	Saturated bool      `json:"saturated"`
}

// Point is the ramp history's row this line says.
func (t TendEvent) Point() record.RampPoint {
	return record.RampPoint{At: t.At, Task: t.Task, Setpoint: t.Setpoint, Ceiling: t.Ceiling, ConnLimit: t.ConnLimit,
		Decision: t.Decision, Reason: t.Reason, Pushback: t.Pushback, Retries: t.Retries, Errored: t.Errored, Saturated: t.Saturated}
}

// LiveEvent is a "live" line.
type LiveEvent struct {
	Event string         `json:"event"`
	RunID string         `json:"run_id"`
	Live  tend.LiveState `json:"live"`
}

// EndEvent is the "end" line, the last.
type EndEvent struct {
	Event     string        `json:"event"`
	RunIDs    []string      `json:"run_ids"`
	Counts    report.Counts `json:"counts"`
	Cancelled bool          `json:"cancelled"`
	// Error is why the launch failed ("" when it ran to its end).
	Error string `json:"error,omitempty"`
}

// DroppedEvent is a "dropped" line: Lines were not written because the
// reader fell behind by more than MaxQueued bytes.
type DroppedEvent struct {
	Event string `json:"event"`
	Lines int    `json:"lines"`
}

// Observe queues ev's lines (run.Options.Observe).
func (e *Log) Observe(ev run.Event) {
	switch {
	case ev.Attempt != nil:
		a := ev.Attempt
		e.add(AttemptEvent{Event: "attempt", RunID: a.RunID, Seq: a.Seq, Task: a.Task, Sample: a.Sample, Attempt: a.Attempt,
			Status: a.Status, Score: a.Score, Reason: a.Reason, CarriedFrom: a.CarriedFrom, Source: a.Source,
			Finished: a.Finished, Seconds: a.Duration.Seconds(), InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
			CostUSD: a.CostUSD, Requests: a.Requests})
	case ev.Tend != nil:
		for _, p := range ev.Tend.Points {
			e.add(TendEvent{Event: "tend", RunID: ev.Tend.RunID, At: p.At, Task: p.Task, Setpoint: p.Setpoint, Ceiling: p.Ceiling,
				ConnLimit: p.ConnLimit, Decision: p.Decision, Reason: p.Reason, Pushback: p.Pushback, Retries: p.Retries,
				Errored: p.Errored, Saturated: p.Saturated})
		}
	case ev.Live != nil:
		e.add(LiveEvent{Event: "live", RunID: ev.Live.RunID, Live: *ev.Live})
	}
}

// End queues the "end" line: the launch's report (nil when it failed
// before it had one), whether it was cancelled and its error.
func (e *Log) End(rep *report.Report, cancelled bool, err error) {
	end := EndEvent{Event: "end", Cancelled: cancelled}
	if rep != nil {
		end.RunIDs, end.Counts = rep.RunIDs, rep.Counts
	}
	if err != nil {
		end.Error = err.Error()
	}
	e.add(end)
}

func (e *Log) add(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // every field above marshals
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return
	}
	if e.queued+len(b)+1 > e.MaxQueued {
		e.dropped++
		return
	}
	e.queue = append(e.queue, append(b, '\n'))
	e.queued += len(b) + 1
	e.wake.Signal()
}

func (e *Log) write(w io.Writer) {
	defer close(e.done)
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		for len(e.queue) == 0 && e.dropped == 0 && !e.closing {
			e.wake.Wait()
		}
		if len(e.queue) == 0 && e.dropped == 0 {
			return
		}
		batch := e.queue
		if e.dropped > 0 {
			// Said where the gap is: before the lines that queued after it.
			b, _ := json.Marshal(DroppedEvent{Event: "dropped", Lines: e.dropped})
			batch = append([][]byte{append(b, '\n')}, batch...)
			e.dropped = 0
		}
		e.queue, e.queued = nil, 0
		e.mu.Unlock()
		var err error
		for _, line := range batch {
			if _, err = w.Write(line); err != nil {
				break
			}
		}
		e.mu.Lock()
		if err != nil {
			e.err, e.closing, e.queue, e.queued, e.dropped = err, true, nil, 0, 0
			return
		}
	}
}

// ErrBehind says Close gave up on a reader that took no more lines.
var ErrBehind = errors.New("the events reader fell behind; the last lines were not written")

// Close takes no more lines and writes what is queued, until ctx ends (the
// caller's bound on a stalled reader), and reports the first write error.
func (e *Log) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closing = true
	e.wake.Signal()
	e.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return ErrBehind
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
