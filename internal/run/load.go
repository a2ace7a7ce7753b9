package run

import (
	"context"
	"errors"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
)

// loaded is what the load stage made: the plan (attempts in discovery
// order with their fingerprints and group lanes) and the record. The plan
// is edited by internal/plan's methods in the choose and carry stages
// (one goroutine, in order) and only read from begin on.
type loaded struct {
	*launch
	p  *plan.Plan
	db *record.DB // nil for --dry without a record
}

// load builds the plan from the eval set the launch was given (read once:
// workers are handed their slice of this plan) and opens the record; --dry
// only reads it (and a missing record means no history).
func load(ctx context.Context, l *launch) (*loaded, error) {
	p, err := plan.Build(l.es, plan.Options{TaskGlobs: l.opts.TaskGlobs, SampleGlobs: l.opts.SampleGlobs})
	if err != nil {
		return nil, badInput("%v", err)
	}
	if len(p.Attempts) == 0 {
		return nil, badInput("the filters select no attempts (tasks %v, samples %v)", l.opts.TaskGlobs, l.opts.SampleGlobs)
	}
	var db *record.DB
	if l.opts.Dry {
		db, err = record.OpenReadOnly(ctx, l.es.Fleet.Record)
		if errors.Is(err, record.ErrNoRecord) {
			db, err = nil, nil
		}
	} else {
		db, err = record.Open(ctx, l.es.Fleet.Record)
	}
	if err != nil {
		return nil, err
	}
	return &loaded{launch: l, p: p, db: db}, nil
}

// publish writes one attempt's row to the record (S6), scrubbed whatever
// produced it (an attempt, a host hook, a worker's end), and tells Observe.
func (ld *loaded) publish(ctx context.Context, row record.Attempt) error {
	ld.scrubRow(&row)
	if err := ld.db.Publish(ctx, row); err != nil {
		return err
	}
	ld.observe(Event{Attempt: &row})
	return nil
}
