package run

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/steward-evals/steward/internal/account"
	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// One admitted attempt in the dispatch stage: its gateway tokens (whose
// backoff hooks release and re-take its budget slot), its tries through
// the runner, its usage charged and its limits judged, its row scrubbed and
// published, then early exit and the budget stop, and its slots freed.

// runItem runs one admitted attempt (retrying infrastructure errors),
// publishes it, frees its slots, and applies early exit and the budget stop.
func (d *dispatch) runItem(ctx context.Context, it sched.Item) {
	a := d.p.BySeq(d.sp.seqOf[it.ID])
	row, tr := d.tryAttempt(ctx, it, a)
	arts := d.runner.TakeArtifacts(a.Seq)
	if err := d.publish(context.Background(), row); err != nil {
		// The record cannot take results (a full disk): what runs now could
		// not be kept, so nothing more is dispatched.
		// The error is said once, when the launch ends (finishOnRecordError).
		d.resultLost(err)
		d.finishItem(it.ID)
		d.tasks.check()
		return
	}
	d.keepTranscript(row, tr)
	d.keepArtifacts(row, arts)
	d.tally.mu.Lock()
	d.tally.published[a.Seq] = row.Status
	if row.Status == status.Errored || row.Status == status.Infra {
		d.tally.errWin[a.Task]++
	}
	d.tally.mu.Unlock()
	d.afterResult(a, row)
	d.finishItem(it.ID)
	d.tasks.check()
}

// tryAttempt runs an attempt with its gateway tokens (internal/account),
// retrying infrastructure errors, and returns its row (usage charged,
// secrets scrubbed, the supervisor's fingerprint) and the gateway's
// transcript.
func (d *dispatch) tryAttempt(ctx context.Context, it sched.Item, a *plan.Attempt) (record.Attempt, *transcript.Transcript) {
	hooks := &sched.Hooks{D: d.disp, ID: it.ID, Name: a.ID(d.p), Logf: func(f string, args ...any) { fmt.Fprintf(d.opts.Stderr, f, args...) }}
	acct := account.Open(d.gw, account.ID(d.runID, a.Seq), d.p.Tasks[a.Task].Task, hooks, d.es.Model.Prices)
	row := d.tries(ctx, a, acct.Tokens())
	acct.Close(&row)
	d.scrubRow(&row)
	row.AgentOutput = d.scrub(row.AgentOutput) // the agent's output beside its verdict
	for i := range row.RetryReasons {
		row.RetryReasons[i] = d.scrub(row.RetryReasons[i])
	}
	// The supervisor's plan holds the fingerprint with the resolved image ID.
	row.Fingerprint, row.Parts = a.Fingerprint, a.PartsJSON()
	return row, acct.Transcript()
}

// tries runs a through the runner, again after an infrastructure error up
// to the task's retries, and returns the last try's row.
func (d *dispatch) tries(ctx context.Context, a *plan.Attempt, tok attempt.Tokens) record.Attempt {
	retries := 1
	if r := d.p.Tasks[a.Task].Task.Retries; r != nil {
		retries = *r
	}
	var why []string
	for try := 0; ; try++ {
		row := d.runner.Run(ctx, a, tok)
		row.Tries, row.RetryReasons = try+1, why
		// A try whose agent ran to its end is never retried: a verdict, or
		// an error after the agent's work, is the attempt's (issue 23 item 2).
		if row.Status != status.Infra || row.ReachedJudging || try >= retries || ctx.Err() != nil {
			return row
		}
		why = append(why, row.Reason)
		fmt.Fprintf(d.opts.Stderr, "steward: %s: infrastructure error, retrying (%d of %d): %s\n", a.ID(d.p), try+1, retries, d.scrub(row.Reason))
	}
}

// afterResult applies early exit (S4) and the budget stop (S5) once a's row
// is published, before its slot is freed (so no attempt slips in).
func (d *dispatch) afterResult(a *plan.Attempt, row record.Attempt) {
	t := d.p.Tasks[a.Task].Task
	if row.Status == status.Passed && (t.EarlyExit || d.opts.EarlyExit) {
		var ids []int
		d.disp.With(func(s *sched.State) {
			for _, b := range d.p.Attempts {
				if b.Task == a.Task && b.Sample == a.Sample && b.Action == plan.ActionRun {
					if s.Cancel(d.sp.itemOf[b.Seq]) {
						ids = append(ids, d.sp.itemOf[b.Seq])
					}
				}
			}
		})
		d.publishSkipped(ids, fmt.Sprintf("early exit: attempt %d passed", a.Number))
	}
	// When the budget is spent, or the gateway refused a request the rest
	// of it could not cover, no new attempt starts.
	if b := d.opts.BudgetUSD; b > 0 && (d.gw.Spent() >= b || d.gw.BudgetRefusals() > 0) {
		d.tally.mu.Lock()
		first := !d.tally.spentStop
		d.tally.spentStop = true
		d.tally.mu.Unlock()
		if first {
			fmt.Fprintf(d.opts.Stderr, "steward: budget spent ($%.4f of $%.2f; the gateway refuses model calls it cannot cover): no new attempts start\n", d.gw.Spent(), b)
		}
		d.cancelQueued(fmt.Sprintf("budget spent ($%.2f)", b))
	}
}

// finishItem frees an attempt's slots; a refusal is a scheduler bug, said aloud.
func (d *dispatch) finishItem(id int) {
	if err := d.disp.Finish(id); err != nil {
		fmt.Fprintf(d.opts.Stderr, "steward: %v\n", err)
	}
}

// modelSettings is model.settings as JSON, or "" when there are none.
func modelSettings(es *evalset.EvalSet) string {
	if len(es.Model.Settings) == 0 {
		return ""
	}
	b, err := json.Marshal(es.Model.Settings)
	if err != nil {
		return ""
	}
	return string(b)
}

// bindToken binds an attempt's token to its sandbox's address (12.5).
func (d *dispatch) bindToken(_ context.Context, token string, ip netip.Addr) error {
	return d.gw.Bind(token, ip)
}
