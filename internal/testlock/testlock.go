// Package testlock is test-only: it lets test binaries run side by side
// (`go test -p N`) while they share one Docker daemon or one kubernetes test
// cluster. Every test that uses the shared resource holds its lock shared
// (dockertest.Client and kubetest.Get take it, so a test cannot forget); the
// few tests that disturb it on purpose (filling every address pool,
// restarting the daemon, a namespace quota) hold it exclusively, so no test
// of another binary, or of another worktree on the same machine, runs while
// they do.
//
// The locks are flock(2) locks on well-known files in the temporary
// directory, so they reach across processes and die with them. A turnstile
// file in front of the lock keeps a waiting exclusive test from being
// starved by a stream of shared ones. Inside one process the shared lock is
// counted: the first test takes it, the last one releases it.
package testlock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The shared resources.
const (
	Docker = "docker" // the Docker daemon
	Kube   = "kube"   // the kubernetes test cluster (.ci/kube): kubetest.Get holds it exclusively
	// KubeUsers is held shared by every test binary that uses the cluster,
	// for as long as it runs: the cluster a test binary started is stopped by
	// the last binary using it (kubetest.Main), never under another one.
	KubeUsers = "kube-users"
)

// Dir holds the lock files: STEWARD_TESTLOCK_DIR, or the temporary directory.
func Dir() string {
	if d := os.Getenv("STEWARD_TESTLOCK_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

type state struct {
	mu     sync.Mutex
	freed  *sync.Cond // signalled when a test of this process lets an exclusive hold go
	f      *os.File   // the lock file while this process holds it
	shared int        // tests of this process holding it shared
	excl   bool       // a test of this process holds it exclusively
	holder string     // that test's name
}

var (
	statesMu sync.Mutex
	states   = map[string]*state{}
)

func stateOf(name string) *state {
	statesMu.Lock()
	defer statesMu.Unlock()
	s := states[name]
	if s == nil {
		s = &state{}
		s.freed = sync.NewCond(&s.mu)
		states[name] = s
	}
	return s
}

func paths(name string) (lock, gate string) {
	base := filepath.Join(Dir(), "steward-testlock-"+name)
	return base + ".lock", base + ".gate"
}

// Shared holds name's lock shared until the test ends. A parallel test calls
// t.Parallel first: a test paused in t.Parallel while holding the lock would
// keep out an exclusive test of the same binary (Exclusive fails then).
func Shared(t testing.TB, name string) {
	t.Helper()
	s := stateOf(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.excl {
		if within(t, s.holder) {
			return // the test runs inside the exclusive hold
		}
		s.freed.Wait()
	}
	if s.shared == 0 {
		f, err := Acquire(name, false, func() {
			t.Logf("testlock: waiting for the %s lock (a test that disturbs it runs)", name)
		})
		if err != nil {
			t.Fatalf("testlock: %v", err)
			return
		}
		s.f = f
	}
	s.shared++
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.shared--
		if s.shared == 0 {
			s.f.Close() // closing the last descriptor releases the flock
			s.f = nil
		}
	})
}

// Exclusive holds name's lock exclusively until the test ends: no other
// test holds it meanwhile, in this process or another. Parallel tests of
// one process that want it exclusively queue for it. Inside a test that
// holds it already (the test itself or a parent) it is a no-op. It must come
// before any helper that takes the same lock shared, and a lock that some
// tests take shared is taken exclusively only by tests that are not
// parallel: it fails the test if a test of this process holds the lock
// shared (a parallel test paused while holding it would never let go).
func Exclusive(t testing.TB, name string) {
	t.Helper()
	s := stateOf(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.excl {
		if within(t, s.holder) {
			return
		}
		s.freed.Wait()
	}
	if s.shared > 0 {
		t.Fatalf("testlock: Exclusive(%q) while this process holds it (%d shared, exclusive %v): call it first, in a test that is not parallel", name, s.shared, s.excl)
		return
	}
	f, err := Acquire(name, true, func() {
		t.Logf("testlock: waiting for every other test using %s to finish", name)
	})
	if err != nil {
		t.Fatalf("testlock: %v", err)
		return
	}
	s.f, s.excl, s.holder = f, true, t.Name()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.f.Close()
		s.f, s.excl, s.holder = nil, false, ""
		s.freed.Broadcast()
	})
}

// within reports whether t is the test named holder or one of its subtests.
func within(t testing.TB, holder string) bool {
	return t.Name() == holder || strings.HasPrefix(t.Name(), holder+"/")
}

// Acquire takes name's lock (exclusive or shared) across processes and
// returns the open lock file; closing it releases the lock. waiting, if not
// nil, is called once when the lock is not free at once. Callers in tests
// use Shared or Exclusive; Acquire is for helper processes.
func Acquire(name string, exclusive bool, waiting func()) (*os.File, error) {
	lockPath, gatePath := paths(name)
	gate, err := os.OpenFile(gatePath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	defer gate.Close() // releases the turnstile once the lock is ours
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	said := false
	// The turnstile: an exclusive waiter holds it while it waits, so shared
	// ones arriving after it queue behind it instead of overtaking it.
	if err := lock(gate, syscall.LOCK_EX, waiting, &said); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", gatePath, err)
	}
	if err := lock(f, how, waiting, &said); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", lockPath, err)
	}
	return f, nil
}

// lock takes a flock, telling waiting (once) when it must wait.
func lock(f *os.File, how int, waiting func(), said *bool) error {
	err := flock(f, how|syscall.LOCK_NB)
	if err != syscall.EWOULDBLOCK {
		return err
	}
	if waiting != nil && !*said {
		*said = true
		waiting()
	}
	return flock(f, how)
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// Free reports whether name's lock could be taken (exclusive or shared)
// right now, without taking it.
func Free(name string, exclusive bool) (bool, error) {
	lockPath, _ := paths(name)
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false, err
	}
	defer f.Close() // a lock taken here goes with the file
	return tryLock(f, exclusive)
}

// tryLock takes f's lock without waiting: false (and no error) when another
// holder keeps it.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	switch err := flock(f, how|syscall.LOCK_NB); err {
	case nil:
		return true, nil
	case syscall.EWOULDBLOCK:
		return false, nil
	default:
		return false, err
	}
}

// TryAcquire is Acquire that does not wait: it returns nil (and no error)
// when the lock is not free at once.
func TryAcquire(name string, exclusive bool) (*os.File, error) {
	lockPath, gatePath := paths(name)
	gate, err := os.OpenFile(gatePath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	defer gate.Close()
	if err := flock(gate, syscall.LOCK_EX|syscall.LOCK_NB); err == syscall.EWOULDBLOCK {
		return nil, nil // someone waits for it already
	} else if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f, exclusive)
	if !ok || err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
