package run

import (
	"sync"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/status"
)

// tally is what the dispatch stage counts and notes as the run goes:
// written by attempts, task lifecycles and the tend loop; read by the
// panel, the tend loop and, once dispatch has drained, the finish stage.
// Every field is behind mu.
type tally struct {
	mu        sync.Mutex
	published map[int]status.Attempt // seq -> status, for counts
	errWin    []int                  // errored attempts this window, per task
	spentStop bool
	left      []string
	hold      string
	reused    int
	recordErr error
	stopSkips int // attempts a stop (signal) left not started
	full      diskFull
}

func newTally(tasks int) *tally {
	return &tally{published: map[int]status.Attempt{}, errWin: make([]int, tasks)}
}

// mark notes that attempt seq was published with st.
func (t *tally) mark(seq int, st status.Attempt) {
	t.mu.Lock()
	t.published[seq] = st
	t.mu.Unlock()
}

// carried notes the plan's carried and skipped attempts as published.
func (t *tally) carried(p *plan.Plan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range p.Attempts {
		switch a.Action {
		case plan.ActionCarry:
			t.published[a.Seq] = a.From.Status
			t.reused++
		case plan.ActionSkip:
			t.published[a.Seq] = status.Skipped
		}
	}
}

// recordError is the first error of a record that could not take a result.
func (t *tally) recordError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recordErr
}

// leftNow is a copy of what the run leaves undone, so far, scrubbed.
func (d *dispatch) leftNow() []string {
	d.tally.mu.Lock()
	defer d.tally.mu.Unlock()
	return d.scrubber.Strings(append([]string(nil), d.tally.left...))
}
