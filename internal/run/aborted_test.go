package run

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
)

// refusing is a provider whose preflight refuses the run, as docker's does
// for an image that is not there.
type refusing struct{ *local.Provider }

func (refusing) PreflightRun(ctx context.Context, specs []*sandbox.Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error {
	return errors.New("image steward-test/missing:1 not found")
}

// Issue 23 item 11: a run that stopped on an error it reported (a missing
// image) is recorded as aborted, with the error, not as crashed: its owner
// was not proven gone, it stopped cleanly.
func TestRunThatFailedCleanlyIsAbortedNotCrashed(t *testing.T) {
	sandbox.Register(sandbox.Descriptor{
		Name: "refusing", OnHost: true,
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) {
			return refusing{local.New(local.Options{BaseDir: t.TempDir()})}, nil
		},
	})
	t.Cleanup(func() { sandbox.Deregister("refusing") })
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: t
    sandbox: {provider: refusing}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}]
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if _, err := Launch(context.Background(), Options{EvalSet: es, Providers: sandbox.Factory{}, Stderr: &syncWriter{w: &stderr}}); err == nil {
		t.Fatalf("the launch went ahead\n%s", stderr.String())
	}
	db, err := record.Open(context.Background(), filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	if r := runs[0]; r.Status != status.Aborted || !strings.Contains(r.Left, "image steward-test/missing:1 not found") {
		t.Fatalf("the run is %s (left %q), want aborted with the error", r.Status, r.Left)
	}
}

// Issue 23 item 11: a run whose every attempt is carried makes no model
// call, so it starts without the model key (it refused to: "the
// environment variable FAKE_KEY is not set").
func TestFullyCarriedRunNeedsNoModelKey(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-fake
  base_url: http://127.0.0.1:9/v1
  api_key_env: FAKE_KEY
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}]
`)
	withKey := func(o *Options) {
		o.Getenv = func(k string) string {
			if k == "FAKE_KEY" {
				return "real-key"
			}
			return ""
		}
	}
	if r := launchSet(t, path, withKey); r.rep.Counts.Passed != 2 {
		t.Fatalf("first run %+v\n%s", r.rep.Counts, r.stderr)
	}
	r := launchSet(t, path, func(o *Options) { o.Getenv = func(string) string { return "" } })
	if r.rep.Counts.Reused != 2 || r.created != 0 {
		t.Fatalf("re-run without the key: %+v, %d sandboxes\n%s", r.rep.Counts, r.created, r.stderr)
	}
}
