package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// migrationTranscripts adds the transcripts the gateway captured, one
// compressed blob per attempt (internal/transcript's encoding; the record
// does not look inside).
const migrationTranscripts = `CREATE TABLE transcripts(
		run_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		calls INTEGER NOT NULL,
		raw_bytes INTEGER NOT NULL,
		truncated INTEGER NOT NULL DEFAULT 0,
		data BLOB NOT NULL,
		PRIMARY KEY(run_id, seq)
	);`

// TranscriptInfo describes a stored transcript.
type TranscriptInfo struct {
	Calls     int   // model calls in it
	RawBytes  int64 // uncompressed captured content
	Truncated bool  // a cap cut it
}

// PutTranscript stores one attempt's transcript blob (replacing an earlier one).
func (r *DB) PutTranscript(ctx context.Context, runID string, seq int, info TranscriptInfo, blob []byte) error {
	_, err := r.db.ExecContext(ctx, `INSERT OR REPLACE INTO transcripts(run_id, seq, calls, raw_bytes, truncated, data) VALUES(?,?,?,?,?,?)`,
		runID, seq, info.Calls, info.RawBytes, b2i(info.Truncated), blob)
	if err != nil {
		return fmt.Errorf("record transcript %s/%d: %w", runID, seq, err)
	}
	return nil
}

// Transcript returns the transcript blob of a run's attempt, or nil when
// none was captured.
func (r *DB) Transcript(ctx context.Context, runID string, seq int) ([]byte, error) {
	var blob []byte
	err := r.db.QueryRowContext(ctx, `SELECT data FROM transcripts WHERE run_id=? AND seq=?`, runID, seq).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) || noSuchTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read transcript %s/%d: %w", runID, seq, err)
	}
	return blob, nil
}

// TranscriptOf returns the transcript blob of a run's attempt with its
// description, or a nil blob; a carried attempt's falls back to the
// transcript of the attempt it was carried from (for merging records).
func (r *DB) TranscriptOf(ctx context.Context, a Attempt) (TranscriptInfo, []byte, error) {
	var info TranscriptInfo
	var blob []byte
	var trunc int
	err := r.db.QueryRowContext(ctx, `SELECT calls, raw_bytes, truncated, data FROM transcripts WHERE run_id=? AND seq=?`, a.RunID, a.Seq).Scan(&info.Calls, &info.RawBytes, &trunc, &blob)
	if errors.Is(err, sql.ErrNoRows) && a.CarriedFrom != "" {
		err = r.db.QueryRowContext(ctx, `SELECT t.calls, t.raw_bytes, t.truncated, t.data FROM transcripts t JOIN attempts a ON a.run_id=t.run_id AND a.seq=t.seq
			WHERE a.run_id=? AND a.fingerprint=? AND a.carried_from='' ORDER BY a.finished_at DESC LIMIT 1`, a.CarriedFrom, a.Fingerprint).Scan(&info.Calls, &info.RawBytes, &trunc, &blob)
	}
	if errors.Is(err, sql.ErrNoRows) || noSuchTable(err) {
		return info, nil, nil
	}
	if err != nil {
		return info, nil, fmt.Errorf("read transcript %s/%d: %w", a.RunID, a.Seq, err)
	}
	info.Truncated = trunc != 0
	return info, blob, nil
}

// Version is a number that changes whenever the record gains an attempt,
// a transcript, an artifact, a ramp decision or a run state (for `steward view` to
// refresh a live run's page).
func (r *DB) Version(ctx context.Context) (string, error) {
	var a, t, f, rp, runs int64
	var fin sql.NullInt64
	err := r.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM attempts), (SELECT COUNT(*) FROM transcripts), (SELECT COUNT(*) FROM artifacts),
		(SELECT COUNT(*) FROM ramp), (SELECT COUNT(*) FROM runs), (SELECT MAX(COALESCE(finished_at,0)) FROM runs)`).Scan(&a, &t, &f, &rp, &runs, &fin)
	if noSuchTable(err) {
		// A record from before transcripts, read without migrating it.
		err = r.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM attempts), (SELECT COUNT(*) FROM ramp), (SELECT COUNT(*) FROM runs),
			(SELECT MAX(COALESCE(finished_at,0)) FROM runs)`).Scan(&a, &rp, &runs, &fin)
	}
	if err != nil {
		return "", fmt.Errorf("read record version: %w", err)
	}
	return fmt.Sprintf("%d.%d.%d.%d.%d.%d", a, t, f, rp, runs, fin.Int64), nil
}

// noSuchTable tells a query on a table the record does not have yet: a
// record written by an older steward, opened read-only (readers never
// migrate), simply holds no transcripts or artifacts.
func noSuchTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}
