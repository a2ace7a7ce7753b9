// Package record is Steward's SQLite record (modernc.org/sqlite, WAL): runs,
// attempts, ramp history, leases and controls. Several invocations may write
// one record at once (S6); every attempt is committed the moment it finishes,
// so a killed run leaves every published attempt intact.
package record

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver keeps the binary static

	"github.com/steward-evals/steward/internal/status"
)

// FileName is the database file inside a record directory.
const FileName = "record.sqlite"

// DB is an open record.
type DB struct {
	db   *sql.DB
	Dir  string
	Path string
	// ReadOnly records were opened by OpenReadOnly: nothing is ever written.
	ReadOnly bool
	// version is the record's schema version (readers may see an older one).
	version int
	// pub counts what this writer published, outside the log (published.go).
	pub pubCounts
}

// migrations are applied in order; each index is a schema version.
var migrations = []string{
	`CREATE TABLE runs(
		id TEXT PRIMARY KEY,
		evalset TEXT NOT NULL,
		title TEXT NOT NULL DEFAULT '',
		plan TEXT NOT NULL DEFAULT '',
		shard TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL,
		started_at INTEGER NOT NULL,
		finished_at INTEGER,
		pid INTEGER NOT NULL DEFAULT 0,
		host TEXT NOT NULL DEFAULT '',
		lock_path TEXT NOT NULL DEFAULT '',
		budget_usd REAL NOT NULL DEFAULT 0,
		left TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE attempts(
		run_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		task TEXT NOT NULL,
		sample TEXT NOT NULL,
		attempt INTEGER NOT NULL,
		status TEXT NOT NULL,
		score REAL,
		answer TEXT NOT NULL DEFAULT '',
		explanation TEXT NOT NULL DEFAULT '',
		reason TEXT NOT NULL DEFAULT '',
		carried_from TEXT NOT NULL DEFAULT '',
		fingerprint TEXT NOT NULL,
		parts TEXT NOT NULL DEFAULT '{}',
		started_at INTEGER NOT NULL DEFAULT 0,
		finished_at INTEGER NOT NULL DEFAULT 0,
		duration_ns INTEGER NOT NULL DEFAULT 0,
		input_tokens INTEGER NOT NULL DEFAULT 0,
		output_tokens INTEGER NOT NULL DEFAULT 0,
		cost_usd REAL NOT NULL DEFAULT 0,
		requests INTEGER NOT NULL DEFAULT 0,
		log TEXT NOT NULL DEFAULT '',
		sandbox TEXT NOT NULL DEFAULT '',
		source TEXT NOT NULL DEFAULT '',
		PRIMARY KEY(run_id, seq)
	);
	CREATE INDEX attempts_fingerprint ON attempts(fingerprint, status, finished_at);
	CREATE TABLE ramp(
		run_id TEXT NOT NULL,
		at INTEGER NOT NULL,
		task TEXT NOT NULL,
		setpoint INTEGER NOT NULL,
		ceiling INTEGER NOT NULL,
		conn_limit INTEGER NOT NULL,
		decision TEXT NOT NULL,
		reason TEXT NOT NULL,
		pushback INTEGER NOT NULL,
		retries INTEGER NOT NULL,
		errored INTEGER NOT NULL,
		saturated INTEGER NOT NULL
	);
	CREATE INDEX ramp_run ON ramp(run_id, at);
	CREATE TABLE leases(
		key TEXT PRIMARY KEY,
		token TEXT NOT NULL,
		run_id TEXT NOT NULL,
		task TEXT NOT NULL,
		pid INTEGER NOT NULL,
		host TEXT NOT NULL,
		acquired_at INTEGER NOT NULL
	);
	CREATE TABLE controls(
		key TEXT PRIMARY KEY,
		value TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE TABLE live(
		run_id TEXT PRIMARY KEY,
		state TEXT NOT NULL,
		updated_at INTEGER NOT NULL
	);`,
	migrationCarries,     // carry.go (#14.5)
	migrationTranscripts, // transcripts.go (#16)
	migrationArtifacts,   // artifacts.go (#16)
	migrationTries,       // tries.go (#23.2, #30.1)
	migrationLimits,      // limits.go (#30.3, #30.4)
	migrationGrading,     // grading.go (#30.2)
}

// SQL exposes the handle for packages that build reports.
func (r *DB) SQL() *sql.DB { return r.db }

// NewID returns a random id with a prefix, e.g. "r-5f3a…".
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Run is one invocation.
type Run struct {
	ID        string
	EvalSet   string
	Title     string
	Plan      string
	Shard     string
	Status    status.Run
	Started   time.Time
	Finished  time.Time
	PID       int
	Host      string
	LockPath  string
	BudgetUSD float64
	Left      string
}

