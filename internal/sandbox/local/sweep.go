package local

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/steward-evals/steward/internal/proctree"
	"github.com/steward-evals/steward/internal/runlock"
)

// runDirPrefix names the per-run directory that holds a run's local sandboxes.
const runDirPrefix = "steward-run-"

// ForRun makes a provider whose sandboxes live in one directory for the run
// (under tmp), marked with the run's lock file and owner so Sweep can tell
// when the run is dead. The directory is made with the first sandbox (a
// supervisor that only sizes the provider leaves nothing behind). While a
// command runs, its process group is noted there with the leader's start
// time, and every command carries STEWARD_RUN_ID, so a sweep stops what a
// killed run left running and nothing else.
func ForRun(tmp, runID, lockPath string) (*Provider, string, error) {
	dir := filepath.Join(tmp, runDirPrefix+runID)
	p := New(Options{BaseDir: dir, pgidDir: filepath.Join(dir, "pgids")})
	p.runDir, p.runID, p.lock, p.owner = dir, runID, lockPath, runlock.Here().Encode()
	return p, dir, nil
}

// ensureRunDir makes the run directory and its marks (again, if a finishing
// worker of the same run removed them): "lock" holds the run's lock path
// (as every Steward version reads it), "owner" where the run runs
// (runlock.Identity), so a sweeper judges the lock only where its path
// means something. The owner is written first: a sweeper that finds the
// lock path finds the owner too.
func (p *Provider) ensureRunDir() error {
	if p.runDir == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(p.runDir, "pgids"), 0o755); err != nil {
		return fmt.Errorf("local sandboxes: %w", err)
	}
	lock := filepath.Join(p.runDir, "lock")
	if _, err := os.Stat(lock); err == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(p.runDir, "owner"), []byte(p.owner), 0o644); err != nil {
		return fmt.Errorf("local sandboxes: %w", err)
	}
	if err := os.WriteFile(lock, []byte(p.lock), 0o644); err != nil {
		return fmt.Errorf("local sandboxes: %w", err)
	}
	return nil
}

// removeRunDirIfEmpty removes the run directory once no sandbox and no
// running command of any process of the run is left in it.
func (p *Provider) removeRunDirIfEmpty() {
	if p.runDir == "" {
		return
	}
	ents, err := os.ReadDir(p.runDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Name() != "lock" && e.Name() != "owner" && e.Name() != "pgids" {
			return // another worker's sandbox
		}
	}
	if os.Remove(filepath.Join(p.runDir, "pgids")) != nil {
		return // a command still runs
	}
	_ = os.Remove(filepath.Join(p.runDir, "lock"))
	_ = os.Remove(filepath.Join(p.runDir, "owner"))
	_ = os.Remove(p.runDir)
}

// Judge decides whether a run is dead from its lock path and owner; an error
// says why it cannot be proven dead (runlock.Judge from here, in production).
type Judge func(lockPath string, owner runlock.Identity) (dead bool, err error)

// Sweep stops the process groups and removes the sandbox directories of
// every run under tmp that judge proves dead. Live runs, and runs that
// cannot be proven dead, are never touched; w hears why each of those was
// left alone. A process group is killed only in the members that still
// carry the run's marker (a PID reused by someone else is spared).
func Sweep(tmp string, judge Judge, w io.Writer) (removed int) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runDirPrefix) {
			continue
		}
		runID := strings.TrimPrefix(e.Name(), runDirPrefix)
		dir := filepath.Join(tmp, e.Name())
		lock, err := os.ReadFile(filepath.Join(dir, "lock"))
		if err != nil {
			continue // being made or removed by its own run
		}
		owner, _ := os.ReadFile(filepath.Join(dir, "owner")) // absent: made before owners were recorded
		dead, err := judge(strings.TrimSpace(string(lock)), runlock.ParseIdentity(string(owner)))
		if err != nil {
			fmt.Fprintf(w, "sweep: left local sandboxes of run %s alone: %v\n", runID, err)
			continue
		}
		if !dead {
			continue
		}
		pg, _ := os.ReadDir(filepath.Join(dir, "pgids"))
		for _, p := range pg {
			pgid, err := strconv.Atoi(p.Name())
			if err != nil || pgid <= 1 {
				continue
			}
			var start uint64
			if s, err := os.ReadFile(filepath.Join(dir, "pgids", p.Name())); err == nil {
				start, _ = strconv.ParseUint(strings.TrimSpace(string(s)), 10, 64)
			}
			if _, err := proctree.KillGroupIfMarked(pgid, start, "STEWARD_RUN_ID="+runID); err != nil {
				fmt.Fprintf(w, "sweep: run %s: spared process group %d: %v\n", runID, pgid, err)
			}
		}
		if err := os.RemoveAll(dir); err == nil {
			removed++
			fmt.Fprintf(w, "sweep: removed local sandboxes of dead run %s\n", runID)
		}
	}
	return removed
}

// boxes tracks a provider's live sandboxes so Finalize removes what its
// process made even when attempts were cut short.
type boxes struct {
	mu   sync.Mutex
	live map[*box]bool
}

func (b *boxes) add(x *box) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live == nil {
		b.live = map[*box]bool{}
	}
	b.live[x] = true
}

func (b *boxes) remove(x *box) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.live, x)
}

func (b *boxes) all() []*box {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*box
	for x := range b.live {
		out = append(out, x)
	}
	return out
}
