package run

import (
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/crashed"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/runlock"
)

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
	marked, _, err := crashed.Mark(ctx, l.db, here, time.Now())
	if err != nil {
		return record.Classify(l.db.Dir, err)
	}
	for _, id := range marked {
		fmt.Fprintf(l.opts.Stderr, "steward: run %s crashed (its process is gone); `steward report --run %s` lists what it never published\n", id, id)
	}
	return nil
}
