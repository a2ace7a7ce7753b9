package run

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sched"
	"github.com/steward-evals/steward/internal/status"
	"github.com/steward-evals/steward/internal/transcript"
)

// runner executes attempts: in this process (*attempt.Executor) or in
// worker processes, one per task by default (W1: *worker.Pool).
type runner interface {
	// Run runs one try of a with its gateway tokens and returns its row.
	Run(ctx context.Context, a *plan.Attempt, tok attempt.Tokens) record.Attempt
	// CloseTask removes the task's pooled sandboxes; false when some failed.
	CloseTask(ctx context.Context, task int) bool
	// TakeArtifacts returns (and forgets) the artifacts of attempt seq.
	TakeArtifacts(seq int) []record.Artifact
}

// hooks connect one attempt's gateway token to the scheduler. The gateway
// calls them per request: any number of the attempt's requests may back off
// at once (sched counts them), and no scheduler error is dropped: a refused
// BackoffStart is reported and makes the request's BackoffEnd fail.
type hooks struct {
	d    *sched.Dispatcher
	id   int
	name string
	logf func(format string, args ...any)

	mu      sync.Mutex
	refused int // BackoffStarts the scheduler refused, not yet answered by a BackoffEnd
}

func (h *hooks) BackoffStart() {
	if err := h.d.Backoff(h.id); err != nil {
		h.mu.Lock()
		h.refused++
		h.mu.Unlock()
		h.logf("steward: %s: backoff: %v\n", h.name, err)
	}
}

func (h *hooks) BackoffEnd(ctx context.Context) error {
	h.mu.Lock()
	refused := h.refused > 0
	if refused {
		h.refused--
	}
	h.mu.Unlock()
	if refused {
		return fmt.Errorf("%s: the scheduler refused its backoff", h.name)
	}
	if err := h.d.Resume(ctx, h.id); err != nil {
		if ctx.Err() == nil {
			h.logf("steward: %s: resume after backoff: %v\n", h.name, err)
		}
		return err
	}
	return nil
}

func (h *hooks) Usage(in, out int64, cost float64) {}

// runItem runs one admitted attempt (retrying infrastructure errors),
// publishes it, frees its slots, and applies early exit and the budget stop.
func (l *launcher) runItem(ctx context.Context, it sched.Item) {
	a := l.bySeq(l.seqOf[it.ID])
	row, tr := l.tryAttempt(ctx, it, a)
	arts := l.runner.TakeArtifacts(a.Seq)
	if err := l.publish(context.Background(), row); err != nil {
		// The record cannot take results (a full disk): what runs now could
		// not be kept, so nothing more is dispatched.
		// The error is said once, when the launch ends (finishOnRecordError).
		l.resultLost(err)
		l.finishItem(it.ID)
		l.tasks.check()
		return
	}
	l.keepTranscript(row, tr)
	l.keepArtifacts(row, arts)
	l.mu.Lock()
	l.published[a.Seq] = row.Status
	if row.Status == status.Errored || row.Status == status.Infra {
		l.errWin[a.Task]++
	}
	l.mu.Unlock()
	l.afterResult(a, row)
	l.finishItem(it.ID)
	l.tasks.check()
}

