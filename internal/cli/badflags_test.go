package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// Issue 23 item 7: config errors come all at once. A bad --max-concurrency
// was reported alone (pflag stopped at it, or launch returned at once) and
// hid the other flags', the environment's and the eval set's problems.
func TestBadFlagsAndEnvironmentAreReportedTogether(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), "tasks:\n  - name: t\n    agent: echo\n    attempts: 0\n    samples: [{id: a, input: x, target: x}]\n")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"not a number", []string{"launch", "--max-concurrency", "many", "--budget", "-1", "--max-tasks", "two", set}, []string{
			"steward.yaml:4: tasks[0].attempts: must be at least 1",
			`flag: --max-concurrency: invalid argument "many": want a whole number`,
			"flag: --budget: must not be negative, got -1",
			`flag: --max-tasks: invalid argument "two": want a whole number`,
			`env: STEWARD_WORKER_TIMEOUT: "soon"`,
			`env: STEWARD_SAMPLES_RAMP: samples_ramp low end 300 is above its high end 40`,
		}},
		{"zero", []string{"launch", "--max-concurrency", "0", "--budget", "lots", "--tend-interval", "soon", "--grace", "later", set}, []string{
			`flag: --tend-interval: invalid argument "soon"`,
			`flag: --grace: invalid argument "later"`,
			"steward.yaml:4: tasks[0].attempts: must be at least 1",
			"flag: --max-concurrency: must be at least 1, got 0",
			`flag: --budget: invalid argument "lots"`,
			`env: STEWARD_WORKER_TIMEOUT: "soon"`,
			`env: STEWARD_SAMPLES_RAMP`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStreams()
			s.env["STEWARD_WORKER_TIMEOUT"] = "soon"
			s.env["STEWARD_SAMPLES_RAMP"] = "300,40"
			s.must(t, ExitBadInput, c.args...)
			for _, w := range c.want {
				if !strings.Contains(s.stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, s.stderr.String())
				}
			}
		})
	}
}
