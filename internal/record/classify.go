package record

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/steward-evals/steward/internal/status"
)

// ErrDiskFull marks a record that cannot grow because its disk is full.
var ErrDiskFull = errors.New("the record's disk is full")

// Classify turns SQLite's reports of a full disk ("database or disk is
// full", an I/O error while the file system has no room left) into a clear,
// infrastructure-class error naming the record's directory. What was
// published before stays intact (every attempt is its own transaction).
func Classify(dir string, err error) error {
	if err == nil {
		return nil
	}
	msg := strings.ToLower(err.Error())
	full := strings.Contains(msg, "disk is full") || strings.Contains(msg, "no space left") || errors.Is(err, syscall.ENOSPC)
	if !full && strings.Contains(msg, "disk i/o error") {
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) == nil && st.Bavail*uint64(st.Bsize) < 1<<20 {
			full = true
		}
	}
	if !full {
		return err
	}
	return status.InfraError(fmt.Errorf("%w (%s): free some space and run again; every attempt published so far is intact and will be carried: %v", ErrDiskFull, dir, err))
}
