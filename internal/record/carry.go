package record

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// migrationCarries stores carried attempts as references to the row that
// judged them (no copies of rows or logs), indexes a sample's attempts for
// run reasons, and covers the carry look-up with one index.
const migrationCarries = `CREATE TABLE carries(
		run_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		src_run TEXT NOT NULL,
		src_seq INTEGER NOT NULL,
		source TEXT NOT NULL DEFAULT '',
		PRIMARY KEY(run_id, seq)
	) WITHOUT ROWID;
	CREATE INDEX attempts_key ON attempts(task, sample, attempt, finished_at);
	DROP INDEX attempts_fingerprint;
	CREATE INDEX attempts_carry ON attempts(fingerprint, status, finished_at, run_id, seq, carried_from);`

// hasCarries says whether a record of schema version v has the carries table.
func hasCarries(v int) bool {
	for i, m := range migrations {
		if m == migrationCarries {
			return v > i
		}
	}
	return false
}

// The carry vocabulary lives in package history (what the plan reads);
// the record implements it.
type (
	Source     = history.Source
	Candidates = history.Candidates
	Key        = history.Key
	Previous   = history.Previous
)

// EarlyExitPrefix starts the reason of attempts skipped by early exit.
const EarlyExitPrefix = history.EarlyExitPrefix

// chunk bounds the variables of one statement.
const chunk = 400

// Carryable looks up, in a few statements, what every fingerprint could
// carry. Only rows in the attempts table are sources: references (carried
// attempts of later runs) point at them, so a source is always the row
// that holds the result and its log. The judged lookup reads only the
// attempts_carry index (never the rows and their logs).
func (r *DB) Carryable(ctx context.Context, fingerprints []string, passedOnly, earlyExit bool) (Candidates, error) {
	c := Candidates{Judged: map[string]Source{}, EarlyExit: map[string]Source{}}
	statuses := `('` + string(status.Passed) + `','` + string(status.Failed) + `')`
	if passedOnly {
		statuses = `('` + string(status.Passed) + `')`
	}
	if err := r.newest(ctx, c.Judged, fingerprints, `status IN `+statuses); err != nil {
		return c, err
	}
	if earlyExit {
		if err := r.newest(ctx, c.EarlyExit, fingerprints, `status='`+string(status.Skipped)+`' AND reason LIKE '`+EarlyExitPrefix+`%'`); err != nil {
			return c, err
		}
	}
	return c, nil
}