// StartRun records a new run.
func (r *DB) StartRun(ctx context.Context, run Run) error {
	_, err := r.db.ExecContext(ctx, `INSERT INTO runs(id, evalset, title, plan, shard, status, started_at, pid, host, lock_path, budget_usd)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)`, run.ID, run.EvalSet, run.Title, run.Plan, run.Shard, status.Running, run.Started.UnixNano(), run.PID, run.Host, run.LockPath, run.BudgetUSD)
	if err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	r.startCount(run.ID)
	return nil
}

// FinishRun marks a run finished (or cancelled) and notes what was left.
func (r *DB) FinishRun(ctx context.Context, id string, st status.Run, at time.Time, left []string) error {
	_, err := r.db.ExecContext(ctx, `UPDATE runs SET status=?, finished_at=?, left=? WHERE id=?`, st, at.UnixNano(), strings.Join(left, "\n"), id)
	if err != nil {
		return fmt.Errorf("finish run: %w", err)
	}
	_, _ = r.db.ExecContext(ctx, `DELETE FROM live WHERE run_id=?`, id)
	return nil
}

// Runs lists runs, newest first.
func (r *DB) Runs(ctx context.Context) ([]Run, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, evalset, title, plan, shard, status, started_at, COALESCE(finished_at,0), pid, host, lock_path, budget_usd, left FROM runs ORDER BY started_at DESC`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var x Run
		var s, f int64
		if err := rows.Scan(&x.ID, &x.EvalSet, &x.Title, &x.Plan, &x.Shard, &x.Status, &s, &f, &x.PID, &x.Host, &x.LockPath, &x.BudgetUSD, &x.Left); err != nil {
			return nil, err
		}
		x.Started = time.Unix(0, s)
		if f != 0 {
			x.Finished = time.Unix(0, f)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Attempt is one published attempt.
type Attempt struct {
	RunID        string
	Seq          int
	Task         string
	Sample       string
	Attempt      int
	Status       status.Attempt
	Score        *float64
	Answer       string
	Explanation  string
	Reason       string
	CarriedFrom  string // run id the result was carried from ("" = ran here)
	Fingerprint  string
	Parts        string // JSON map of the fingerprint's component hashes (for carry reasons)
	Started      time.Time
	Finished     time.Time
	Duration     time.Duration
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	Requests     int64
	Log          string
	Sandbox      string
	Source       string
	// Tries is how many times the attempt ran (1 + its infrastructure
	// retries); RetryReasons says why each earlier try was retried.
	Tries        int
	RetryReasons []string
	// AgentExit and AgentOutput are the agent's exit status and output tail
	// when it exited non-zero and the scorer judged what it left (0, "" else).
	AgentExit   int
	AgentOutput string
	// Limit names the per-attempt limit the attempt reached ("tokens",
	// "model_calls", "cost_usd", "agent_time"; "" none); TimedOut says its
	// agent was stopped at its deadline and judged on what it left (limits.go).
	Limit    string
	TimedOut bool
	// Grading is what the model judge's graders spent (scorer.model_graded;
	// zero for other scorers), apart from the agent's tokens and cost above.
	Grading Spend
	// ReachedJudging (not stored): the try's agent ran to its end and
	// judging began, so it is never retried for another verdict (issue 23
	// item 2).
	ReachedJudging bool
}

// baseAttemptCols are the attempts columns of schema version 1;
// attemptCols adds those of later migrations (tries.go).
const baseAttemptCols = `run_id, seq, task, sample, attempt, status, score, answer, explanation, reason, carried_from, fingerprint, parts, started_at, finished_at, duration_ns, input_tokens, output_tokens, cost_usd, requests, log, sandbox, source`

const attemptCols = baseAttemptCols + `, ` + triesCols + `, ` + limitsCols + `, ` + gradingCols

// Publish commits one attempt at once (S6: readable as soon as published).
func (r *DB) Publish(ctx context.Context, a Attempt) error {
	if err := insertAttempt(ctx, r.db, a); err != nil {
		return err
	}
	r.published(a)
	r.boundWAL(ctx)
	return nil
}

// insertAttempt writes one attempt's row with ex (the record, or a transaction).
func insertAttempt(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, a Attempt) error {
	tries := max(a.Tries, 1)
	_, err := ex.ExecContext(ctx, `INSERT OR REPLACE INTO attempts(`+attemptCols+`) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		a.RunID, a.Seq, a.Task, a.Sample, a.Attempt, a.Status, a.Score, a.Answer, a.Explanation, a.Reason, a.CarriedFrom, a.Fingerprint, a.Parts,
		unix(a.Started), unix(a.Finished), int64(a.Duration), a.InputTokens, a.OutputTokens, a.CostUSD, a.Requests, a.Log, a.Sandbox, a.Source,
		tries, encodeReasons(a.RetryReasons), a.AgentExit, a.AgentOutput, a.Limit, a.TimedOut,
		a.Grading.InputTokens, a.Grading.OutputTokens, a.Grading.CostUSD, a.Grading.Requests)
	if err != nil {
		return fmt.Errorf("publish attempt %s/%s#%d: %w", a.Task, a.Sample, a.Attempt, err)
	}
	return nil
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func scanAttempts(rows *sql.Rows) ([]Attempt, error) {
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var s, f, d int64
		var score sql.NullFloat64
		var reasons string
		if err := rows.Scan(&a.RunID, &a.Seq, &a.Task, &a.Sample, &a.Attempt, &a.Status, &score, &a.Answer, &a.Explanation, &a.Reason, &a.CarriedFrom, &a.Fingerprint, &a.Parts,
			&s, &f, &d, &a.InputTokens, &a.OutputTokens, &a.CostUSD, &a.Requests, &a.Log, &a.Sandbox, &a.Source,
			&a.Tries, &reasons, &a.AgentExit, &a.AgentOutput, &a.Limit, &a.TimedOut,
			&a.Grading.InputTokens, &a.Grading.OutputTokens, &a.Grading.CostUSD, &a.Grading.Requests); err != nil {
			return nil, err
		}
		a.RetryReasons = decodeReasons(reasons)
		if score.Valid {
			v := score.Float64
			a.Score = &v
		}
		if s != 0 {
			a.Started = time.Unix(0, s)
		}
		if f != 0 {
			a.Finished = time.Unix(0, f)
		}
		a.Duration = time.Duration(d)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Attempts returns a run's attempts in discovery order, carried ones read
// through their references (with the producing run's tokens and cost).
func (r *DB) Attempts(ctx context.Context, runID string) ([]Attempt, error) {
	rows, err := r.attemptsQuery(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	return scanAttempts(rows)
}

// RampPoint is one stored tend decision for one task (R6).
type RampPoint struct {
	At        time.Time
	Task      string
	Setpoint  int
	Ceiling   int
	ConnLimit int
	Decision  string
	Reason    string
	Pushback  bool
	Retries   int
	Errored   int
	Saturated bool
}

// AddRamp stores one tend's decisions in one transaction.
func (r *DB) AddRamp(ctx context.Context, runID string, pts []RampPoint) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record ramp: %w", err)
	}
	defer tx.Rollback()
	for _, p := range pts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ramp VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`, runID, p.At.UnixNano(), p.Task, p.Setpoint, p.Ceiling, p.ConnLimit, p.Decision, p.Reason, b2i(p.Pushback), p.Retries, p.Errored, b2i(p.Saturated)); err != nil {
			return fmt.Errorf("record ramp: %w", err)
		}
	}
	return tx.Commit()
}

// Ramp returns a run's ramp history in time order.
func (r *DB) Ramp(ctx context.Context, runID string) ([]RampPoint, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT at, task, setpoint, ceiling, conn_limit, decision, reason, pushback, retries, errored, saturated FROM ramp WHERE run_id=? ORDER BY at, rowid`, runID)
	if err != nil {
		return nil, fmt.Errorf("read ramp: %w", err)
	}
	defer rows.Close()
	var out []RampPoint
	for rows.Next() {
		var p RampPoint
		var at int64
		var pb, sat int
		if err := rows.Scan(&at, &p.Task, &p.Setpoint, &p.Ceiling, &p.ConnLimit, &p.Decision, &p.Reason, &pb, &p.Retries, &p.Errored, &sat); err != nil {
			return nil, err
		}
		p.At, p.Pushback, p.Saturated = time.Unix(0, at), pb != 0, sat != 0
		out = append(out, p)
	}
	return out, rows.Err()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetControl sets a control value (e.g. "ramp.hold"); "" deletes it.
