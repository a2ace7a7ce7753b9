package record

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
)

// migrationArtifacts adds the files agents left (a task's artifacts), one
// row per file, gzip-compressed.
const migrationArtifacts = `CREATE TABLE artifacts(
		run_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		path TEXT NOT NULL,
		size INTEGER NOT NULL,
		note TEXT NOT NULL DEFAULT '',
		data BLOB,
		PRIMARY KEY(run_id, seq, path)
	);`

// Artifact is one file an attempt left. Data is nil when it was not kept
// (Note says why: too large, a symlink, unreadable).
type Artifact struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	Note string `json:"note,omitempty"`
	Data []byte `json:"data,omitempty"`
}

// maxArtifactInflate bounds what reading one stored artifact inflates.
const maxArtifactInflate = 64 << 20

// PutArtifacts stores an attempt's artifacts in one transaction.
func (r *DB) PutArtifacts(ctx context.Context, runID string, seq int, arts []Artifact) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record artifacts: %w", err)
	}
	defer tx.Rollback()
	for _, a := range arts {
		var blob []byte
		if a.Data != nil {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(a.Data)
			if err := zw.Close(); err != nil {
				return fmt.Errorf("record artifact %s: %w", a.Path, err)
			}
			blob = b.Bytes()
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO artifacts(run_id, seq, path, size, note, data) VALUES(?,?,?,?,?,?)`,
			runID, seq, a.Path, a.Size, a.Note, blob); err != nil {
			return fmt.Errorf("record artifact %s: %w", a.Path, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record artifacts: %w", err)
	}
	return nil
}

// Artifacts returns an attempt's artifacts, sorted by path. A carried
// attempt (CarriedFrom set) without artifacts of its own shows those of
// the attempt it was carried from.
func (r *DB) Artifacts(ctx context.Context, a Attempt) ([]Artifact, error) {
	out, err := r.artifacts(ctx, `SELECT path, size, note, data FROM artifacts WHERE run_id=? AND seq=? ORDER BY path`, a.RunID, a.Seq)
	if err != nil || len(out) > 0 || a.CarriedFrom == "" {
		return out, err
	}
	return r.artifacts(ctx, `SELECT f.path, f.size, f.note, f.data FROM artifacts f WHERE f.run_id=? AND f.seq=(
		SELECT a.seq FROM attempts a WHERE a.run_id=? AND a.fingerprint=? AND a.carried_from='' ORDER BY a.finished_at DESC LIMIT 1) ORDER BY f.path`,
		a.CarriedFrom, a.CarriedFrom, a.Fingerprint)
}

func (r *DB) artifacts(ctx context.Context, q string, args ...any) ([]Artifact, error) {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if noSuchTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read artifacts: %w", err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		var a Artifact
		var blob []byte
		if err := rows.Scan(&a.Path, &a.Size, &a.Note, &blob); err != nil {
			return nil, fmt.Errorf("read artifacts: %w", err)
		}
		if blob != nil {
			zr, err := gzip.NewReader(bytes.NewReader(blob))
			if err == nil {
				a.Data, err = io.ReadAll(io.LimitReader(zr, maxArtifactInflate))
			}
			if err != nil {
				a.Data, a.Note = nil, "unreadable in the record: "+err.Error()
			}
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
