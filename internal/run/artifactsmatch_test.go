package run

import (
	"bytes"
	"context"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// TestArtifactsWithMatchScorer: a task judged by a target match (no scorer
// command, so no grader) keeps its artifacts too. In Docker the settled
// sandbox is paused and ran no command, so nothing was ever collected.
func TestArtifactsWithMatchScorer(t *testing.T) {
	for _, prov := range []string{"docker", "local"} {
		t.Run(prov, func(t *testing.T) {
			dir := t.TempDir()
			sb := "{provider: local}"
			var factory ProviderFactory = sandbox.Factory{}
			if prov == "docker" {
				needDocker(t)
				busyboxImage(t, dir)
				sb = "{provider: docker, build: image, memory: 128m}"
				factory = dockerFactory{t}
			}
			path := write(t, dir, "steward.yaml", `
tasks:
  - name: arts
    sandbox: `+sb+`
    agent: 'mkdir -p out && echo "note of $STEWARD_SAMPLE_ID" > out/note.txt && echo 42'
    scorer: {match: exact}
    artifacts: [out/*]
    samples:
      - {id: a, input: "x", target: "42"}
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
			a := res.Report.Attempts[0]
			if a.Status != status.Passed || a.Details == nil || len(a.Details.Artifacts) != 1 ||
				a.Details.Artifacts[0].Path != "out/note.txt" || a.Details.Artifacts[0].Text != "note of a\n" {
				t.Fatalf("status %s (%s), artifacts %+v\n%s", a.Status, a.Reason, a.Details, stderr.String())
			}
		})
	}
}
