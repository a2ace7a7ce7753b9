package record

import (
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// Cost is what one attempt a run ran itself (not carried) cost: the
// forecast's history (internal/forecast). Skipped and interrupted attempts
// are not read.
type Cost struct {
	Task, Sample string
	// Parts is the fingerprint's parts (JSON), for the model part.
	Parts            string
	Duration         time.Duration
	Tokens, Requests int64
	USD              float64
	Started, Ended   time.Time
}

// Costs reads the own attempts of run id, without their logs and answers.
func (r *DB) Costs(ctx context.Context, id string) ([]Cost, error) {
	// A model judge's spend is the attempt's too: the forecast counts it.
	spent := `input_tokens+output_tokens, requests, cost_usd`
	if hasGrading(r.version) {
		spent = `input_tokens+output_tokens+grading_input_tokens+grading_output_tokens, requests+grading_requests, cost_usd+grading_cost_usd`
	}
	rows, err := r.db.QueryContext(ctx, `SELECT task, sample, parts, duration_ns, `+spent+`, started_at, finished_at
		FROM attempts WHERE run_id=? AND carried_from='' AND status NOT IN (?, ?) ORDER BY seq`, id, status.Skipped, status.Interrupted)
	if err != nil {
		return nil, fmt.Errorf("read the costs of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []Cost
	for rows.Next() {
		var c Cost
		var d, s, f int64
		if err := rows.Scan(&c.Task, &c.Sample, &c.Parts, &d, &c.Tokens, &c.Requests, &c.USD, &s, &f); err != nil {
			return nil, fmt.Errorf("read the costs of run %s: %w", id, err)
		}
		c.Duration = time.Duration(d)
		if s > 0 {
			c.Started = time.Unix(0, s)
		}
		if f > 0 {
			c.Ended = time.Unix(0, f)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
