package plan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// The image ID a tag resolves to is part of the fingerprint: the same tag
// on another image changes the fingerprint and the carry reason; a task
// built from a directory or without an ID keeps its fingerprint.
func TestSetImageIDs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(path, []byte(`
tasks:
  - name: tagged
    sandbox: {provider: docker, image: "agent:latest"}
    agent: echo ok
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}]
  - name: other
    sandbox: {provider: docker, image: "other:1"}
    agent: echo ok
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	build := func(ids map[string]string) *Plan {
		p, err := Build(es, Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.SetImageIDs(ids)
		return p
	}
	byTag := build(nil)
	v1 := build(map[string]string{"agent:latest": "sha256:1111"})
	v1again := build(map[string]string{"agent:latest": "sha256:1111"})
	v2 := build(map[string]string{"agent:latest": "sha256:2222"})
	if v1.Attempts[0].Fingerprint == byTag.Attempts[0].Fingerprint || v1.Attempts[0].Fingerprint == v2.Attempts[0].Fingerprint {
		t.Fatal("the image ID is not in the fingerprint")
	}
	if v1.Attempts[0].Fingerprint != v1again.Attempts[0].Fingerprint {
		t.Fatal("the same image ID gives another fingerprint")
	}
	if v1.Attempts[1].Fingerprint != v2.Attempts[1].Fingerprint || v1.Attempts[1].Fingerprint != byTag.Attempts[1].Fingerprint {
		t.Fatal("another task's fingerprint changed with an image it does not use")
	}
	prev := v1.Attempts[0]
	if got := runReasonFor(v2.Attempts[0], prev); got != "image changed" {
		t.Fatalf("reason %q, want image changed", got)
	}
}

func runReasonFor(a, prev *Attempt) string {
	return runReason(a, &history.Previous{Status: status.Passed, Fingerprint: prev.Fingerprint, Parts: prev.PartsJSON()}, false)
}
