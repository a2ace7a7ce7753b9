// Package history is what the plan reads of earlier runs to decide what it
// carries (the carry sources and the newest row of each attempt), as plain
// values. The record implements it (record.DB) and re-exports these types;
// the plan, pure by design, depends on this package and never on the record.
package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/steward-evals/steward/internal/status"
)

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

// Identity is a sample's attempt-independent fingerprint: a hash of the
// task name, the sample id and the fingerprint's parts (the JSON map of
// component hashes the record keeps per row), i.e. everything that decides
// an attempt's outcome apart from its number. Equal identity = the same
// definition. The parts are read as a JSON object and re-encoded (keys
// sorted), so their formatting does not matter; parts that are not such an
// object are hashed as they are.
func Identity(task, sample, parts string) string {
	var m map[string]string
	if err := json.Unmarshal([]byte(parts), &m); err == nil && m != nil {
		if b, err := json.Marshal(m); err == nil {
			parts = string(b)
		}
	}
	b, _ := json.Marshal([]string{task, sample, parts}) // strings always encode
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}
