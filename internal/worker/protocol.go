package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
)

// The supervisor ⇄ worker protocol (W1): JSON lines on the worker's stdin
// and stdout, one message type per operation. A line is {"op": …, "msg":
// {…}}; a line that is not JSON, names an unknown op or carries fields its
// op (or a definition it carries) does not have is an error, never skipped.
//
// A worker is handed its slice of the plan: init (the run), then a task
// message for each of its tasks and a sample message for each of its
// samples with attempts to run (handover.go); it reads no eval set.

// Lines are bounded: a worker's (what the supervisor reads) at 64 MiB; the
// supervisor's at 1 GiB, since a sample's handover carries the content of
// its files (each file once per worker).
const (
	maxWorkerLine     = 64 << 20
	maxSupervisorLine = 1 << 30
)

// wireMsg is one message; op names it on the wire.
type wireMsg interface{ op() string }

// Supervisor → worker.
type (
	msgInit struct {
		Init *Init `json:"init"`
	}
	// msgTask hands over one of the worker's tasks: its definition, its
	// sandbox spec as the supervisor prepared it, and the content of its
	// files: sources (the task's and its scorer's) as the eval set's load
	// read them.
	msgTask struct {
		Index int             `json:"index"`
		Def   json.RawMessage `json:"def"`
		Spec  *sandbox.Spec   `json:"spec"`
		Files fileMap         `json:"files,omitempty"`
	}
	// msgSample hands over one sample and its attempts to run, with their
	// fingerprints; Spec and EnvErr are its own environment's (prepared, or
	// why not), Files the content of its sources not handed over before.
	msgSample struct {
		Task     int                     `json:"task"`
		Def      json.RawMessage         `json:"def"`
		Spec     *sandbox.Spec           `json:"spec,omitempty"`
		EnvErr   *attempt.SampleEnvError `json:"env_err,omitempty"`
		Files    fileMap                 `json:"files,omitempty"`
		Attempts []handedAttempt         `json:"attempts"`
	}
	msgAttempt struct {
		Seq   int    `json:"seq"`
		Token string `json:"token"`
		// Grading is the model judge's token ("" unless scorer.model_graded).
		Grading string `json:"grading,omitempty"`
	}
	msgCloseTask struct {
		Task int `json:"task"`
	}
	msgGatewayURL struct {
		Provider string   `json:"provider"`
		URL      string   `json:"url,omitempty"`
		Err      *wireErr `json:"err,omitempty"`
	}
	msgBound struct {
		ID  int      `json:"id"`
		Err *wireErr `json:"err,omitempty"`
	}
	msgPing     struct{}
	msgAbort    struct{}
	msgShutdown struct{}
)

// Worker → supervisor.
type (
	msgReady struct {
		Err *wireErr `json:"err,omitempty"`
	}
	msgStarted struct {
		Seq int `json:"seq"`
	}
	msgResult struct {
		Seq       int               `json:"seq"`
		Row       *record.Attempt   `json:"row"`
		Artifacts []record.Artifact `json:"artifacts,omitempty"`
	}
	msgClosed struct {
		Task int  `json:"task"`
		OK   bool `json:"ok"`
	}
	msgGateway struct {
		Provider string `json:"provider"`
		Listen   string `json:"listen"`
		Host     string `json:"host"`
		Proxied  bool   `json:"proxied,omitempty"`
	}
	msgBind struct {
		ID    int    `json:"id"`
		Token string `json:"token"`
		Host  string `json:"host"`
	}
	// msgDeadline gives the gateway an attempt's agent deadline (zero:
	// none); answered by bound with the same id (limits.go).
	msgDeadline struct {
		ID       int       `json:"id"`
		Seq      int       `json:"seq"`
		Deadline time.Time `json:"deadline"`
	}
	msgPong struct{}
)

