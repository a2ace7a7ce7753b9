package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/steward-evals/steward/internal/record"
)

// History is what carry needs from the record.
type History interface {
	Judged(ctx context.Context, fingerprint string, passedOnly bool) (*record.Attempt, error)
	Latest(ctx context.Context, task, sample string, attempt int) (*record.Attempt, error)
}

// partNames maps fingerprint parts to the reason a change gives.
var partNames = map[string]string{
	"task":   "task config changed",
	"sample": "sample changed",
	"image":  "image changed",
	"inputs": "input file changed",
	"model":  "model settings changed",
}

// Carry decides, for every attempt, whether a judged result with the same
// fingerprint is carried (S2) or the attempt runs, and names why it runs.
// With rerun only passed results are carried (S3).
func Carry(ctx context.Context, p *Plan, h History, rerun bool) error {
	for _, a := range p.Attempts {
		task := p.Tasks[a.Task].Task.Name
		j, err := h.Judged(ctx, a.Fingerprint, rerun)
		if err != nil {
			return err
		}
		if j != nil {
			a.Action, a.CarriedFrom, a.CarriedSeq = ActionCarry, j.RunID, j.Seq
			a.Reason = "carried " + j.Status + " from " + j.RunID
			continue
		}
		a.Action = ActionRun
		prev, err := h.Latest(ctx, task, a.Sample.ID, a.Number)
		if err != nil {
			return err
		}
		a.Reason = runReason(a, prev, rerun)
	}
	return nil
}

func runReason(a *Attempt, prev *record.Attempt, rerun bool) string {
	if prev == nil {
		return "new"
	}
	if prev.Fingerprint == a.Fingerprint {
		switch prev.Status {
		case "failed":
			if rerun {
				return "rerun: previous attempt failed"
			}
		case "errored", "infra":
			return "previous attempt errored"
		case "interrupted":
			return "previous attempt interrupted"
		case "skipped":
			return "previous attempt skipped"
		}
		return "previous attempt " + prev.Status
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

// PartsJSON encodes an attempt's parts for the record.
func (a *Attempt) PartsJSON() string {
	b, err := json.Marshal(a.Parts)
	if err != nil {
		panic(fmt.Sprintf("parts: %v", err))
	}
	return string(b)
}
