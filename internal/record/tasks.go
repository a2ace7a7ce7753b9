package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// TaskSettings is what a run's reports need to know of a task beyond its
// attempts: how its attempts become a sample's score.
type TaskSettings struct {
	Task string `json:"task"`
	// Reducer in its string form ("mean", "at_least: 2"); "" in runs
	// recorded before reducers existed (reports read it as the default).
	Reducer string `json:"reducer,omitempty"`
	// Attempts is the task's planned attempts per sample.
	Attempts int `json:"attempts,omitempty"`
}

// run_tasks is made on first use (not a schema migration), like run_plans:
// records written before it read as "no settings recorded".
const runTasksTable = `CREATE TABLE IF NOT EXISTS run_tasks(
	run_id TEXT PRIMARY KEY,
	tasks TEXT NOT NULL
)`

// RecordTasks stores a run's task settings.
func (r *DB) RecordTasks(ctx context.Context, runID string, tasks []TaskSettings) error {
	b, err := json.Marshal(tasks)
	if err != nil {
		return fmt.Errorf("record task settings: %w", err)
	}
	if _, err := r.db.ExecContext(ctx, runTasksTable); err != nil {
		return fmt.Errorf("record task settings: %w", err)
	}
	if _, err := r.db.ExecContext(ctx, `INSERT OR REPLACE INTO run_tasks(run_id, tasks) VALUES(?,?)`, runID, string(b)); err != nil {
		return fmt.Errorf("record task settings: %w", err)
	}
	return nil
}

// TasksOf reads what RecordTasks stored, by task name; a run without any
// (or a record made before they were recorded) gives an empty map.
func (r *DB) TasksOf(ctx context.Context, runID string) (map[string]TaskSettings, error) {
	var js string
	err := r.db.QueryRowContext(ctx, `SELECT tasks FROM run_tasks WHERE run_id=?`, runID).Scan(&js)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "no rows") {
			return map[string]TaskSettings{}, nil
		}
		return nil, fmt.Errorf("read the task settings of run %s: %w", runID, err)
	}
	var ts []TaskSettings
	if err := json.Unmarshal([]byte(js), &ts); err != nil {
		return nil, fmt.Errorf("read the task settings of run %s: %w", runID, err)
	}
	out := make(map[string]TaskSettings, len(ts))
	for _, t := range ts {
		out[t.Task] = t
	}
	return out, nil
}