// newest fills m with the newest row per fingerprint that matches cond.
func (r *DB) newest(ctx context.Context, m map[string]Source, fingerprints []string, cond string) error {
	finished := map[string]int64{}
	for start := 0; start < len(fingerprints); start += chunk {
		part := fingerprints[start:min(start+chunk, len(fingerprints))]
		args := make([]any, len(part))
		for i, f := range part {
			args[i] = f
		}
		rows, err := r.db.QueryContext(ctx, `SELECT fingerprint, status, finished_at, run_id, seq, carried_from
			FROM attempts WHERE fingerprint IN (?`+strings.Repeat(",?", len(part)-1)+`) AND `+cond, args...)
		if err != nil {
			return fmt.Errorf("look up carry: %w", err)
		}
		for rows.Next() {
			var s Source
			var at int64
			if err := rows.Scan(&s.Fingerprint, &s.Status, &at, &s.RunID, &s.Seq, &s.Producer); err != nil {
				rows.Close()
				return fmt.Errorf("look up carry: %w", err)
			}
			if s.Producer == "" {
				s.Producer = s.RunID
			}
			old, ok := m[s.Fingerprint]
			prev := finished[s.Fingerprint]
			if !ok || at > prev || (at == prev && (s.RunID > old.RunID || (s.RunID == old.RunID && s.Seq > old.Seq))) {
				m[s.Fingerprint], finished[s.Fingerprint] = s, at
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("look up carry: %w", err)
		}
	}
	return nil
}

// LatestMany returns the newest row of each key (any run, any status).
func (r *DB) LatestMany(ctx context.Context, keys []Key) (map[Key]Previous, error) {
	out := map[Key]Previous{}
	at := map[Key]int64{}
	const per = chunk / 3
	for start := 0; start < len(keys); start += per {
		part := keys[start:min(start+per, len(keys))]
		args := make([]any, 0, 3*len(part))
		for _, k := range part {
			args = append(args, k.Task, k.Sample, k.Attempt)
		}
		rows, err := r.db.QueryContext(ctx, `WITH k(task, sample, attempt) AS (VALUES (?,?,?)`+strings.Repeat(",(?,?,?)", len(part)-1)+`)
			SELECT a.task, a.sample, a.attempt, a.status, a.fingerprint, a.parts, a.finished_at
			FROM k JOIN attempts a ON a.task=k.task AND a.sample=k.sample AND a.attempt=k.attempt`, args...)
		if err != nil {
			return nil, fmt.Errorf("look up previous attempts: %w", err)
		}
		for rows.Next() {
			var k Key
			var p Previous
			var f int64
			if err := rows.Scan(&k.Task, &k.Sample, &k.Attempt, &p.Status, &p.Fingerprint, &p.Parts, &f); err != nil {
				rows.Close()
				return nil, fmt.Errorf("look up previous attempts: %w", err)
			}
			if old, ok := at[k]; !ok || f >= old {
				out[k], at[k] = p, f
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("look up previous attempts: %w", err)
		}
	}
	return out, nil
}

// Ref is a carried attempt: attempt seq of run RunID is the row (SrcRun,
// SrcSeq). Source is the sample's place in the eval set today.
type Ref struct {
	RunID  string
	Seq    int
	SrcRun string
	SrcSeq int
	Source string
}

// PublishCarried records carried attempts as references, all in one
// transaction: no row or log is copied (a no-op re-run adds only these).
func (r *DB) PublishCarried(ctx context.Context, refs []Ref) error {
	if len(refs) == 0 {
		return nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("publish carried attempts: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO carries(run_id, seq, src_run, src_seq, source) VALUES(?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("publish carried attempts: %w", err)
	}
	defer st.Close()
	for _, c := range refs {
		if _, err := st.ExecContext(ctx, c.RunID, c.Seq, c.SrcRun, c.SrcSeq, c.Source); err != nil {
			return fmt.Errorf("publish carried attempts: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("publish carried attempts: %w", err)
	}
	rows := make([]Attempt, len(refs))
	for i, c := range refs {
		rows[i] = Attempt{RunID: c.RunID, Seq: c.Seq}
	}
	r.published(rows...)
	r.boundWAL(ctx)
	return nil
}

// carriedCols reads a carried attempt through its reference: the source
// row's result, tokens and cost (what the producing run spent), under the
// carrying run's id and seq; carried_from names the producing run.
const carriedCols = `c.run_id, c.seq, a.task, a.sample, a.attempt, a.status, a.score, a.answer, a.explanation, a.reason,
	CASE WHEN a.carried_from <> '' THEN a.carried_from ELSE a.run_id END, a.fingerprint, a.parts, a.started_at, a.finished_at,
	a.duration_ns, a.input_tokens, a.output_tokens, a.cost_usd, a.requests, a.log, a.sandbox,
	CASE WHEN c.source <> '' THEN c.source ELSE a.source END`

func (r *DB) attemptsQuery(ctx context.Context, runID string) (*sql.Rows, error) {
	if !hasCarries(r.version) {
		return r.db.QueryContext(ctx, `SELECT `+r.selectCols()+` FROM attempts WHERE run_id=? ORDER BY seq`, runID)
	}
	return r.db.QueryContext(ctx, `SELECT `+r.selectCols()+` FROM attempts WHERE run_id=?
		UNION ALL SELECT `+r.carriedSelect()+` FROM carries c JOIN attempts a ON a.run_id=c.src_run AND a.seq=c.src_seq WHERE c.run_id=?
		ORDER BY 2`, runID, runID)
}
