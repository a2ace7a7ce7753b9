// Package history is what the plan reads of earlier runs to decide what it
// carries (the carry sources and the newest row of each attempt), as plain
// values. The record implements it (record.DB) and re-exports these types;
// the plan, pure by design, depends on this package and never on the record.
package history

import "github.com/steward-evals/steward/internal/status"

// Source is a published attempt a new run can carry: the row that judged
// it (RunID, Seq) and the run that produced the result (Producer, which
// differs from RunID only for rows copied by older Steward versions or by
// `merge`).
type Source struct {
	RunID       string
	Seq         int
	Producer    string
	Status      status.Attempt
	Fingerprint string
}

// Candidates are the carry sources for a set of fingerprints: the newest
// judged row (passed or failed; passed only when asked) and, when asked, the
// newest attempt skipped by early exit, per fingerprint.
type Candidates struct {
	Judged    map[string]Source
	EarlyExit map[string]Source
}

// EarlyExitPrefix starts the reason of attempts skipped by early exit.
const EarlyExitPrefix = "early exit"

// Key names an attempt of the eval set across runs.
type Key struct {
	Task, Sample string
	Attempt      int
}

// Previous is what a run reason needs of an attempt's newest row.
type Previous struct {
	Status             status.Attempt
	Fingerprint, Parts string
}
