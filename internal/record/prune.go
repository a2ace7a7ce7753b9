package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// PruneOptions says what `steward prune` keeps (issue 23 item 12).
type PruneOptions struct {
	// InScope says which runs prune may touch (an eval set's); nil: all.
	// Runs out of scope are kept whole.
	InScope func(Run) bool
	// KeepRuns is how many of the newest runs in scope are kept whole
	// (at least 1).
	KeepRuns int
	// KeepTranscripts is how many of the newest runs in scope keep the
	// transcripts and artifacts their reports show (their own attempts' and
	// their carried attempts' sources'); older ones are dropped (0: none kept).
	KeepTranscripts int
	// Dry counts what would be dropped and changes nothing.
	Dry bool
}

// PruneResult is what prune dropped and the record's size around it.
type PruneResult struct {
	Runs, RunsKeptWhole, RunsDropped int
	// RunsThinned are pruned runs that still hold attempts something needs
	// (carry's sources, the flaky ledger's evidence): their row stays.
	RunsThinned                                        int
	AttemptsDropped, CarriesDropped, RampDropped       int
	TranscriptsDropped, ArtifactsDropped, PlansDropped int
	// BytesBefore and BytesAfter are the record's file and log together.
	BytesBefore, BytesAfter int64
}

// Dropped says whether prune dropped (or, dry, would drop) anything.
func (p PruneResult) Dropped() bool {
	return p.RunsDropped+p.AttemptsDropped+p.CarriesDropped+p.RampDropped+p.TranscriptsDropped+p.ArtifactsDropped+p.PlansDropped > 0
}

// Size is the record's size on disk: the file and its write-ahead log.
func (r *DB) Size() int64 { return sizeOf(r.Path) }

// SizeOf is the size on disk of the record in dir (0 when there is none).
func SizeOf(dir string) int64 { return sizeOf(filepath.Join(dir, FileName)) }

func sizeOf(path string) int64 {
	var n int64
	for _, suf := range []string{"", "-wal"} {
		if st, err := os.Stat(path + suf); err == nil {
			n += st.Size()
		}
	}
	return n
}

type rowKey struct {
	run string
	seq int
}

