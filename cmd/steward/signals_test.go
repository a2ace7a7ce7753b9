package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// agentSignals is a FIFO that agents (or hooks) write a line to when they
// reach the point a test waits for: the test reads the lines as they come
// instead of sleeping or polling. The test holds the FIFO open for reading
// and writing, so a writer never blocks, whether or not the test still reads.
type agentSignals struct {
	path  string
	lines chan string
}

func newAgentSignals(t testing.TB, dir string) *agentSignals {
	t.Helper()
	p, f := openFIFO(t, dir, "signals.fifo")
	s := &agentSignals{path: p, lines: make(chan string, 4096)}
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default: // nobody reads that many: drop, never block the writers
			}
		}
	}()
	return s
}

// openFIFO makes a FIFO in dir and opens it for reading and writing until
// the test ends: a writer never blocks on open, and whoever the test
// hands it to finds its reader there.
func openFIFO(t testing.TB, dir, name string) (string, *os.File) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return p, f
}

// shell is the command an agent runs to send line.
func (s *agentSignals) shell(line string) string {
	return "echo " + line + " >" + s.path
}

// next returns the next line sent; bound only makes a broken run fail
// instead of hanging.
func (s *agentSignals) next(t testing.TB, bound time.Duration) string {
	t.Helper()
	select {
	case l := <-s.lines:
		return l
	case <-time.After(bound):
		t.Fatalf("no signal from an agent within %s", bound)
		return ""
	}
}

// outputWatch collects a child process's output and wakes a test waiting
// for a substring on each write: the child's own words are the event.
type outputWatch struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newOutputWatch() *outputWatch { return &outputWatch{changed: make(chan struct{})} }

func (w *outputWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *outputWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitContains returns once the output contains sub. It fails the test if
// exited closes first (the child ended without saying it) or after bound.
func (w *outputWatch) waitContains(t testing.TB, sub string, exited <-chan struct{}, bound time.Duration) {
	t.Helper()
	deadline := time.After(bound)
	for {
		w.mu.Lock()
		ok, ch := strings.Contains(w.b.String(), sub), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-exited:
			if !strings.Contains(w.String(), sub) {
				t.Fatalf("the process ended without %q:\n%s", sub, w.String())
			}
			return
		case <-deadline:
			t.Fatalf("no %q within %s:\n%s", sub, bound, w.String())
		}
	}
}

// waitGone waits until every process in pids has exited or deadline has
// passed: a pidfd becomes readable when its process exits, so this waits on
// the kernel's word, not on a poll of the process table.
func waitGone(pids []int, deadline time.Time) {
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		for {
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				break
			}
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
			if err == unix.EINTR {
				continue
			}
			if n != 0 || err != nil {
				break
			}
		}
		unix.Close(fd)
	}
}
