package record

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// Planned is one attempt a run set out to publish.
type Planned struct {
	Seq     int    `json:"seq"`
	Task    string `json:"task"`
	Sample  string `json:"sample"`
	Attempt int    `json:"attempt"`
}

// RunPlan is what a run recorded when it started: who and where it runs
// (its owner's identity, encoded by runlock) and every attempt it planned, so
// a crashed run's report can list what it never published.
type RunPlan struct {
	Owner   string
	Planned []Planned
}

// run_plans is made on first use (not a schema migration), so records
// written by earlier versions read as "no plan recorded".
const runPlansTable = `CREATE TABLE IF NOT EXISTS run_plans(
	run_id TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	planned TEXT NOT NULL
)`

// RecordPlan stores a run's owner and planned attempts.
func (r *DB) RecordPlan(ctx context.Context, runID string, p RunPlan) error {
	b, err := json.Marshal(p.Planned)
	if err != nil {
		return fmt.Errorf("record plan: %w", err)
	}
	if _, err := r.db.ExecContext(ctx, runPlansTable); err != nil {
		return fmt.Errorf("record plan: %w", err)
	}
	if _, err := r.db.ExecContext(ctx, `INSERT OR REPLACE INTO run_plans(run_id, owner, planned) VALUES(?,?,?)`, runID, p.Owner, string(b)); err != nil {
		return fmt.Errorf("record plan: %w", err)
	}
	return nil
}

// PlanOf reads what RecordPlan stored; a run without one (or a record made
// before plans were recorded) has the zero RunPlan.
func (r *DB) PlanOf(ctx context.Context, runID string) (RunPlan, error) {
	var owner, planned string
	err := r.db.QueryRowContext(ctx, `SELECT owner, planned FROM run_plans WHERE run_id=?`, runID).Scan(&owner, &planned)
	if errors.Is(err, sql.ErrNoRows) || (err != nil && strings.Contains(err.Error(), "no such table")) {
		return RunPlan{}, nil
	}
	if err != nil {
		return RunPlan{}, fmt.Errorf("read the plan of run %s: %w", runID, err)
	}
	p := RunPlan{Owner: owner}
	if err := json.Unmarshal([]byte(planned), &p.Planned); err != nil {
		return RunPlan{}, fmt.Errorf("read the plan of run %s: %w", runID, err)
	}
	return p, nil
}

// MarkCrashed records that a run still marked running has lost its owner:
// status crashed, ended at the last sign of life (its last published attempt
// or live state, else now), with reason as what it left. It reports whether
// the run was running (a finished run is never changed).
func (r *DB) MarkCrashed(ctx context.Context, runID, reason string, now time.Time) (bool, error) {
	var last sql.NullInt64
	_ = r.db.QueryRowContext(ctx, `SELECT MAX(t) FROM (SELECT MAX(finished_at) AS t FROM attempts WHERE run_id=? UNION ALL SELECT updated_at FROM live WHERE run_id=?)`, runID, runID).Scan(&last)
	at := now.UnixNano()
	if last.Valid && last.Int64 > 0 {
		at = last.Int64
	}
	res, err := r.db.ExecContext(ctx, `UPDATE runs SET status=?, finished_at=MAX(started_at, ?), left=? WHERE id=? AND status=?`, status.Crashed, at, reason, runID, status.Running)
	if err != nil {
		return false, fmt.Errorf("mark run %s crashed: %w", runID, err)
	}
	n, _ := res.RowsAffected()
	if _, err := r.db.ExecContext(ctx, `DELETE FROM live WHERE run_id=?`, runID); err != nil {
		return n > 0, fmt.Errorf("mark run %s crashed: %w", runID, err)
	}
	return n > 0, nil
}
