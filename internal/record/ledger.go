package record

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// Identity is a sample's attempt-independent fingerprint: what decides its
// outcome apart from the attempt number (hash of task name, sample id and
// the parts JSON). Equal identity = the same definition. The plan computes
// the same value (history.Identity) from its attempts' parts.
func Identity(task, sample, parts string) string { return history.Identity(task, sample, parts) }

// LedgerRow is what the record knows of one sample at one identity, over
// every run of the record (or of one eval set's runs).
type LedgerRow struct {
	Task, Sample, Identity string
	// Passed, Failed and Errored count the own (not carried) attempts at
	// this identity across the runs: carried rows are copies of a result
	// already counted, never new observations. Errored is the task's own
	// error (status errored); infrastructure errors, skipped and
	// interrupted attempts are no observation of the sample and are not
	// counted.
	Passed, Failed, Errored int
	// Runs is how many runs produced them.
	Runs int
	// MaxAttempt is the highest attempt number any row (carried or not)
	// holds at this identity, whatever its status: `launch --confirm`
	// numbers new attempts after it.
	MaxAttempt int
	// First and Last are the finished_at of the first and last counted
	// attempt (zero when none is counted).
	First, Last time.Time
}

// Judged is Passed + Failed.
func (r LedgerRow) Judged() int { return r.Passed + r.Failed }

// Flaky says the sample had mixed outcomes at one identity: it both passed
// and failed.
func (r LedgerRow) Flaky() bool { return r.Passed > 0 && r.Failed > 0 }

// Ledger reads the ledger of one eval set's runs (runs.evalset = evalSet;
// "" = every eval set) in task, sample order (byte order; one sample's
// identities by first seen, then identity).
//
// Every row counts, so no index narrows the read: it is one plain scan of
// the attempts table (an eval set's runs found by the attempts' primary
// key, run_id first), aggregated by task, sample and parts in Go. (SQLite's
// GROUP BY sorts the rows first, which costs several times the scan on a
// large record.) Carried references (the carries table) point at rows the
// scan already sees and are not read.
func (r *DB) Ledger(ctx context.Context, evalSet string) ([]LedgerRow, error) {
	// outcome: 0 for a carried row or a status no observation counts, else
	// 1 passed, 2 failed, 3 errored.
	q := `SELECT a.task, a.sample, a.parts, CASE WHEN a.carried_from <> '' THEN 0
		WHEN a.status = '` + string(status.Passed) + `' THEN 1 WHEN a.status = '` + string(status.Failed) + `' THEN 2
		WHEN a.status = '` + string(status.Errored) + `' THEN 3 ELSE 0 END, a.run_id, a.attempt, a.finished_at FROM attempts a`
	var args []any
	if evalSet != "" {
		q += ` WHERE a.run_id IN (SELECT id FROM runs WHERE evalset = ?)`
		args = append(args, evalSet)
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the flaky ledger: %w", r.ledgerErr(err))
	}
	defer rows.Close()
	type group struct {
		row         LedgerRow
		parts       string
		first, last int64
		runs        map[string]bool
	}
	// Keyed by task, sample and parts as the record holds them (NUL never
	// occurs in a task name or a sample id).
	groups := map[string]*group{}
	var order []*group
	var key []byte
	var task, sample, parts, runID sql.RawBytes
	var outcome, attempt int
	var finished int64
	for rows.Next() {
		if err := rows.Scan(&task, &sample, &parts, &outcome, &runID, &attempt, &finished); err != nil {
			return nil, fmt.Errorf("read the flaky ledger: %w", r.ledgerErr(err))
		}
		key = append(append(append(append(append(key[:0], task...), 0), sample...), 0), parts...)
		g := groups[string(key)]
		if g == nil {
			g = &group{row: LedgerRow{Task: string(task), Sample: string(sample)}, parts: string(parts), runs: map[string]bool{}}
			groups[string(key)] = g
			order = append(order, g)
		}
		g.row.MaxAttempt = max(g.row.MaxAttempt, attempt)
		switch outcome {
		case 1:
			g.row.Passed++
		case 2:
			g.row.Failed++
		case 3:
			g.row.Errored++
		default:
			continue
		}
		if !g.runs[string(runID)] {
			g.runs[string(runID)] = true
		}
		if g.first == 0 || finished < g.first {
			g.first = finished
		}
		g.last = max(g.last, finished)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the flaky ledger: %w", r.ledgerErr(err))
	}
	// The same parts written differently are one definition (the identity
	// reads them as JSON): merge them.
	type idKey struct{ task, sample, id string }
	at := map[idKey]int{}
	var merged []*group
	for _, g := range order {
		g.row.Identity = Identity(g.row.Task, g.row.Sample, g.parts)
		k := idKey{g.row.Task, g.row.Sample, g.row.Identity}
		i, seen := at[k]
		if !seen {
			at[k] = len(merged)
			merged = append(merged, g)
			continue
		}
		m := merged[i]
		m.row.Passed += g.row.Passed
		m.row.Failed += g.row.Failed
		m.row.Errored += g.row.Errored
		m.row.MaxAttempt = max(m.row.MaxAttempt, g.row.MaxAttempt)
		for id := range g.runs {
			m.runs[id] = true
		}
		if g.first != 0 && (m.first == 0 || g.first < m.first) {
			m.first = g.first
		}
		m.last = max(m.last, g.last)
	}
	out := make([]LedgerRow, len(merged))
	for i, g := range merged {
		x := g.row
		x.Runs = len(g.runs)
		if g.first != 0 {
			x.First = time.Unix(0, g.first)
		}
		if g.last != 0 {
			x.Last = time.Unix(0, g.last)
		}
		out[i] = x
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		if a.Sample != b.Sample {
			return a.Sample < b.Sample
		}
		if !a.First.Equal(b.First) {
			return a.First.Before(b.First)
		}
		return a.Identity < b.Identity
	})
	return out, nil
}

// ledgerErr names damage as an unusable record; other errors are classified.
func (r *DB) ledgerErr(err error) error {
	if isCorrupt(err) {
		return unusable(r.Path, "is damaged ("+err.Error()+")")
	}
	return Classify(r.Dir, err)
}
