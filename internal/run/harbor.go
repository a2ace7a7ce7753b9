package run

import (
	"fmt"
	"io"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
)

// Samples with environments of their own (a Harbor dataset, tasks_from:
// harbor) load, plan, fingerprint and --dry like any; running them needs
// the per-sample sandbox and the Harbor verifier in the attempt path,
// which are not in yet: a launch refuses them rather than run a sample in
// its task's sandbox, or score it by the wrong contract (docs/harbor.md).

// printWarnings says what the eval set asks for that Steward ignores.
func printWarnings(w io.Writer, es *evalset.EvalSet) {
	for _, warn := range es.Warnings {
		fmt.Fprintf(w, "steward: warning: %s\n", warn.Error())
	}
}

// needsImage says whether a task's sandboxes run an image: its own, or
// one of its samples' (a Harbor dataset's).
func needsImage(t *evalset.Task) bool {
	if t.Sandbox.Image != "" || t.Sandbox.Build != "" {
		return true
	}
	for _, s := range t.Samples {
		if s != nil && s.Sandbox != nil && (s.Sandbox.Image != "" || s.Sandbox.Build != "") {
			return true
		}
	}
	return false
}

// refuseOwnEnvironments is the launch's refusal of samples with their own
// environments, naming the first task that has them.
func refuseOwnEnvironments(p *plan.Plan) error {
	for _, a := range p.Attempts {
		if a.Sample.OwnEnvironment() || a.Sample.Harbor != nil {
			t := p.Tasks[a.Task].Task
			return badInput("task %s: its samples carry environments of their own (a Harbor dataset: tasks_from): they load, plan and run with --dry, but running them (the per-sample sandbox and the Harbor verifier) is not supported yet; see docs/harbor.md", t.Name)
		}
	}
	return nil
}
