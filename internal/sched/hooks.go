package sched

import (
	"context"
	"fmt"
	"sync"
)

// Hooks connect one admitted item's model requests to the dispatcher:
// they are the gateway's per-request hooks (gateway.AttemptHooks) of the
// item's token. A request that waits out a 429 releases the item's budget
// slot and takes it again before it goes on (C6). Any number of the item's
// requests may back off at once (the state counts them), and no error of
// the dispatcher's is dropped: a refused BackoffStart is said (Logf) and
// makes that request's BackoffEnd fail.
type Hooks struct {
	D    *Dispatcher
	ID   int
	Name string // the item's name in what Logf says
	Logf func(format string, args ...any)

	mu      sync.Mutex
	refused int // BackoffStarts the dispatcher refused, not yet answered by a BackoffEnd
}

// BackoffStart releases the item's budget slot: one of its requests waits.
func (b *Hooks) BackoffStart() {
	if err := b.D.Backoff(b.ID); err != nil {
		b.mu.Lock()
		b.refused++
		b.mu.Unlock()
		b.Logf("steward: %s: backoff: %v\n", b.Name, err)
	}
}

// BackoffEnd waits until the item holds a budget slot again, or ctx ends.
func (b *Hooks) BackoffEnd(ctx context.Context) error {
	b.mu.Lock()
	refused := b.refused > 0
	if refused {
		b.refused--
	}
	b.mu.Unlock()
	if refused {
		return fmt.Errorf("%s: the scheduler refused its backoff", b.Name)
	}
	if err := b.D.Resume(ctx, b.ID); err != nil {
		if ctx.Err() == nil {
			b.Logf("steward: %s: resume after backoff: %v\n", b.Name, err)
		}
		return err
	}
	return nil
}

// Usage is nothing to the scheduler: the supervisor reads the token's
// usage from the gateway when the attempt ends.
func (b *Hooks) Usage(in, out int64, cost float64) {}
