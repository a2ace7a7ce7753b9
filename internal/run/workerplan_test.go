package run

import (
	"os"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
)

// A worker runs the supervisor's plan or nothing (issue 26 item 3): an edit
// to the eval set or to an input between the supervisor's planning and a
// worker's start is refused, naming what changed, so no result is recorded
// under a fingerprint whose definition did not produce it. On the old code
// the worker checked only the number of tasks and ran the edited agent.
func TestWorkerRefusesAnEditedEvalSet(t *testing.T) {
	const set = `
tasks:
  - name: echo
    sandbox: {provider: local}
    inputs: [helper.txt]
    agent: 'printf "%s" "$STEWARD_INPUT"'
    samples:
      - {id: a, input: x, target: x}
      - {id: b, input: y, target: y}
  - name: other
    sandbox: {provider: local}
    agent: 'printf z'
    samples:
      - {id: c, input: z, target: z}
`
	build := func(path string) *plan.Plan {
		t.Helper()
		es, err := evalset.Load(path, evalset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(es, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	planned := func(p *plan.Plan, task int) []plannedAttempt {
		var out []plannedAttempt
		for _, a := range p.Attempts {
			if a.Task == task {
				out = append(out, plannedAttempt{Seq: a.Seq, Task: a.Task, Sample: a.Sample.ID, Number: a.Number, Fingerprint: a.Fingerprint, Parts: a.Parts})
			}
		}
		return out
	}
	for _, c := range []struct {
		name, edit, input, want string
	}{
		{"unchanged", set, "help", ""},
		{"agent edited", strings.Replace(set, `printf "%s"`, `printf "%s!"`, 1), "help", "echo/a: its task changed"},
		{"input edited", set, "help, edited", "echo/a: its inputs changed"},
		{"sample removed", strings.Replace(set, "      - {id: a, input: x, target: x}\n", "", 1), "help", "is no longer echo/a#1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := write(t, dir, "steward.yaml", set)
			write(t, dir, "helper.txt", "help")
			sup := build(path)
			sup.Attempts[0].Parts["image"] = "image:x@sha256:1" // resolved by the supervisor only
			want := planned(sup, 0)
			if err := os.WriteFile(path, []byte(c.edit), 0o644); err != nil {
				t.Fatal(err)
			}
			write(t, dir, "helper.txt", c.input)
			mine := build(path)
			err := adoptPlanned(mine, []int{0}, want)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if mine.Attempts[0].Fingerprint != want[0].Fingerprint || mine.Attempts[0].Parts["image"] != "image:x@sha256:1" {
					t.Errorf("the worker did not adopt the supervisor's fingerprint: %+v", mine.Attempts[0])
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "changed since the supervisor planned it") {
				t.Fatalf("error %v, want it to name %q", err, c.want)
			}
		})
	}
}
