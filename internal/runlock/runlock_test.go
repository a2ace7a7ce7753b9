package runlock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAcquireAliveRelease(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "run.lock")
	if Alive(p) {
		t.Fatal("missing lock file reported alive")
	}
	l, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(p) {
		t.Fatal("held lock not alive")
	}
	if _, err := Acquire(p); !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: got %v, want ErrHeld", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if Alive(p) {
		t.Fatal("released lock alive")
	}
	// An unlocked leftover file is dead too.
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if Alive(p) {
		t.Fatal("unlocked file reported alive")
	}
}

// TestHelperHold is run as a subprocess: it holds the lock until killed.
func TestHelperHold(t *testing.T) {
	p := os.Getenv("RUNLOCK_HELPER_PATH")
	if p == "" {
		t.Skip("helper process only")
	}
	if _, err := Acquire(p); err != nil {
		os.Stdout.WriteString("ERR " + err.Error() + "\n")
		os.Exit(3)
	}
	os.Stdout.WriteString("HELD\n")
	time.Sleep(time.Minute) // the behaviour under test: a holder that the test kills
	os.Exit(0)
}

func TestLockDiesWithProcess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), "RUNLOCK_HELPER_PATH="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "HELD") {
		t.Fatalf("helper said %q", buf[:n])
	}
	if !Alive(p) {
		t.Fatal("lock held by another process not alive")
	}
	if _, err := Acquire(p); !errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire while held elsewhere: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if Alive(p) {
		t.Fatal("lock of a killed process still alive")
	}
	l, err := Acquire(p)
	if err != nil {
		t.Fatalf("Acquire after holder died: %v", err)
	}
	l.Release()
}
