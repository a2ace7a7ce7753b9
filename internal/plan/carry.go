package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// History is what carry needs from the history.
type History interface {
	Carryable(ctx context.Context, fingerprints []string, passedOnly, earlyExit bool) (history.Candidates, error)
	LatestMany(ctx context.Context, keys []history.Key) (map[history.Key]history.Previous, error)
}

// partNames maps fingerprint parts to the reason a change gives.
var partNames = map[string]string{
	"task":   "task config changed",
	"sample": "sample changed",
	"image":  "image changed",
	"inputs": "input file changed",
	"model":  "model settings changed",
}

// CarryOptions shape carry decisions.
type CarryOptions struct {
	// Rerun carries only passed results (S3).
	Rerun bool
	// EarlyExit is --early-exit; a task's own early_exit counts too.
	EarlyExit bool
}

// Carry decides, for every attempt, whether a judged result with the same
// fingerprint is carried (S2) or the attempt runs, and names why it runs.
// With Rerun only passed results are carried (S3). Under early exit (S4), a
// sample whose pass is carried runs nothing more: its other attempts are
// skipped (ActionSkip), referring to the skip an earlier run recorded when
// there is one. A nil History (no record yet) carries nothing.
func Carry(ctx context.Context, p *Plan, h History, o CarryOptions) error {
	if h == nil {
		return nil
	}
	fps := make([]string, len(p.Attempts))
	for i, a := range p.Attempts {
		fps[i] = a.Fingerprint
	}
	earlyExit := o.EarlyExit
	for _, t := range p.Tasks {
		earlyExit = earlyExit || t.Task.EarlyExit
	}
	c, err := h.Carryable(ctx, fps, o.Rerun, earlyExit)
	if err != nil {
		return err
	}
	type sampleKey struct {
		task   int
		sample string
	}
	passed := map[sampleKey]*Attempt{}
	var keys []history.Key
	for _, a := range p.Attempts {
		a.From, a.CarriedFrom = history.Source{}, ""
		if j, ok := c.Judged[a.Fingerprint]; ok {
			a.Action, a.From, a.CarriedFrom = ActionCarry, j, j.Producer
			a.Reason = "carried " + string(j.Status) + " from " + j.Producer
			if k := (sampleKey{a.Task, a.Sample.ID}); j.Status == status.Passed && passed[k] == nil {
				passed[k] = a
			}
			continue
		}
		a.Action = ActionRun
		keys = append(keys, history.Key{Task: p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number})
	}
	for _, a := range p.Attempts {
		if a.Action != ActionRun || !(o.EarlyExit || p.Tasks[a.Task].Task.EarlyExit) {
			continue
		}
		if pa := passed[sampleKey{a.Task, a.Sample.ID}]; pa != nil {
			a.Action = ActionSkip
			a.Reason = fmt.Sprintf("%s: attempt %d passed (carried from %s)", history.EarlyExitPrefix, pa.Number, pa.CarriedFrom)
			if s, ok := c.EarlyExit[a.Fingerprint]; ok {
				a.From, a.CarriedFrom = s, s.Producer
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	prev, err := h.LatestMany(ctx, keys)
	if err != nil {
		return err
	}
	for _, a := range p.Attempts {
		if a.Action != ActionRun {
			continue
		}
		pr, ok := prev[history.Key{Task: p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number}]
		if !ok {
			a.Reason = "new"
			continue
		}
		a.Reason = runReason(a, &pr, o.Rerun)
	}
	return nil
}

func runReason(a *Attempt, prev *history.Previous, rerun bool) string {
	if prev.Fingerprint == a.Fingerprint {
		switch prev.Status {
		case status.Failed:
			if rerun {
				return "rerun: previous attempt failed"
			}
		case status.Errored, status.Infra:
			return "previous attempt errored"
		case status.Interrupted:
			return "previous attempt interrupted"
		case status.Skipped:
			return "previous attempt skipped"
		}
		return "previous attempt " + string(prev.Status)
	}
	var old map[string]string
	if err := json.Unmarshal([]byte(prev.Parts), &old); err != nil || len(old) == 0 {
		return "fingerprint changed"
	}
	var changed []string
	for k, v := range a.Parts {
		if old[k] != v {
			changed = append(changed, partNames[k])
		}
	}
	if len(changed) == 0 {
		return "fingerprint changed"
	}
	sort.Strings(changed)
	return strings.Join(changed, ", ")
}

// PartsJSON encodes an attempt's parts for the history.
func (a *Attempt) PartsJSON() string {
	b, err := json.Marshal(a.Parts)
	if err != nil {
		panic(fmt.Sprintf("parts: %v", err))
	}
	return string(b)
}
