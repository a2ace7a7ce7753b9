package run

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

// OwnerOf is the identity of the process that ran (or runs) r: as recorded
// at its start, or, for runs recorded before identities were, its host and pid.
func OwnerOf(ctx context.Context, db *record.DB, r record.Run) runlock.Identity {
	p, _ := db.PlanOf(ctx, r.ID)
	owner := runlock.ParseIdentity(p.Owner)
	if owner.Host == "" && owner.PID == 0 {
		owner.Host, owner.PID = r.Host, r.PID
	}
	return owner
}

// JudgeRun says whether a run the record calls running has lost its owner.
// Only a provably dead owner counts (runlock.Judge): an error says why the
// run could be judged neither way.
func JudgeRun(ctx context.Context, db *record.DB, r record.Run, here runlock.Identity) (bool, error) {
	if r.Status != status.Running {
		return false, nil
	}
	return runlock.Judge(r.LockPath, OwnerOf(ctx, db, r), here)
}

// CrashReason is what a crashed run's report says.
func CrashReason(owner runlock.Identity) string {
	return fmt.Sprintf("the run crashed: its process (%s) ended without finishing it", owner.Where())
}

// MarkCrashedRuns marks every run the record calls running whose owner is
// provably gone as crashed, and removes the stale lock files of dead runs
// in the record's runs/ directory. It returns the ids it marked, and why
// the runs it could not judge were left as they are.
func MarkCrashedRuns(ctx context.Context, db *record.DB, here runlock.Identity, now time.Time) (marked []string, unknown map[string]error, err error) {
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	unknown = map[string]error{}
	for _, r := range runs {
		if r.Status != status.Running {
			continue
		}
		dead, jerr := JudgeRun(ctx, db, r, here)
		if jerr != nil {
			unknown[r.ID] = jerr
			continue
		}
		if !dead {
			continue
		}
		ok, err := db.MarkCrashed(ctx, r.ID, CrashReason(OwnerOf(ctx, db, r)), now)
		if err != nil {
			return marked, unknown, err
		}
		if ok {
			marked = append(marked, r.ID)
		}
		if runlock.RemoveStale(r.LockPath) == nil {
			_ = os.Remove(filepath.Join(db.Dir, "runs", r.ID+".reserve"))
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

// recordStart stores who runs this launch and every attempt it plans (a
// crashed run's report lists those it never published), then marks the
// runs whose owners are gone as crashed.
func (l *loaded) recordStart(ctx context.Context) error {
	planned := make([]record.Planned, 0, len(l.p.Attempts))
	for _, a := range l.p.Attempts {
		planned = append(planned, record.Planned{Seq: a.Seq, Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number})
	}
	here := runlock.Here()
	if err := l.db.RecordPlan(ctx, l.runID, record.RunPlan{Owner: here.Encode(), Planned: planned}); err != nil {
		return record.Classify(l.db.Dir, err)
	}
	tasks := make([]record.TaskSettings, 0, len(l.p.Tasks))
	for _, t := range l.p.Tasks {
		tasks = append(tasks, record.TaskSettings{Task: t.Task.Name, Reducer: t.Task.Reducer.String(), Attempts: t.Task.Attempts})
	}
	if err := l.db.RecordTasks(ctx, l.runID, tasks); err != nil {
		return record.Classify(l.db.Dir, err)
	}
	marked, _, err := MarkCrashedRuns(ctx, l.db, here, time.Now())
	if err != nil {
		return record.Classify(l.db.Dir, err)
	}
	for _, id := range marked {
		fmt.Fprintf(l.opts.Stderr, "steward: run %s crashed (its process is gone); `steward report --run %s` lists what it never published\n", id, id)
	}
	return nil
}
