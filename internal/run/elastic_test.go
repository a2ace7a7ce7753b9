package run

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	_ "github.com/steward-evals/steward/internal/sandbox/providers" // the eval set names provider: kubernetes
)

// elastic is a provider whose capacity is unbounded with a reason, as the
// kubernetes provider reports without a quota (local sandboxes stand in for pods).
type elastic struct {
	*local.Provider
	source string
}

func (e elastic) Capacity(ctx context.Context, specs []sandbox.Spec) (sandbox.Capacity, error) {
	return sandbox.Capacity{Source: e.source}, nil
}

type elasticFactory struct{ p elastic }

func (f elasticFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return f.p, nil
}
func (f elasticFactory) Available(ctx context.Context, name string) bool { return false }

// An elastic provider leaves the fleet unbounded (the ramp governs) and the
// PLAN line says why; max_sandboxes still wins over it.
func TestElasticProviderBudgetOnPlanLine(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: pods
    sandbox: {provider: kubernetes, image: busybox}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: s, input: "", target: ok}]
`)
	for _, tc := range []struct {
		fleet, want string
	}{
		{"", "concurrency unbounded (from kubernetes: unlimited, the ramp governs)"},
		{"max_sandboxes: 7\n", "concurrency 7 (from config)"},
	} {
		write(t, dir, "_steward.yaml", tc.fleet)
		es, err := evalset.Load(path, evalset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := elastic{local.New(local.Options{BaseDir: t.TempDir()}), "kubernetes: unlimited, the ramp governs"}
		res, err := Launch(context.Background(), Options{EvalSet: es, Providers: elasticFactory{p}, Dry: true, Stderr: &syncWriter{w: new(bytes.Buffer)}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Report.Plan, tc.want) {
			t.Fatalf("fleet %q: PLAN %q, want %q", tc.fleet, res.Report.Plan, tc.want)
		}
	}
}