func (r *DB) SetControl(ctx context.Context, key, value string, at time.Time) error {
	var err error
	if value == "" {
		_, err = r.db.ExecContext(ctx, `DELETE FROM controls WHERE key=?`, key)
	} else {
		_, err = r.db.ExecContext(ctx, `INSERT INTO controls(key, value, updated_at) VALUES(?,?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value, updated_at=excluded.updated_at`, key, value, at.UnixNano())
	}
	if err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	return nil
}

// Control reads a control value ("" when unset).
func (r *DB) Control(ctx context.Context, key string) (string, error) {
	var v string
	err := r.db.QueryRowContext(ctx, `SELECT value FROM controls WHERE key=?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	return v, nil
}

// SetLive stores a running invocation's live state (JSON) for `steward tend`.
func (r *DB) SetLive(ctx context.Context, runID, state string, at time.Time) error {
	_, err := r.db.ExecContext(ctx, `INSERT INTO live(run_id, state, updated_at) VALUES(?,?,?) ON CONFLICT(run_id) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at`, runID, state, at.UnixNano())
	return err
}

// Live returns the live states of running invocations, keyed by run id.
func (r *DB) Live(ctx context.Context) (map[string]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT run_id, state FROM live`)
	if err != nil {
		return nil, fmt.Errorf("read live state: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, rows.Err()
}