// Prune drops from the record what no command needs any more, then vacuums
// it so that the file shrinks. Kept, always:
//
//   - every run out of scope, whole;
//   - the KeepRuns newest runs in scope, the newest finished one (what a
//     baseline reads) and every run still running, whole;
//   - for every fingerprint, its newest judged attempt (passed or failed),
//     its newest passed one (--rerun) and its newest early-exit skip: what
//     carry reads (S2, S3, S4);
//   - the attempts the kept runs' carried attempts point at;
//   - every own attempt (not carried) that passed, failed or errored at the
//     newest identity of each sample of each eval set: the evidence
//     `steward flaky` and the verdict's base side count;
//   - for every task, sample and attempt number, its newest row (why a
//     sample is re-run);
//   - transcripts and artifacts of the attempts the KeepTranscripts newest
//     runs show.
//
// Dropped from the other runs: every other attempt row, their carried
// references, ramp history and plans, and the run itself when none of its
// attempts is kept; transcripts and artifacts of attempts the newest
// KeepTranscripts runs do not show.
func (r *DB) Prune(ctx context.Context, o PruneOptions) (PruneResult, error) {
	res := PruneResult{BytesBefore: r.Size()}
	if r.ReadOnly {
		return res, errors.New("prune: the record is open read-only")
	}
	if o.KeepRuns < 1 {
		o.KeepRuns = 1
	}
	runs, err := r.Runs(ctx) // newest first
	if err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	res.Runs = len(runs)
	evalSetOf := map[string]string{}
	whole := map[string]bool{}
	shows := map[string]bool{} // runs whose transcripts stay
	var pruned []string
	inScope, finishedSeen := 0, false
	for _, run := range runs {
		evalSetOf[run.ID] = run.EvalSet
		if o.InScope != nil && !o.InScope(run) {
			whole[run.ID], shows[run.ID] = true, true
			continue
		}
		inScope++
		if inScope <= o.KeepTranscripts {
			shows[run.ID] = true
		}
		keep := inScope <= o.KeepRuns || run.Status == status.Running
		if run.Status == status.Finished && !finishedSeen {
			finishedSeen, keep = true, true
		}
		if keep {
			whole[run.ID] = true
			continue
		}
		pruned = append(pruned, run.ID)
	}
	res.RunsKeptWhole = len(whole)
	if len(pruned) == 0 && o.KeepTranscripts >= inScope {
		res.BytesAfter = res.BytesBefore
		return res, nil
	}

	// One scan of the attempts rows: what carry, the ledger and the run
	// reasons need.
	keep := map[rowKey]bool{}
	type best struct {
		at  int64
		key rowKey
	}
	newer := func(m map[string]best, k string, at int64, rk rowKey) {
		b, ok := m[k]
		if !ok || at > b.at || (at == b.at && (rk.run > b.key.run || (rk.run == b.key.run && rk.seq > b.key.seq))) {
			m[k] = best{at, rk}
		}
	}
	judged, passed, early, latest := map[string]best{}, map[string]best{}, map[string]best{}, map[string]best{}
	type own struct {
		key      rowKey
		identity string
	}
	newestIdentity := map[string]best{} // evalset, task, sample → row
	identityOf := map[rowKey]string{}
	sampleOf := map[rowKey]string{}
	var owns []own
	rowsOf := map[string][]rowKey{}
	rows, err := r.db.QueryContext(ctx, `SELECT run_id, seq, task, sample, attempt, status, fingerprint, parts, finished_at, carried_from, reason FROM attempts`)
	if err != nil {
		return res, fmt.Errorf("prune: read attempts: %w", err)
	}
	for rows.Next() {
		var rk rowKey
		var task, sample, st, fp, parts, carried, reason string
		var attempt int
		var at int64
		if err := rows.Scan(&rk.run, &rk.seq, &task, &sample, &attempt, &st, &fp, &parts, &at, &carried, &reason); err != nil {
			rows.Close()
			return res, fmt.Errorf("prune: read attempts: %w", err)
		}
		rowsOf[rk.run] = append(rowsOf[rk.run], rk)
		switch status.Attempt(st) {
		case status.Passed:
			newer(judged, fp, at, rk)
			newer(passed, fp, at, rk)
		case status.Failed:
			newer(judged, fp, at, rk)
		case status.Skipped:
			if strings.HasPrefix(reason, EarlyExitPrefix) {
				newer(early, fp, at, rk)
			}
		}
		newer(latest, task+"\x00"+sample+"\x00"+fmt.Sprint(attempt), at, rk)
		sk := evalSetOf[rk.run] + "\x00" + task + "\x00" + sample
		newer(newestIdentity, sk, at, rk)
		id := history.Identity(task, sample, parts)
		identityOf[rk] = id
		sampleOf[rk] = sk
		if carried == "" && (st == string(status.Passed) || st == string(status.Failed) || st == string(status.Errored)) {
			owns = append(owns, own{rk, id})
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return res, fmt.Errorf("prune: read attempts: %w", err)
	}
	for _, m := range []map[string]best{judged, passed, early, latest} {
		for _, b := range m {
			keep[b.key] = true
		}
	}
	for _, w := range owns {
		if b, ok := newestIdentity[sampleOf[w.key]]; ok && identityOf[b.key] == w.identity {
			keep[w.key] = true
		}
	}
	// What the kept runs' carried attempts point at, and which rows the
	// newest runs show (for their transcripts).
	showRow := map[rowKey]bool{}
	crows, err := r.db.QueryContext(ctx, `SELECT run_id, src_run, src_seq FROM carries`)
	if err != nil {
		return res, fmt.Errorf("prune: read carried attempts: %w", err)
	}
	carriesOf := map[string]int{}
	for crows.Next() {
		var run string
		var src rowKey
		if err := crows.Scan(&run, &src.run, &src.seq); err != nil {
			crows.Close()
			return res, fmt.Errorf("prune: read carried attempts: %w", err)
		}
		carriesOf[run]++
		if whole[run] {
			keep[src] = true
		}
		if shows[run] {
			showRow[src] = true
		}
	}
	err = crows.Err()
	crows.Close()
	if err != nil {
		return res, fmt.Errorf("prune: read carried attempts: %w", err)
	}
	for run := range shows {
		for _, rk := range rowsOf[run] {
			showRow[rk] = true
		}
	}
	for run := range whole {
		for _, rk := range rowsOf[run] {
			keep[rk] = true
		}
	}

	var tx *sql.Tx
	exec := func(q string, args ...any) (int, error) {
		if o.Dry {
			return 0, nil
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		n, _ := res.RowsAffected()
		return int(n), nil
	}
	if !o.Dry {
		if tx, err = r.db.BeginTx(ctx, nil); err != nil {
			return res, fmt.Errorf("prune: %w", Classify(r.Dir, err))
		}
		defer tx.Rollback()
	}
	fail := func(what string, err error) (PruneResult, error) {
		return res, fmt.Errorf("prune: %s: %w", what, Classify(r.Dir, err))
	}
	// Transcripts and artifacts of rows the newest runs do not show.
	for _, t := range []struct {
		table string
		n     *int
	}{{"transcripts", &res.TranscriptsDropped}, {"artifacts", &res.ArtifactsDropped}} {
		trows, err := r.db.QueryContext(ctx, `SELECT DISTINCT run_id, seq FROM `+t.table)
		if err != nil {
			return fail("read "+t.table, err)
		}
		var drop []rowKey
		for trows.Next() {
			var rk rowKey
			if err := trows.Scan(&rk.run, &rk.seq); err != nil {
				trows.Close()
				return fail("read "+t.table, err)
			}
			if !showRow[rk] {
				drop = append(drop, rk)
			}
		}
		err = trows.Err()
		trows.Close()
		if err != nil {
			return fail("read "+t.table, err)
		}
		for _, rk := range drop {
			if o.Dry {
				*t.n++
				continue
			}
			if _, err := exec(`DELETE FROM `+t.table+` WHERE run_id=? AND seq=?`, rk.run, rk.seq); err != nil {
				return fail("drop "+t.table, err)
			}
			*t.n++
		}
	}
	for _, run := range pruned {
		kept := 0
		for _, rk := range rowsOf[run] {
			if keep[rk] {
				kept++
				continue
			}
			res.AttemptsDropped++
			if _, err := exec(`DELETE FROM attempts WHERE run_id=? AND seq=?`, rk.run, rk.seq); err != nil {
				return fail("drop attempts", err)
			}
		}
		res.CarriesDropped += carriesOf[run]
		if _, err := exec(`DELETE FROM carries WHERE run_id=?`, run); err != nil {
			return fail("drop carried attempts", err)
		}
		if o.Dry {
			var n int
			_ = r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM ramp WHERE run_id=?`, run).Scan(&n)
			res.RampDropped += n
		} else {
			n, err := exec(`DELETE FROM ramp WHERE run_id=?`, run)
			if err != nil {
				return fail("drop ramp history", err)
			}
			res.RampDropped += n
		}
		for _, t := range []string{"run_plans", "live"} {
			n, err := exec(`DELETE FROM `+t+` WHERE run_id=?`, run)
			if err != nil && !strings.Contains(err.Error(), "no such table") {
				return fail("drop "+t, err)
			}
			if t == "run_plans" {
				res.PlansDropped += n
			}
		}
		if kept > 0 {
			res.RunsThinned++
			continue
		}
		res.RunsDropped++
		if _, err := exec(`DELETE FROM run_tasks WHERE run_id=?`, run); err != nil && !strings.Contains(err.Error(), "no such table") {
			return fail("drop run tasks", err)
		}
		if _, err := exec(`DELETE FROM runs WHERE id=?`, run); err != nil {
			return fail("drop runs", err)
		}
	}
	if o.Dry {
		res.BytesAfter = res.BytesBefore
		return res, nil
	}
	if err := tx.Commit(); err != nil {
		return fail("commit", err)
	}
	if res.Dropped() {
		// VACUUM rewrites the file without the freed pages: only then
		// does the record (and the cache that keeps it) shrink.
		if _, err := r.db.ExecContext(ctx, `VACUUM`); err != nil {
			return fail("vacuum (is another steward using the record?)", err)
		}
	}
	if err := r.checkpoint(ctx); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	res.BytesAfter = r.Size()
	return res, nil
}

// The action's defaults (and `steward prune`'s): ten runs whole, the
// transcripts of the newest three.
const (
	DefaultKeepRuns        = 10
	DefaultKeepTranscripts = 3
)
