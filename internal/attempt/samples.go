package attempt

import (
	"errors"
	"strconv"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Samples with environments of their own (a Harbor dataset, tasks_from:
// harbor) run each in a sandbox of its own spec, which the supervisor
// makes (internal/specs) and prepares; an attempt is given them
// in Env.SampleSpecs and Env.SampleErrs, by SampleKey.

// SampleKey names a sample with its own spec: its task's index and its id.
func SampleKey(task int, sample string) string { return strconv.Itoa(task) + "/" + sample }

// specOf is the spec attempt a's sandbox is made from: its sample's own,
// else its task's.
func (x *Env) specOf(a *plan.Attempt) *sandbox.Spec {
	if sp := x.SampleSpecs[SampleKey(a.Task, a.Sample.ID)]; sp != nil {
		return sp
	}
	return x.Specs[a.Task]
}

// SampleEnvError is why a sample's own environment could not be prepared
// (its image did not build, or is not there): its attempts end with it,
// the rest of the run goes on. Infra keeps the infrastructure's fault apart.
type SampleEnvError struct {
	Msg   string `json:"msg"`
	Infra bool   `json:"infra,omitempty"`
}

func (e SampleEnvError) err() error {
	err := errors.New(e.Msg)
	if e.Infra {
		return sandbox.InfraError(err)
	}
	return err
}
