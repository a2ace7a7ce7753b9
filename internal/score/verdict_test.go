package score

import (
	"errors"
	"strings"
	"testing"
)

// The scorer command's contract: 0 passes, 1 fails, a JSON last line
// refines those two, anything else is no verdict (errored, never failed).
// The rows marked "old: failed" were judged failed before the contract
// (issue 30 item 1): a crashed scorer was a verdict, and carry reused it.
func TestCommandVerdicts(t *testing.T) {
	type want struct {
		passed bool
		score  float64
		expl   string // contained in the explanation
		none   string // contained in the NoVerdict reason; "" = a verdict
	}
	for _, c := range []struct {
		name string
		run  Run
		want want
	}{
		{"exit 0", Run{Exit: 0}, want{passed: true, score: 1}},
		{"exit 1", Run{Exit: 1, Stdout: []byte("3 tests failed"), Stderr: []byte("assert x == y")}, want{expl: "scorer exited 1: stdout: 3 tests failed; stderr: assert x == y"}},
		{"json pass", Run{Exit: 0, Stdout: []byte("log\n{\"passed\": true, \"score\": 0.75, \"explanation\": \"ok\"}\n")}, want{passed: true, score: 0.75, expl: "ok"}},
		{"json fail on exit 0", Run{Exit: 0, Stdout: []byte(`{"passed": false, "explanation": "wrong"}`)}, want{expl: "wrong"}},
		{"json score only", Run{Exit: 0, Stdout: []byte(`{"score": 0.5}`)}, want{passed: true, score: 0.5}},
		{"json pass on exit 1: the exit wins", Run{Exit: 1, Stdout: []byte(`{"passed": true}`)}, want{expl: "the exit status wins"}},
		{"json fail on exit 1", Run{Exit: 1, Stdout: []byte(`{"passed": false, "explanation": "no"}`)}, want{expl: "no"}},
		{"agent's json without a verdict", Run{Exit: 0, Stdout: []byte(`{"foo": 1}`)}, want{passed: true, score: 1}},
		{"not json", Run{Exit: 0, Stdout: []byte(`{not json`)}, want{passed: true, score: 1}},
		{"null verdict", Run{Exit: 1, Stdout: []byte(`{"passed": null}`)}, want{expl: "scorer exited 1"}},
		// old: failed
		{"exit 2 missing script", Run{Exit: 2, Stderr: []byte("python3: can't open file '/opt/steward/scorer/check.py': [Errno 2] No such file or directory")},
			want{none: "scorer exited 2, which is no verdict (0 passes, 1 fails; any other status is the scorer's own error): stderr: python3: can't open file"}},
		{"exit 127", Run{Exit: 127, Stderr: []byte("sh: pytest: not found")}, want{none: "127: command not found): stderr: sh: pytest: not found"}},
		{"exit 126", Run{Exit: 126}, want{none: "126: the command was not executable"}},
		{"killed", Run{Exit: 137}, want{none: "killed by signal 9"}},
		{"exit 2 with a json verdict", Run{Exit: 2, Stdout: []byte(`{"passed": false}`)}, want{none: "scorer exited 2"}},
		{"timed out", Run{Exit: -1, TimedOut: true, Stdout: []byte("running 3 tests")}, want{none: "scorer timed out (task timeout 5s): no verdict: stdout: running 3 tests"}},
		{"oom", Run{Exit: 137, OOMKilled: true}, want{none: "scorer ran out of memory"}},
		{"malformed verdict", Run{Exit: 0, Stdout: []byte(`{"passed": "yes"}`)}, want{none: "malformed verdict"}},
	} {
		v, err := Command(c.run, "task timeout 5s")
		if c.want.none != "" {
			var nv *NoVerdict
			if !errors.As(err, &nv) || !strings.Contains(nv.Reason, c.want.none) {
				t.Errorf("%s: %+v, %v; want no verdict %q", c.name, v, err, c.want.none)
			}
			continue
		}
		if err != nil || v.Passed != c.want.passed || v.Score != c.want.score || !strings.Contains(v.Explanation, c.want.expl) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, v, err, c.want)
		}
	}
}
