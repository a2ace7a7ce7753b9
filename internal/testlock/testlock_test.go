package testlock

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

const lockName = "selftest"

// TestMain doubles as the helper process: STEWARD_TESTLOCK_HELPER=shared or
// exclusive takes the lock, says WAITING when it has to wait and HELD once
// it holds it, and releases it (by exiting) when its stdin closes.
func TestMain(m *testing.M) {
	if mode := os.Getenv("STEWARD_TESTLOCK_HELPER"); mode != "" {
		f, err := Acquire(lockName, mode == "exclusive", func() { fmt.Println("WAITING") })
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("HELD")
		_, _ = io.Copy(io.Discard, os.Stdin)
		f.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type holder struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

// start runs a helper process taking the lock in dir (shared or exclusive).
func start(t *testing.T, dir, mode string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "STEWARD_TESTLOCK_HELPER="+mode, "STEWARD_TESTLOCK_DIR="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{t: t, cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	t.Cleanup(func() { h.release() })
	return h
}

// next is the helper's next line (it blocks until the helper says it).
func (h *holder) next() string {
	h.t.Helper()
	if !h.lines.Scan() {
		h.t.Fatalf("helper ended without a word: %v", h.lines.Err())
	}
	return strings.TrimSpace(h.lines.Text())
}

func (h *holder) expect(want string) {
	h.t.Helper()
	if got := h.next(); got != want {
		h.t.Fatalf("helper said %q, want %q", got, want)
	}
}

// release closes the helper's stdin: it lets the lock go and exits.
func (h *holder) release() {
	if h.in != nil {
		h.in.Close()
		h.in = nil
		_ = h.cmd.Wait()
	}
}

func free(t *testing.T, exclusive bool) bool {
	t.Helper()
	ok, err := Free(lockName, exclusive)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Two processes hold the lock shared at once; meanwhile it is not free for
// an exclusive holder, and it is again once both have let it go.
func TestSharedHoldersOverlap(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEWARD_TESTLOCK_DIR", dir)
	a := start(t, dir, "shared")
	a.expect("HELD")
	b := start(t, dir, "shared")
	b.expect("HELD") // not WAITING: shared holders do not exclude each other
	if free(t, true) {
		t.Fatal("the lock is free for an exclusive holder while two hold it shared")
	}
	if !free(t, false) {
		t.Fatal("the lock is not free for another shared holder")
	}
	a.release()
	b.release()
	if !free(t, true) {
		t.Fatal("the lock is still held after both shared holders let it go")
	}
}

// An exclusive holder waits until every shared holder has let go; a shared
// holder arriving while it waits queues behind it (the turnstile), and gets
// the lock only after the exclusive holder has let it go.
func TestExclusiveWaitsAndKeepsSharedOut(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEWARD_TESTLOCK_DIR", dir)
	a := start(t, dir, "shared")
	a.expect("HELD")
	x := start(t, dir, "exclusive")
	x.expect("WAITING")
	// x holds the turnstile now: a newcomer waits although the lock itself
	// is only held shared.
	late := start(t, dir, "shared")
	late.expect("WAITING")
	a.release()
	x.expect("HELD")
	if free(t, false) {
		t.Fatal("the lock is free for a shared holder while one holds it exclusively")
	}
	x.release()
	late.expect("HELD")
	if free(t, true) {
		t.Fatal("the lock is free for an exclusive holder while one holds it shared")
	}
	late.release()
	if !free(t, true) {
		t.Fatal("the lock is still held after every holder let it go")
	}
}

// An exclusive holder keeps a shared one of another process out until it ends.
func TestExclusiveThenShared(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEWARD_TESTLOCK_DIR", dir)
	x := start(t, dir, "exclusive")
	x.expect("HELD")
	a := start(t, dir, "shared")
	a.expect("WAITING")
	x.release()
	a.expect("HELD")
}

// fakeTB records a Fatalf instead of ending the goroutine, and runs cleanups on demand.
type fakeTB struct {
	testing.TB
	name     string
	fatal    string
	cleanups []func()
}

func (f *fakeTB) Name() string                   { return f.name }
func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Logf(string, ...any)            {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeTB) Cleanup(fn func())              { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

// In one process: shared holds are counted (the lock goes with the last);
// a shared or exclusive hold inside an exclusive one is a no-op; an
// exclusive request while this process holds it shared fails at once
// instead of deadlocking.
func TestInProcess(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEWARD_TESTLOCK_DIR", dir)
	one, two := &fakeTB{name: "One"}, &fakeTB{name: "Two"}
	Shared(one, lockName)
	Shared(two, lockName)
	if free(t, true) {
		t.Fatal("not held after Shared")
	}
	x := &fakeTB{name: "T"}
	Exclusive(x, lockName)
	if !strings.Contains(x.fatal, "while this process holds it") {
		t.Fatalf("Exclusive while held shared here: %q", x.fatal)
	}
	one.end()
	if free(t, true) {
		t.Fatal("released while a second test of this process still holds it")
	}
	two.end()
	if !free(t, true) {
		t.Fatal("still held after the last test ended")
	}

	x = &fakeTB{name: "T"}
	Exclusive(x, lockName)
	if x.fatal != "" || free(t, false) {
		t.Fatalf("Exclusive: %q, free for shared %v", x.fatal, free(t, false))
	}
	inner := &fakeTB{name: "T/sub"}
	Shared(inner, lockName) // inside the exclusive test: nothing to take
	Exclusive(inner, lockName)
	if inner.fatal != "" || len(inner.cleanups) != 0 {
		t.Fatalf("Shared and Exclusive inside Exclusive: %q, %d cleanups", inner.fatal, len(inner.cleanups))
	}
	x.end()
	if !free(t, true) {
		t.Fatal("still held after the exclusive test ended")
	}
}

// Parallel tests of one process that want the lock exclusively take turns:
// the second gets it only after the first has let it go.
func TestInProcessExclusiveQueue(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEWARD_TESTLOCK_DIR", dir)
	first := &fakeTB{name: "First"}
	Exclusive(first, lockName)
	var mu sync.Mutex
	firstDone := false
	sawFirstDone := make(chan bool)
	second := &fakeTB{name: "Second"}
	go func() {
		Exclusive(second, lockName) // waits for First
		mu.Lock()
		defer mu.Unlock()
		sawFirstDone <- firstDone
	}()
	other := start(t, dir, "exclusive") // another process queues too (it holds the turnstile)
	other.expect("WAITING")
	mu.Lock()
	firstDone = true
	mu.Unlock()
	first.end()
	other.expect("HELD") // first in the turnstile, first served
	other.release()
	if !<-sawFirstDone || second.fatal != "" {
		t.Fatalf("the second test got the lock before the first let it go (fatal %q)", second.fatal)
	}
	if free(t, false) {
		t.Fatal("the second test does not hold the lock")
	}
	second.end()
	if !free(t, true) {
		t.Fatal("still held after both tests ended")
	}
}
