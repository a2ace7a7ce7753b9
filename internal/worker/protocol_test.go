package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
)

func TestProtocolRoundTrip(t *testing.T) {
	msgs := []wireMsg{
		msgInit{Init: &Init{EvalSetFile: "e.yaml", RunID: "r", Tasks: []int{0, 2}, TaskProv: []string{"local", "docker", "local"}, Samples: 3}},
		msgTask{Index: 2, Def: json.RawMessage(`{"name":"t"}`), Spec: &sandbox.Spec{Task: "t", Image: "sha256:1"}, Files: fileMap{"/e/a.txt": {Data: []byte("a"), Mode: 0o644}}},
		msgSample{Task: 2, Def: json.RawMessage(`{"id":"s"}`), EnvErr: &attempt.SampleEnvError{Msg: "no image", Infra: true},
			Attempts: []handedAttempt{{Seq: 4, Number: 1, Fingerprint: "f", Parts: map[string]string{"task": "h"}}}},
		msgAttempt{Seq: 3, Token: "stw-x"},
		msgCloseTask{Task: 1},
		msgGatewayURL{Provider: "docker", URL: "http://h:1"},
		msgGatewayURL{Provider: "docker", Err: &wireErr{Msg: "no"}},
		msgBound{ID: 2, Err: &wireErr{Msg: "bad input: x", BadInput: true}},
		msgPing{}, msgAbort{}, msgShutdown{}, msgReady{}, msgPong{},
		msgStarted{Seq: 4},
		msgResult{Seq: 4, Row: &record.Attempt{Seq: 4, Status: "passed"}},
		msgClosed{Task: 1, OK: true},
		msgGateway{Provider: "docker", Listen: "0.0.0.0:0", Host: "h", Proxied: true},
		msgBind{ID: 2, Token: "stw-x", Host: "10.0.0.2"},
	}
	for _, m := range msgs {
		line, err := encodeMsg(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeMsg(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if g := reflect.ValueOf(got).Elem().Interface(); !reflect.DeepEqual(g, m) {
			t.Errorf("%s: decoded %#v, want %#v", line, g, m)
		}
	}
}

func TestProtocolRefusesBadLines(t *testing.T) {
	cases := []struct{ line, want string }{
		{`not json`, "malformed line"},
		{`{"op":"attempt","msg":{"seq":1}} {"op":"abort"}`, "more than one value"},
		{`{"op":"frobnicate"}`, `unknown op "frobnicate"`},
		{`{"op":""}`, `unknown op ""`},
		{`{"op":"attempt","msg":{"seq":"one"}}`, "malformed attempt message"},
		{`{"op":"attempt","msg":{"seq":1,"sequence":2}}`, "malformed attempt message"},
		{`{"op":"attempt","seq":1}`, "malformed line"},
	}
	for _, c := range cases {
		if _, err := decodeMsg([]byte(c.line)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.line, err, c.want)
		}
	}
}

// A bad-input error keeps its kind (exit code 2) across the protocol, by a
// field, not by parsing its text; other errors do not become bad input.
func TestProtocolCarriesBadInput(t *testing.T) {
	for _, c := range []struct {
		err error
		bad bool
	}{
		{fmt.Errorf("%w: e.yaml:3: tasks[0].name: required", sandbox.ErrBadInput), true},
		{errors.New("bad input: looks like it but is not"), false},
	} {
		line, _ := encodeMsg(msgReady{Err: toWireErr(c.err)})
		m, err := decodeMsg(bytes.TrimSpace(line))
		if err != nil {
			t.Fatal(err)
		}
		got := m.(*msgReady).Err.err()
		if errors.Is(got, sandbox.ErrBadInput) != c.bad || got.Error() != c.err.Error() {
			t.Errorf("%q: got %q (bad input %v), want bad input %v", c.err, got, errors.Is(got, sandbox.ErrBadInput), c.bad)
		}
	}
}

// A worker that writes a line the supervisor cannot read is killed and its
// attempts end with the reason: the line is never skipped.
func TestSupervisorRefusesWorkerLines(t *testing.T) {
	for _, line := range []string{`this is not json`, `{"op":"frobnicate"}`, `{"op":"result","msg":{"seq":7,"row":{"seq":7}}}`} {
		t.Run(line, func(t *testing.T) {
			// The worker says its line, then would stay silent for long.
			cmd := exec.Command("/bin/sh", "-c", `printf '%s\n' "$LINE"; exec sleep 30`)
			cmd.Env = []string{"LINE=" + line}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var log bytes.Buffer
			w := newProc(&Config{Stderr: &log}, "liar", nil)
			w.cmd, w.out = cmd, &msgWriter{w: io.Discard}
			w.read(out) // returns once the worker is gone
			if w.dead == nil || !strings.Contains(w.dead.Error(), "worker process for liar broke the protocol") {
				t.Fatalf("dead: %v", w.dead)
			}
			if w.deadStatus() != "infra" || !strings.Contains(log.String(), "broke the protocol") {
				t.Fatalf("status %s, log %q", w.deadStatus(), log.String())
			}
			if err := <-w.ready; err == nil {
				t.Fatal("a worker that broke the protocol was ready")
			}
		})
	}
}

// The worker side refuses a line it cannot read with an error that names
// it, after answering the heartbeat that came before.
func TestWorkerRefusesSupervisorLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\"op\":\"ping\"}\nnot json\n", "malformed line"},
		{"{\"op\":\"ping\"}\n{\"op\":\"frobnicate\"}\n", `unknown op "frobnicate"`},
		{"{\"op\":\"ping\"}\n{\"op\":\"attempt\",\"msg\":{\"seq\":1}}\n", "expected an init message"},
	} {
		var out, stderr bytes.Buffer
		err := Serve(context.Background(), strings.NewReader(c.in), &out, &stderr, nil, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
		if !strings.Contains(out.String(), `"op":"pong"`) {
			t.Errorf("%q: the ping was not answered: %q", c.in, out.String())
		}
	}
}

// A question to the supervisor (a token's binding, an agent's deadline)
// ends as soon as the supervisor's stream does, whatever the caller's
// context: nobody is left to answer. Before, the agent's deadline was lifted
// under a 10 s bound only, so a worker whose supervisor died (SIGHUP, 7 of
// 60 trials of TestSupervisorGoneWorkersCleanUp) sat out those 10 s before
// it cleaned up, and with context.Background() it waited for ever.
func TestBinderEndsWhenTheSupervisorIsGone(t *testing.T) {
	box := newMailbox()
	b := &binder{wait: map[int]chan *wireErr{}, gone: box.gone}
	asked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.ask(context.Background(), func(wireMsg) { close(asked) }, func(id int) wireMsg {
			return msgDeadline{ID: id, Seq: 1}
		})
	}()
	<-asked
	box.close(nil) // the supervisor's end of stdin closed
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the supervisor is gone") {
			t.Fatalf("ask ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ask still waits for a supervisor that is gone")
	}
}
