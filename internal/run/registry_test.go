package run

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

// testbox is a provider a new package would add: host processes (it wraps
// local), exclusive unless a task says otherwise, with a preflight and an
// after-run sweep of its own.
type testbox struct {
	*local.Provider
	mu                 sync.Mutex
	live, max          int
	preflights, sweeps int
}

func (b *testbox) Create(ctx context.Context, s sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Provider.Create(ctx, s)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.live++
	b.max = max(b.max, b.live)
	b.mu.Unlock()
	return &testboxSandbox{Sandbox: sb, b: b}, nil
}

func (b *testbox) PreflightRun(ctx context.Context, specs []*sandbox.Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.preflights++
	return nil
}

func (b *testbox) SweepAfterRun(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweeps++
}

type testboxSandbox struct {
	sandbox.Sandbox
	b    *testbox
	once sync.Once
}

func (s *testboxSandbox) Close(ctx context.Context) error {
	s.once.Do(func() {
		s.b.mu.Lock()
		s.b.live--
		s.b.mu.Unlock()
	})
	return s.Sandbox.Close(ctx)
}

// A provider plugs in with one Register call: eval sets may name it, the
// supervisor makes it through the registry, applies its exclusivity (the
// plan line and the scheduler's one-at-a-time gate name it), runs its
// preflight before and its sweep after the run.
func TestARegisteredProviderRunsTasks(t *testing.T) {
	tb := &testbox{Provider: local.New(local.Options{BaseDir: t.TempDir()})}
	sandbox.Register(sandbox.Descriptor{
		Name: "testbox", Exclusive: true, OnHost: true,
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) { return tb, nil },
	})
	t.Cleanup(func() { sandbox.Deregister("testbox") })

	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: boxed
    sandbox: {provider: testbox}
    agent: 'printf "%s" "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: a, input: "x", target: "x"}
      - {id: b, input: "y", target: "y"}
      - {id: c, input: "z", target: "z"}
      - {id: d, input: "w", target: "w"}
  - name: shared
    sandbox: {provider: testbox}
    exclusive: false
    agent: 'printf "%s" "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: e, input: "v", target: "v"}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	res, err := Launch(context.Background(), Options{EvalSet: es, Providers: sandbox.Factory{}, Stderr: &syncWriter{w: &stderr},
		Concurrency: 4})
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	if got := statuses(res.Report); got != "a:p b:p c:p d:p e:p" {
		t.Fatalf("statuses %q\n%s", got, stderr.String())
	}
	plan := strings.SplitN(stderr.String(), "\n", 2)[0]
	if !strings.Contains(plan, "boxed ≤1 (testbox exclusive)") || strings.Contains(plan, "shared ≤1") {
		t.Errorf("plan line does not apply testbox's exclusivity to boxed only: %s", plan)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.preflights != 1 || tb.sweeps != 1 {
		t.Errorf("preflights %d, sweeps %d; want 1 and 1", tb.preflights, tb.sweeps)
	}
	if tb.max == 0 {
		t.Error("no sandbox came from testbox")
	}
	if tb.live != 0 {
		t.Errorf("%d testbox sandboxes left", tb.live)
	}
}
