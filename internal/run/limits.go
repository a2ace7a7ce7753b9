package run

import (
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/account"
)

// Per-attempt limits and the agent's deadline (issue 30 items 3 and 4).
//
// The supervisor holds the gateway, so it sets each attempt's quota
// (internal/account): the model-side limits (tokens, model calls, USD)
// before the attempt is handed to its runner, and the agent's deadline once
// the runner knows it (the attempt's sandbox is up and its setup begins:
// workers say so with a `deadline` message). After the agent ends its
// deadline is lifted again, so a scorer calling the model is not refused
// for the agent's time. The attempt's side (the deadline fixed, told and
// lifted; an agent stopped at it) is internal/attempt's limits.go.

// setDeadline gives attempt seq's quota the agent's deadline (zero: none).
func (d *dispatch) setDeadline(_ context.Context, seq int, at time.Time) error {
	a := d.p.BySeq(seq)
	if a == nil {
		return fmt.Errorf("set the deadline of attempt %d: no such attempt", seq)
	}
	account.SetDeadline(d.gw, account.ID(d.runID, seq), d.p.Tasks[a.Task].Task, at)
	return nil
}
