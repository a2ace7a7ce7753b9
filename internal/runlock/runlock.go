// Package runlock marks a run as alive with an exclusive flock(2) on a file.
// The lock is held for the run's life and the kernel releases it when the
// process dies, however it dies, so a sweeper can tell a dead run's leftovers
// from a live run's resources (rule D4).
package runlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Lock is a held run lock.
type Lock struct {
	path string
	f    *os.File
}

// ErrHeld is returned by Acquire when another holder owns the lock.
var ErrHeld = errors.New("lock is held by another process")

// Acquire creates path (and its parent directory) if needed and takes an
// exclusive, non-blocking flock on it. It fails with ErrHeld when someone else
// holds it.
func Acquire(path string) (*Lock, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("acquire run lock: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("acquire run lock: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("acquire run lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("acquire run lock %s: %w", abs, ErrHeld)
		}
		return nil, fmt.Errorf("acquire run lock %s: %w", abs, err)
	}
	// Record the holder's identity for humans; liveness is decided by the flock only.
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%s\n", Here().Encode())
	return &Lock{path: abs, f: f}, nil
}

// Path is the absolute path of the lock file.
func (l *Lock) Path() string { return l.path }

// Release drops the lock and removes the file. It is safe to call twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Remove first, while still holding the lock, so a sweeper never sees an
	// unlocked file that a live run is about to remove.
	rmErr := os.Remove(l.path)
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		return fmt.Errorf("release run lock: %w", rmErr)
	}
	if err != nil {
		return fmt.Errorf("release run lock: %w", err)
	}
	return nil
}

// Alive reports whether the lock file at path exists and is locked by
// someone (this process included), or cannot be probed (then nothing
// proves the run gone). A missing or unlocked file means the run that owned
// it is gone.
func Alive(path string) bool {
	held, err := probe(path)
	return held || err != nil
}

// openLock opens a lock file to probe it (a variable so that tests can play
// a file this process may not open).
var openLock = os.Open

// probe says whether the lock file at path is held. A missing file (or no
// path) is not held. A file that exists but cannot be opened or probed (a
// lock in another user's 0700 directory: EACCES) is neither: probe returns
// an error, and the run it belongs to is unknown, never dead.
func probe(path string) (held bool, err error) {
	if path == "" {
		return false, nil
	}
	f, err := openLock(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

func flockNB(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return ErrHeld
		}
		return err
	}
	return nil
}
