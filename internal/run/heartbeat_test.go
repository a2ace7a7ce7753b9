package run

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The heartbeat, driven by an injected clock: a worker that answers stays;
// one silent for longer than the timeout is killed, with the reason kept
// for its attempts.
func TestHeartbeatKillsSilentWorker(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var log bytes.Buffer
	w := &workerProc{l: &launcher{opts: Options{Stderr: &log}}, name: "victim", cmd: cmd, in: in, out: &msgWriter{w: io.Discard}, pings: make(chan struct{}, 1), done: make(chan struct{})}
	// The fake clock is read by the heartbeat's goroutine while the test
	// moves it: atomic.
	var clock atomic.Int64
	clock.Store(time.Unix(1000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func() time.Time { return time.Unix(0, clock.Add(int64(time.Second))) }
	w.lastSeen.Store(clock.Load())
	tick := make(chan time.Time)
	ended := make(chan struct{})
	go func() { w.heartbeat(tick, now, 5*time.Second); close(ended) }()

	for i := 0; i < 10; i++ { // answers every second: never killed
		c := advance()
		w.lastSeen.Store(c.UnixNano())
		tick <- c
	}
	if w.killed.Load() != nil {
		t.Fatal("a worker that answers was killed")
	}
	for i := 0; i < 6; i++ { // silent for 6 s
		c := advance()
		select {
		case tick <- c:
		case <-ended:
		}
	}
	<-ended
	k := w.killed.Load()
	if k == nil || !strings.Contains(*k, "worker process for victim unresponsive") || !strings.Contains(*k, "timeout 5s") {
		t.Fatalf("kill reason %v", k)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the silent worker was not killed: %v", err)
	}
	if w.deadStatus() != "infra" || !strings.Contains(log.String(), "unresponsive") {
		t.Fatalf("status %s, log %q", w.deadStatus(), log.String())
	}
}
