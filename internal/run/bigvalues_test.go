package run

import (
	"bytes"
	"context"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// bigScorer passes only when the answer, the target, the targets and the
// input are in their files (STEWARD_*_FILE), and in the environment exactly
// when small: the 300 000-byte answer only in its file.
const bigScorer = `n=$(wc -c < "$STEWARD_ANSWER_FILE"); ` +
	`if [ "$STEWARD_SAMPLE_ID" = big ]; then test -z "$STEWARD_ANSWER" && test "$n" -ge 300000; ` +
	`else test "$STEWARD_ANSWER" = "$(cat "$STEWARD_ANSWER_FILE")"; fi && ` +
	`test "$(cat "$STEWARD_TARGET_FILE")" = "$STEWARD_TARGET" && grep -q "$STEWARD_TARGET" "$STEWARD_TARGETS_FILE" && ` +
	`test "$(cat "$STEWARD_INPUT_FILE")" = "$STEWARD_INPUT"`

// TestBigAnswerReachesTheScorer: a 300 000-byte answer (past Linux's 128 KiB
// limit on one environment string, which made the scorer's exec fail with
// "argument list too long") reaches the scorer in STEWARD_ANSWER_FILE; a
// small one is in both. In real Docker sandboxes and local ones.
func TestBigAnswerReachesTheScorer(t *testing.T) {
	for _, prov := range []string{"docker", "local"} {
		t.Run(prov, func(t *testing.T) {
			dir := t.TempDir()
			sb := "{provider: local}\n    exclusive: false"
			var factory ProviderFactory = sandbox.Factory{}
			if prov == "docker" {
				needDocker(t)
				busyboxImage(t, dir)
				sb = "{provider: docker, build: image, memory: 128m}"
				factory = dockerFactory{t}
			}
			path := write(t, dir, "steward.yaml", `
tasks:
  - name: big
    sandbox: `+sb+`
    agent: 'if [ "$STEWARD_SAMPLE_ID" = big ]; then head -c 300000 /dev/zero | tr "\0" a; else echo 42; fi'
    scorer: {command: '`+bigScorer+`'}
    samples:
      - {id: big, input: "write a lot", target: "42"}
      - {id: small, input: "write 42", target: "42"}
`)
			es, err := evalset.Load(path, evalset.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			res, err := Launch(context.Background(), Options{EvalSet: es, Providers: factory, Stderr: &syncWriter{w: &stderr}})
			if err != nil {
				t.Fatalf("launch: %v\n%s", err, stderr.String())
			}
			for _, a := range res.Report.Attempts {
				if a.Status != status.Passed {
					t.Errorf("%s: %s (%s)\n%s", a.Sample, a.Status, a.Reason, a.Log)
				}
			}
		})
	}
}
