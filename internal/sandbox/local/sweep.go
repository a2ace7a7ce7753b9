package local

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runDirPrefix names the per-run directory that holds a run's local sandboxes.
const runDirPrefix = "steward-run-"

// ForRun makes a provider whose sandboxes live in one directory for the run
// (under tmp), marked with the run's lock file so Sweep can tell when the run
// is dead. While a command runs, its process group is noted there, so a
// sweep can stop what a killed run left running.
func ForRun(tmp, runID, lockPath string) (*Provider, string, error) {
	dir := filepath.Join(tmp, runDirPrefix+runID)
	if err := os.MkdirAll(filepath.Join(dir, "pgids"), 0o755); err != nil {
		return nil, "", fmt.Errorf("local sandboxes: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lock"), []byte(lockPath), 0o644); err != nil {
		return nil, "", fmt.Errorf("local sandboxes: %w", err)
	}
	return New(Options{BaseDir: dir, pgidDir: filepath.Join(dir, "pgids")}), dir, nil
}

// Sweep stops the process groups and removes the sandbox directories of
// every run under tmp whose lock is no longer held (alive reports a lock
// path's liveness). Live runs are never touched.
func Sweep(tmp string, alive func(lockPath string) bool, w io.Writer) (removed int) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runDirPrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		lock, err := os.ReadFile(filepath.Join(dir, "lock"))
		if err != nil || alive(string(lock)) {
			continue
		}
		pg, _ := os.ReadDir(filepath.Join(dir, "pgids"))
		for _, p := range pg {
			if pgid, err := strconv.Atoi(p.Name()); err == nil && pgid > 1 {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
		if err := os.RemoveAll(dir); err == nil {
			removed++
			fmt.Fprintf(w, "sweep: removed local sandboxes of dead run %s\n", strings.TrimPrefix(e.Name(), runDirPrefix))
		}
	}
	return removed
}
