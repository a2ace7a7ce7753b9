package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Lease is a held shared_state key (S1). Token is the owner's secret: it is
// shown only by `steward lease inspect`.
type Lease struct {
	Key      string
	Token    string
	RunID    string
	Task     string
	PID      int
	Host     string
	Acquired time.Time
}

// ErrLeaseHeld is returned by TryAcquire when another owner holds the key.
var ErrLeaseHeld = errors.New("lease held")

// TryAcquire takes key for (runID, task) if it is free and returns the new
// token. There is no takeover: a key held by a stopped or killed owner stays
// held until Recover.
func (r *DB) TryAcquire(ctx context.Context, key, runID, task string, pid int, host string, now time.Time) (string, error) {
	token := NewID("lt-") + NewID("")
	res, err := r.db.ExecContext(ctx, `INSERT INTO leases(key, token, run_id, task, pid, host, acquired_at) VALUES(?,?,?,?,?,?,?) ON CONFLICT(key) DO NOTHING`,
		key, token, runID, task, pid, host, now.UnixNano())
	if err != nil {
		return "", fmt.Errorf("acquire lease %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", ErrLeaseHeld
	}
	return token, nil
}

// Release frees key if token owns it.
func (r *DB) Release(ctx context.Context, key, token string) error {
	res, err := r.db.ExecContext(ctx, `DELETE FROM leases WHERE key=? AND token=?`, key, token)
	if err != nil {
		return fmt.Errorf("release lease %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("release lease %q: not held by this owner", key)
	}
	return nil
}

// Leases returns held leases (all, or the one named key), token included.
func (r *DB) Leases(ctx context.Context, key string) ([]Lease, error) {
	q, args := `SELECT key, token, run_id, task, pid, host, acquired_at FROM leases ORDER BY key`, []any{}
	if key != "" {
		q, args = `SELECT key, token, run_id, task, pid, host, acquired_at FROM leases WHERE key=?`, []any{key}
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var at int64
		if err := rows.Scan(&l.Key, &l.Token, &l.RunID, &l.Task, &l.PID, &l.Host, &at); err != nil {
			return nil, err
		}
		l.Acquired = time.Unix(0, at)
		out = append(out, l)
	}
	return out, rows.Err()
}

// Holder describes the owner of key without its token ("" when free).
func (r *DB) Holder(ctx context.Context, key string) (Lease, bool, error) {
	var l Lease
	var at int64
	err := r.db.QueryRowContext(ctx, `SELECT key, run_id, task, pid, host, acquired_at FROM leases WHERE key=?`, key).Scan(&l.Key, &l.RunID, &l.Task, &l.PID, &l.Host, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("read lease %q: %w", key, err)
	}
	l.Acquired = time.Unix(0, at)
	return l, true, nil
}

// Recover frees key when token matches its owner's; a wrong token is refused.
func (r *DB) Recover(ctx context.Context, key, token string) error {
	l, held, err := r.Holder(ctx, key)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("recover lease %q: it is not held", key)
	}
	res, err := r.db.ExecContext(ctx, `DELETE FROM leases WHERE key=? AND token=?`, key, token)
	if err != nil {
		return fmt.Errorf("recover lease %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("recover lease %q: the token does not match the owner's (run %s); see `steward lease inspect %s`", key, l.RunID, key)
	}
	return nil
}