func (msgInit) op() string       { return "init" }
func (msgTask) op() string       { return "task" }
func (msgSample) op() string     { return "sample" }
func (msgAttempt) op() string    { return "attempt" }
func (msgCloseTask) op() string  { return "close_task" }
func (msgGatewayURL) op() string { return "gateway_url" }
func (msgBound) op() string      { return "bound" }
func (msgPing) op() string       { return "ping" }
func (msgAbort) op() string      { return "abort" }
func (msgShutdown) op() string   { return "shutdown" }
func (msgReady) op() string      { return "ready" }
func (msgStarted) op() string    { return "started" }
func (msgResult) op() string     { return "result" }
func (msgClosed) op() string     { return "closed" }
func (msgGateway) op() string    { return "gateway" }
func (msgBind) op() string       { return "bind" }
func (msgPong) op() string       { return "pong" }
func (msgDeadline) op() string   { return "deadline" }

// newMsg makes an empty message for an op, or nil when the op is unknown.
func newMsg(op string) wireMsg {
	switch op {
	case "init":
		return &msgInit{}
	case "task":
		return &msgTask{}
	case "sample":
		return &msgSample{}
	case "attempt":
		return &msgAttempt{}
	case "close_task":
		return &msgCloseTask{}
	case "gateway_url":
		return &msgGatewayURL{}
	case "bound":
		return &msgBound{}
	case "ping":
		return &msgPing{}
	case "abort":
		return &msgAbort{}
	case "shutdown":
		return &msgShutdown{}
	case "ready":
		return &msgReady{}
	case "started":
		return &msgStarted{}
	case "result":
		return &msgResult{}
	case "closed":
		return &msgClosed{}
	case "gateway":
		return &msgGateway{}
	case "bind":
		return &msgBind{}
	case "pong":
		return &msgPong{}
	case "deadline":
		return &msgDeadline{}
	}
	return nil
}

// fileMap is files: sources' content by source.
type fileMap = map[string]evalset.SnapshotFile

// wireErr is an error crossing the protocol; BadInput keeps
// sandbox.ErrBadInput (exit code 2) across the process boundary.
type wireErr struct {
	Msg      string `json:"msg"`
	BadInput bool   `json:"bad_input,omitempty"`
}

func toWireErr(err error) *wireErr {
	if err == nil {
		return nil
	}
	return &wireErr{Msg: err.Error(), BadInput: errors.Is(err, sandbox.ErrBadInput)}
}

// err is the error again; a bad-input error says "bad input" once.
func (e *wireErr) err() error {
	if e == nil {
		return nil
	}
	if e.BadInput {
		return &badInputErr{msg: e.Msg}
	}
	return errors.New(e.Msg)
}

// badInputErr is a bad-input error that came from a worker: its message
// already says "bad input: …".
type badInputErr struct{ msg string }

func (e *badInputErr) Error() string        { return e.msg }
func (e *badInputErr) Is(target error) bool { return target == sandbox.ErrBadInput }

type frame struct {
	Op  string          `json:"op"`
	Msg json.RawMessage `json:"msg,omitempty"`
}

// encodeMsg is m as one line (with its newline).
func encodeMsg(m wireMsg) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.op(), err)
	}
	line, err := json.Marshal(frame{Op: m.op(), Msg: body})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.op(), err)
	}
	return append(line, '\n'), nil
}

// decodeMsg reads one line: malformed JSON, an unknown op or a field the
// op does not have are errors.
func decodeMsg(line []byte) (wireMsg, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var f frame
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("malformed line %q: %w", clip(line), err)
	}
	if dec.More() {
		return nil, fmt.Errorf("malformed line %q: more than one value", clip(line))
	}
	m := newMsg(f.Op)
	if m == nil {
		return nil, fmt.Errorf("unknown op %q in line %q", f.Op, clip(line))
	}
	if len(f.Msg) > 0 {
		body := json.NewDecoder(bytes.NewReader(f.Msg))
		body.DisallowUnknownFields()
		if err := body.Decode(m); err != nil {
			return nil, fmt.Errorf("malformed %s message %q: %w", f.Op, clip(line), err)
		}
	}
	return m, nil
}

func clip(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// msgWriter writes whole lines, one writer at a time.
type msgWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *msgWriter) send(m wireMsg) error {
	line, err := encodeMsg(m)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(line); err != nil {
		return fmt.Errorf("send %s: %w", m.op(), err)
	}
	return nil
}
