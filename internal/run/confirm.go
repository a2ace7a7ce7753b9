package run

import (
	"context"
	"strings"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
)

// confirm adds --confirm's attempts to the whole plan (before the shard
// filter: a sample's attempts stay together, and Seqs stay the whole eval
// set's): ConfirmAttempts more of every selected sample, numbered after
// the highest attempt number the record holds at the sample's identity
// (the ledger, over every eval set of the record: a number no row holds).
// Workers are handed them with the rest of the plan.
func (ld *loaded) confirm(ctx context.Context) ([]plan.Extra, error) {
	o, p := ld.opts, ld.p
	if o.ConfirmAttempts < 0 {
		return nil, badInput("--confirm must not be negative, got %d", o.ConfirmAttempts)
	}
	if o.ConfirmAttempts == 0 {
		if len(o.ConfirmSamples) > 0 {
			return nil, badInput("--confirm-samples %s: say how many more attempts with --confirm N", strings.Join(o.ConfirmSamples, ","))
		}
		return nil, nil
	}
	if o.EarlyExit {
		return nil, badInput("--confirm %d with --early-exit: early exit would skip the confirming attempts of every sample whose pass is carried; drop one of them", o.ConfirmAttempts)
	}
	only, err := confirmSelection(p, o.ConfirmSamples)
	if err != nil {
		return nil, err
	}
	for _, a := range p.Attempts {
		t := p.Tasks[a.Task].Task
		if t.EarlyExit && (only == nil || only(t.Name, a.Sample.ID)) {
			return nil, badInput("--confirm %d: task %s has early_exit: true, which would skip the confirming attempts of every sample whose pass is carried; leave it out (--task, --confirm-samples)", o.ConfirmAttempts, t.Name)
		}
	}
	held := map[string]int{}
	if ld.db != nil {
		rows, err := ld.db.Ledger(ctx, "")
		if err != nil {
			return nil, record.Classify(ld.es.Fleet.Record, err)
		}
		for _, r := range rows {
			held[r.Identity] = max(held[r.Identity], r.MaxAttempt)
		}
	}
	return p.Confirm(o.ConfirmAttempts, only, func(_, _, identity string) int { return held[identity] }), nil
}

// confirmSelection reads --confirm-samples ("task/sample", split at the
// first slash: task names hold none) into the samples Confirm adds to; an
// entry the plan does not hold is bad input. No entries select every sample
// of the plan (which --task and --sample already filtered).
func confirmSelection(p *plan.Plan, list []string) (func(task, sample string) bool, error) {
	if len(list) == 0 {
		return nil, nil
	}
	have := map[string]bool{}
	for _, a := range p.Attempts {
		have[p.Tasks[a.Task].Task.Name+"/"+a.Sample.ID] = true
	}
	want := map[string]bool{}
	for _, e := range list {
		e = strings.TrimSpace(e)
		task, sample, ok := strings.Cut(e, "/")
		if !ok || task == "" || sample == "" {
			return nil, badInput("--confirm-samples %q: want task/sample, e.g. arithmetic/add", e)
		}
		if !have[e] {
			return nil, badInput("--confirm-samples %s: the plan holds no sample %s of task %s (mind --task and --sample)", e, sample, task)
		}
		want[e] = true
	}
	return func(task, sample string) bool { return want[task+"/"+sample] }, nil
}
