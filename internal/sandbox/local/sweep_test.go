package local

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestSweepStopsAndRemovesDeadRunsOnly(t *testing.T) {
	tmp := t.TempDir()
	_, deadDir, err := ForRun(tmp, "dead", "/nonexistent/dead.lock")
	if err != nil {
		t.Fatal(err)
	}
	_, liveDir, err := ForRun(tmp, "live", "/held/live.lock")
	if err != nil {
		t.Fatal(err)
	}
	// A process group the dead run left running.
	cmd := exec.Command("/bin/sh", "-c", "sleep 60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deadDir, "pgids", strconv.Itoa(cmd.Process.Pid)), nil, 0o644)
	alive := func(lock string) bool { return lock == "/held/live.lock" }
	if n := Sweep(tmp, alive, io.Discard); n != 1 {
		t.Fatalf("swept %d run dirs, want 1", n)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the dead run's process group still runs")
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Fatal("the dead run's directory is still there")
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Fatal("the live run's directory was removed")
	}
}
