package plan

import (
	"fmt"
	"sort"

	"github.com/steward-evals/steward/internal/history"
)

// Extra is an attempt Confirm added beyond its task's planned attempts:
// sample Sample of task Task, attempt number Number.
type Extra struct {
	Task   string `json:"task"`
	Sample string `json:"sample"`
	Number int    `json:"number"`
}

// Identity is the attempt's sample identity: what decides its outcome
// apart from its number (history.Identity of its task, sample and parts,
// the value the record's ledger computes from the row's stored parts).
func (a *Attempt) Identity(p *Plan) string {
	return history.Identity(p.Tasks[a.Task].Task.Name, a.Sample.ID, a.PartsJSON())
}

// Confirm adds n more attempts of every sample only selects (nil: every
// sample of the plan), numbered after the highest of the sample's planned
// attempt numbers and of highest(task, sample, identity): the highest
// attempt number the record holds at the sample's identity (the ledger's
// MaxAttempt; 0 when it holds none). So a nightly `--confirm 5` adds five
// new observations every night instead of carrying the night before's:
// an extra attempt's fingerprint includes its number, and the number is
// new. The planned attempts are untouched (they still carry when judged).
//
// Call it on the whole plan, after SetImageIDs (the identity includes the
// image) and before the shard filter: Seqs are renumbered in discovery
// order. It returns the attempts it added; AddExtras of them on a plan
// Build made of the same eval set and options adds the same attempts with
// the same Seqs (a worker's plan).
func (p *Plan) Confirm(n int, only func(task, sample string) bool, highest func(task, sample, identity string) int) []Extra {
	if n < 1 {
		return nil
	}
	type key struct {
		task   int
		sample string
	}
	top := map[key]int{}
	var first []*Attempt // each sample's first attempt, in discovery order
	for _, a := range p.Attempts {
		k := key{a.Task, a.Sample.ID}
		if _, seen := top[k]; !seen {
			first = append(first, a)
		}
		top[k] = max(top[k], a.Number)
	}
	var extras []Extra
	for _, a := range first {
		task := p.Tasks[a.Task].Task.Name
		if only != nil && !only(task, a.Sample.ID) {
			continue
		}
		from := top[key{a.Task, a.Sample.ID}]
		if highest != nil {
			from = max(from, highest(task, a.Sample.ID, a.Identity(p)))
		}
		for i := 1; i <= n; i++ {
			extras = append(extras, Extra{Task: task, Sample: a.Sample.ID, Number: from + i})
		}
	}
	if err := p.AddExtras(extras); err != nil {
		panic(fmt.Sprintf("confirm: %v", err)) // every extra names a sample of p
	}
	return extras
}

// AddExtras inserts extra attempts into the plan, each after its sample's
// attempts (ordered by number), as ordinary attempts to run: the sample's
// lane and parts, a fingerprint with the extra's number. Seqs are
// renumbered in discovery order and each task's Order is rebuilt as Build
// makes it (a group member's attempts stay consecutive, D3). An extra
// naming a sample the plan does not hold, or a number the sample already
// has, is an error and changes nothing.
func (p *Plan) AddExtras(extras []Extra) error {
	if len(extras) == 0 {
		return nil
	}
	type key struct{ task, sample string }
	last := map[key]*Attempt{}
	numbers := map[key]map[int]bool{}
	for _, a := range p.Attempts {
		k := key{p.Tasks[a.Task].Task.Name, a.Sample.ID}
		last[k] = a
		if numbers[k] == nil {
			numbers[k] = map[int]bool{}
		}
		numbers[k][a.Number] = true
	}
	add := map[key][]Extra{}
	for _, e := range extras {
		k := key{e.Task, e.Sample}
		if last[k] == nil {
			return fmt.Errorf("attempt %s/%s#%d: the plan holds no sample %s of task %s", e.Task, e.Sample, e.Number, e.Sample, e.Task)
		}
		if e.Number < 1 || numbers[k][e.Number] {
			return fmt.Errorf("attempt %s/%s#%d: the sample already has attempt %d (or it is not a positive number)", e.Task, e.Sample, e.Number, e.Number)
		}
		numbers[k][e.Number] = true
		add[k] = append(add[k], e)
	}
	var out []*Attempt
	for _, a := range p.Attempts {
		out = append(out, a)
		k := key{p.Tasks[a.Task].Task.Name, a.Sample.ID}
		if last[k] != a {
			continue
		}
		es := add[k]
		sort.Slice(es, func(i, j int) bool { return es[i].Number < es[j].Number })
		for _, e := range es {
			parts := make(map[string]string, len(a.Parts))
			for n, v := range a.Parts {
				parts[n] = v
			}
			out = append(out, &Attempt{
				Task: a.Task, Sample: a.Sample, Number: e.Number, Lane: a.Lane, Parts: parts,
				Fingerprint: attemptFingerprint(parts, e.Number, e.Task, e.Sample),
				Action:      ActionRun, Reason: "new",
			})
		}
	}
	p.Attempts = out
	for _, t := range p.Tasks {
		t.Order = t.Order[:0]
	}
	for i, a := range p.Attempts {
		a.Seq = i
		t := p.Tasks[a.Task]
		t.Order = append(t.Order, i)
	}
	for _, t := range p.Tasks {
		orderLanes(p, t)
	}
	return nil
}
