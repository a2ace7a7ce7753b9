package run

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

// A Harbor dataset plans and runs with --dry (one sample per task, each in
// a sandbox that runs an image, so never the local provider by default);
// a real launch on a provider that cannot run per-sample environments (not
// a sandbox.SampleEnvironments) refuses it, naming the task and the provider.
func TestHarborDatasetDryAndRefusedLaunch(t *testing.T) {
	dir := t.TempDir()
	fixtures, _ := filepath.Abs("../../testdata/harbor")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: fixtures
    sandbox: {provider: docker}
    agent: 'true'
    tasks_from: {harbor: `+fixtures+`}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := elastic{local.New(local.Options{BaseDir: t.TempDir()}), "kubernetes: unlimited, the ramp governs"}
	stderr := &syncWriter{w: new(bytes.Buffer)}
	res, err := Launch(context.Background(), Options{EvalSet: es, Providers: elasticFactory{p}, Dry: true, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Report.Plan, "5 attempts") {
		t.Errorf("PLAN %q", res.Report.Plan)
	}
	_, err = Launch(context.Background(), Options{EvalSet: es, Providers: elasticFactory{p}, Stderr: stderr})
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "task fixtures: its samples carry environments of their own (a Harbor dataset: tasks_from), which the docker provider cannot run yet") {
		t.Fatalf("launch: %v", err)
	}
}
