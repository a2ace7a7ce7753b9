package gateway

import "context"

// AttemptHooks connect one attempt's token to the scheduler and the record.
// The gateway knows attempts only through these hooks.
type AttemptHooks interface {
	// BackoffStart is called when one of the attempt's requests starts
	// waiting out a 429/5xx backoff: the attempt releases its budget slot (C6).
	BackoffStart()
	// BackoffEnd is called before the retried request goes on: it blocks until
	// the attempt holds a budget slot again, or ctx ends.
	BackoffEnd(ctx context.Context) error
	// Usage reports tokens the attempt spent on one request and their cost in USD.
	Usage(inputTokens, outputTokens int64, costUSD float64)
}