// tryAttempt runs an attempt with its gateway token, retrying
// infrastructure errors, and returns its row (usage charged, secrets
// scrubbed, the supervisor's fingerprint) and the gateway's transcript.
func (l *launcher) tryAttempt(ctx context.Context, it sched.Item, a *plan.Attempt) (record.Attempt, *transcript.Transcript) {
	t := l.p.Tasks[a.Task].Task
	retries := 1
	if t.Retries != nil {
		retries = *t.Retries
	}
	gwID := l.runID + "/" + strconv.Itoa(a.Seq)
	token := l.gw.Issue(gwID, &hooks{d: l.disp, id: it.ID, name: a.ID(l.p), logf: func(f string, args ...any) { fmt.Fprintf(l.opts.Stderr, f, args...) }})
	l.gw.SetQuota(gwID, quotaFor(t)) // its limits, before its agent starts (limits.go)
	tok := attempt.Tokens{Agent: token}
	gradeID := gwID + "/grading"
	if mg := t.Scorer.ModelGraded; mg != nil {
		// The model judge's own token: its own prices, none of the agent's
		// limits, inside --budget; it never enters a sandbox.
		tok.Grading = l.gw.Issue(gradeID, nil)
		p := mg.GraderPrices(l.es.Model.Prices)
		l.gw.SetPrices(gradeID, gateway.Prices{InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok})
	}
	var row record.Attempt
	var why []string
	for try := 0; ; try++ {
		row = l.runner.Run(ctx, a, tok)
		row.Tries, row.RetryReasons = try+1, why
		// A try whose agent ran to its end is never retried: a verdict, or
		// an error after the agent's work, is the attempt's (issue 23 item 2).
		if row.Status != status.Infra || row.ReachedJudging || try >= retries || ctx.Err() != nil {
			break
		}
		why = append(why, row.Reason)
		fmt.Fprintf(l.opts.Stderr, "steward: %s: infrastructure error, retrying (%d of %d): %s\n", a.ID(l.p), try+1, retries, l.scrub(row.Reason))
	}
	l.gw.Revoke(token)
	if tok.Grading != "" {
		l.gw.Revoke(tok.Grading)
	}
	// Usage of a stream that just ended is charged after its last byte, and a
	// stream the agent cut is read on for up to CutDrain: wait for it.
	dctx, cancel := context.WithTimeout(context.Background(), gateway.DefaultCutDrain+10*time.Second)
	_ = l.gw.Drain(dctx, gwID)
	if tok.Grading != "" {
		_ = l.gw.Drain(dctx, gradeID)
	}
	cancel()
	if u, ok := l.gw.Usage(gwID); ok {
		row.InputTokens, row.OutputTokens, row.CostUSD, row.Requests = u.InputTokens, u.OutputTokens, u.CostUSD, u.Requests
		judgeLimit(&row, u, t) // limits.go
		if gu, ok := l.gw.Usage(gradeID); ok && tok.Grading != "" {
			row.Grading = record.Spend{InputTokens: gu.InputTokens, OutputTokens: gu.OutputTokens, CostUSD: gu.CostUSD, Requests: gu.Requests}
			// The grader's calls the provider failed or the budget refused
			// are the provider's doing too.
			u.BudgetRefused += gu.BudgetRefused
			u.UpstreamFailed += gu.UpstreamFailed
			u.Requests += gu.Requests
		}
		providerCaused(&row, u)
	}
	l.scrubRow(&row)
	row.AgentOutput = l.scrub(row.AgentOutput) // the agent's output beside its verdict
	for i := range row.RetryReasons {
		row.RetryReasons[i] = l.scrub(row.RetryReasons[i])
	}
	// The supervisor's plan holds the fingerprint with the resolved image ID.
	row.Fingerprint, row.Parts = a.Fingerprint, a.PartsJSON()
	return row, withGrading(l.gw.Transcript(gwID), l.gw.Transcript(gradeID), tok.Grading != "")
}

// afterResult applies early exit (S4) and the budget stop (S5) once a's row
// is published, before its slot is freed (so no attempt slips in).
func (l *launcher) afterResult(a *plan.Attempt, row record.Attempt) {
	t := l.p.Tasks[a.Task].Task
	if row.Status == status.Passed && (t.EarlyExit || l.opts.EarlyExit) {
		var ids []int
		l.disp.With(func(s *sched.State) {
			for _, b := range l.p.Attempts {
				if b.Task == a.Task && b.Sample == a.Sample && b.Action == plan.ActionRun {
					if s.Cancel(l.itemOf[b.Seq]) {
						ids = append(ids, l.itemOf[b.Seq])
					}
				}
			}
		})
		l.publishSkipped(ids, fmt.Sprintf("early exit: attempt %d passed", a.Number))
	}
	// When the budget is spent, or the gateway refused a request the rest
	// of it could not cover, no new attempt starts.
	if b := l.opts.BudgetUSD; b > 0 && (l.gw.Spent() >= b || l.gw.BudgetRefusals() > 0) {
		l.mu.Lock()
		first := !l.spentStop
		l.spentStop = true
		l.mu.Unlock()
		if first {
			fmt.Fprintf(l.opts.Stderr, "steward: budget spent ($%.4f of $%.2f; the gateway refuses model calls it cannot cover): no new attempts start\n", l.gw.Spent(), b)
		}
		l.cancelQueued(fmt.Sprintf("budget spent ($%.2f)", b))
	}
}

// finishItem frees an attempt's slots; a refusal is a scheduler bug, said aloud.
func (l *launcher) finishItem(id int) {
	if err := l.disp.Finish(id); err != nil {
		fmt.Fprintf(l.opts.Stderr, "steward: %v\n", err)
	}
}
