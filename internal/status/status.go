// Package status is the one vocabulary of attempt and run statuses, shared
// by the plan, the record (its SQL), the supervisor, the reports and the
// CLI, and the one classification of infrastructure errors. It imports
// nothing of Steward's: every other package may depend on it.
package status

import "errors"

// Attempt is the outcome of one attempt, as published to the record.
type Attempt string

// Attempt statuses.
const (
	Passed      Attempt = "passed"
	Failed      Attempt = "failed"
	Errored     Attempt = "errored"     // the task's own error (agent crashed, timeout, OOM)
	Infra       Attempt = "infra"       // infrastructure error, counted apart
	Skipped     Attempt = "skipped"     // not run: budget spent, early exit, cancelled before dispatch
	Interrupted Attempt = "interrupted" // cancelled while running; never carried
)

// Attempts lists every attempt status, in the order reports count them.
var Attempts = []Attempt{Passed, Failed, Errored, Infra, Skipped, Interrupted}

// Judged says whether the attempt was judged (passed or failed): only
// judged results are carried.
func (a Attempt) Judged() bool { return a == Passed || a == Failed }

// Run is the state of one run in the record.
type Run string

// Run statuses.
const (
	Running   Run = "running"   // started, its owner may still be alive
	Finished  Run = "finished"  // ended normally
	Cancelled Run = "cancelled" // ended by a signal
	Crashed   Run = "crashed"   // its owner was proven gone without finishing it
	Stopped   Run = "stopped"   // ended early on a full record disk
	// Aborted: ended early on an error it reported (a missing image, a
	// refused preflight): its owner stopped cleanly, it did not crash.
	Aborted Run = "aborted"
)

// Runs lists every run status.
var Runs = []Run{Running, Finished, Cancelled, Crashed, Stopped, Aborted}

// ErrInfra marks errors that are the infrastructure's fault (daemon refused,
// hung, disk full) rather than the task's; the runner counts them apart
// (status Infra) and may retry.
var ErrInfra = errors.New("infrastructure error")

// InfraError wraps err so that errors.Is(err, ErrInfra) holds.
func InfraError(err error) error {
	if err == nil {
		return nil
	}
	return infraErr{err}
}

type infraErr struct{ err error }

func (e infraErr) Error() string   { return e.err.Error() }
func (e infraErr) Unwrap() []error { return []error{e.err, ErrInfra} }
