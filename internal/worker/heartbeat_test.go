package worker

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// The heartbeat, driven by a fake clock: a worker that answers stays;
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
	w := &proc{cfg: &Config{Stderr: &log}, name: "victim", cmd: cmd, in: in, out: &msgWriter{w: io.Discard}, pings: make(chan struct{}, 1), done: make(chan struct{})}
	clk := clock.NewFake(time.Unix(1000, 0))
	w.lastSeen.Store(clk.Now().UnixNano())
	ended := make(chan struct{})
	go func() { w.heartbeat(clk, time.Second, 5*time.Second); close(ended) }()

	for i := 0; i < 10; i++ { // answers every second: never killed
		clk.BlockUntil(1) // the heartbeat waits for its next beat
		w.lastSeen.Store(clk.Now().Add(time.Second).UnixNano())
		clk.Advance(time.Second)
	}
	clk.BlockUntil(1) // the tenth beat was judged and the next one set
	if w.killed.Load() != nil {
		t.Fatal("a worker that answers was killed")
	}
	for i := 0; i < 5; i++ { // silent for 5 s: not yet past the timeout
		clk.Advance(time.Second)
		clk.BlockUntil(1)
	}
	if w.killed.Load() != nil {
		t.Fatal("killed after 5 s of silence; the timeout is 5 s")
	}
	clk.Advance(time.Second) // 6 s
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
