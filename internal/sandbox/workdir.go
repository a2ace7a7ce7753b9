package sandbox

import "errors"

// ErrAgentWorkdir marks a failure caused by what the agent left in its
// workdir (a workdir larger than the sandbox's disk quota allows, a sparse
// file whose logical size is over it, entries the grader cannot take): it is
// the agent's outcome (the attempt fails), never an infrastructure error, so
// an agent cannot buy a retry with it (docs/security.md).
var ErrAgentWorkdir = errors.New("the agent's workdir")

// AgentWorkdirError wraps err so that errors.Is(err, ErrAgentWorkdir) holds.
func AgentWorkdirError(err error) error {
	if err == nil {
		return nil
	}
	return agentWorkdirErr{err}
}

type agentWorkdirErr struct{ err error }

func (e agentWorkdirErr) Error() string   { return e.err.Error() }
func (e agentWorkdirErr) Unwrap() []error { return []error{e.err, ErrAgentWorkdir} }
