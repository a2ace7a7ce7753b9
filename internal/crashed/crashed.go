// Package crashed finds the runs the record calls running whose owner is
// provably gone (internal/runlock judges the owner), and marks them
// crashed: the launch does it as it starts, `steward runs` and the reports
// say it.
package crashed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/status"
)

// Owner is the identity of the process that ran (or runs) r: as recorded
// at its start, or, for runs recorded before identities were, its host and pid.
func Owner(ctx context.Context, db *record.DB, r record.Run) runlock.Identity {
	p, _ := db.PlanOf(ctx, r.ID)
	owner := runlock.ParseIdentity(p.Owner)
	if owner.Host == "" && owner.PID == 0 {
		owner.Host, owner.PID = r.Host, r.PID
	}
	return owner
}

// Judge says whether a run the record calls running has lost its owner.
// Only a provably dead owner counts (runlock.Judge): an error says why the
// run could be judged neither way.
func Judge(ctx context.Context, db *record.DB, r record.Run, here runlock.Identity) (bool, error) {
	if r.Status != status.Running {
		return false, nil
	}
	return runlock.Judge(r.LockPath, Owner(ctx, db, r), here)
}

// Reason is what a crashed run's report says.
func Reason(owner runlock.Identity) string {
	return fmt.Sprintf("the run crashed: its process (%s) ended without finishing it", owner.Where())
}

// Mark marks every run the record calls running whose owner is
// provably gone as crashed, and removes the stale lock files of dead runs
// in the record's runs/ directory. It returns the ids it marked, and why
// the runs it could not judge were left as they are.
func Mark(ctx context.Context, db *record.DB, here runlock.Identity, now time.Time) (marked []string, unknown map[string]error, err error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	unknown = map[string]error{}
	for _, r := range runs {
		if r.Status != status.Running {
			continue
		}
		dead, jerr := Judge(ctx, db, r, here)
		if jerr != nil {
			unknown[r.ID] = jerr
			continue
		}
		if !dead {
			continue
		}
		ok, err := db.MarkCrashed(ctx, r.ID, Reason(Owner(ctx, db, r)), now)
		if err != nil {
			return marked, unknown, err
		}
		if ok {
			marked = append(marked, r.ID)
		}
		if runlock.RemoveStale(r.LockPath) == nil {
			record.Unreserve(db.Dir, r.ID)
		}
	}
	removeStaleLocks(filepath.Join(db.Dir, "runs"), here, now)
	return marked, unknown, nil
}

// removeStaleLocks removes lock files of dead runs (killed runs never
// remove their own), with the room they kept for a full disk. A file
// younger than a minute may be one a starting run has created but not yet
// locked: it is left for the next look.
func removeStaleLocks(dir string, here runlock.Identity, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < time.Minute {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, _ := os.ReadFile(path)
		line, _, _ := strings.Cut(string(b), "\n")
		if dead, err := runlock.Judge(path, runlock.ParseIdentity(line), here); err == nil && dead {
			if runlock.RemoveStale(path) == nil {
				_ = os.Remove(strings.TrimSuffix(path, ".lock") + ".reserve")
			}
		}
	}
}
