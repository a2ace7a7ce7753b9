package run

import (
	"context"
	"github.com/steward-evals/steward/internal/status"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

// cancelAtGateway cancels the launch the moment the gateway is placed: the
// stop arrives while the dispatch stage is still being set up.
type cancelAtGateway struct {
	*counting
	cancel context.CancelFunc
}

func (c cancelAtGateway) Gateway(ctx context.Context) (sandbox.GatewayAddr, error) {
	c.cancel()
	return c.counting.Gateway(ctx)
}

type cancelFactory struct{ p cancelAtGateway }

func (f cancelFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return f.p, nil
}
func (f cancelFactory) Available(ctx context.Context, name string) bool { return false }

// A stop that arrives before dispatching starts skips every queued attempt
// and ends the run cancelled. Under -race this also proves the stop's
// watcher reads the task-finished hook only after it was set (the hook used
// to be assigned after the watcher had started).
func TestCancelBeforeDispatchSkipsEverything(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { cancelBeforeDispatch(t, false) })
	// Workers start between the watcher and the hook: the window is wide.
	t.Run("workers", func(t *testing.T) { cancelBeforeDispatch(t, true) })
}

func cancelBeforeDispatch(t *testing.T, workers bool) {
	dir := t.TempDir()
	write(t, dir, "helper.txt", "ok")
	path := write(t, dir, "steward.yaml", basicSet)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prov := cancelAtGateway{counting: &counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}, cancel: cancel}
	opts := Options{EvalSet: es, Providers: cancelFactory{prov}}
	if workers {
		opts.Workers, opts.Exe = true, buildSteward(t)
	}
	res, err := Launch(ctx, opts)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if !res.Cancelled || !res.Report.Partial {
		t.Fatalf("cancelled %v partial %v, want both", res.Cancelled, res.Report.Partial)
	}
	if len(res.Report.Attempts) != 6 {
		t.Fatalf("%d attempts reported, want 6", len(res.Report.Attempts))
	}
	for _, a := range res.Report.Attempts {
		if a.Status != status.Skipped || a.Reason != "cancelled before it started" {
			t.Errorf("%s#%d: %s (%s), want skipped: cancelled before it started", a.Sample, a.Attempt, a.Status, a.Reason)
		}
	}
	if n := prov.created.Load(); n != 0 {
		t.Errorf("%d sandboxes created after the stop, want 0", n)
	}
}
