package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// onlyProvider leaves d the only registered provider for the test.
func onlyProvider(t *testing.T, d sandbox.Descriptor) {
	t.Helper()
	for _, o := range sandbox.Registered() {
		sandbox.Deregister(o.Name)
		t.Cleanup(func() { sandbox.Register(o) })
	}
	sandbox.Register(d)
	t.Cleanup(func() { sandbox.Deregister(d.Name) })
}

// doctor and sweep ask every registered provider: a provider added by
// registration alone is asked, with the command's stdout and environment,
// and its failure is the command's (exit 3, naming the provider).
func TestDoctorAndSweepAskTheRegistry(t *testing.T) {
	var failSweep bool
	onlyProvider(t, sandbox.Descriptor{
		Name: "pods",
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) {
			return nil, errors.New("unused")
		},
		Doctor: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			if ri.Liveness == nil {
				return errors.New("doctor got no liveness judge")
			}
			fmt.Fprintf(w, "pods: cluster %s answers\n", ri.Getenv("PODS_CLUSTER"))
			return nil
		},
		Sweep: func(ctx context.Context, w io.Writer, _ sandbox.RunInfo) error {
			if failSweep {
				return errors.New("cluster gone")
			}
			fmt.Fprintln(w, "pods: swept 2 pods of dead runs")
			return nil
		},
	})
	s := newStreams()
	s.env["PODS_CLUSTER"] = "kind-1"
	s.must(t, ExitOK, "doctor")
	if got := s.stdout.String(); got != "pods: cluster kind-1 answers\n" {
		t.Fatalf("doctor: %q", got)
	}
	s.must(t, ExitOK, "sweep")
	if got := s.stdout.String(); got != "pods: swept 2 pods of dead runs\n" {
		t.Fatalf("sweep: %q", got)
	}
	failSweep = true
	s.must(t, ExitInfra, "sweep")
	if !strings.Contains(s.stderr.String(), "pods: cluster gone") {
		t.Fatalf("sweep failure: %q", s.stderr.String())
	}
}

// A provider's internal commands are the binary's hidden subcommands:
// docker's gateway relay is reached through the registry, takes exactly
// its arguments, and never shows in the help.
func TestProviderInternalCommands(t *testing.T) {
	s := newStreams()
	s.must(t, ExitBadInput, "__relay", "127.0.0.1:0")
	if !strings.Contains(s.stderr.String(), "accepts 2 arg(s)") {
		t.Fatalf("stderr %q", s.stderr.String())
	}
	s.must(t, ExitInfra, "__relay", "256.0.0.1:1", "127.0.0.1:1")
	if !strings.Contains(s.stderr.String(), "relay listen 256.0.0.1:1") {
		t.Fatalf("the relay did not run: %q", s.stderr.String())
	}
	// The egress proxy (network allowlists) likewise.
	s.must(t, ExitInfra, "__egress", "127.0.0.1:0", `{"hosts":["127.0.0.1"]}`)
	if !strings.Contains(s.stderr.String(), "egress proxy: \"127.0.0.1\": an IP address") {
		t.Fatalf("the egress proxy did not run: %q", s.stderr.String())
	}
	s.must(t, ExitOK, "--help")
	if strings.Contains(s.stdout.String(), "__relay") || strings.Contains(s.stdout.String(), "__egress") {
		t.Fatalf("help shows the internal command:\n%s", s.stdout.String())
	}
}
