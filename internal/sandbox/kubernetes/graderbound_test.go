package kubernetes

import (
	"errors"
	"io"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// The grader's copy bound is the agent's error, never infra (a sparse file
// would otherwise buy retries: issue 23 item 3).
func TestGraderCopyBoundIsTheAgents(t *testing.T) {
	w := &limitWriter{w: io.Discard, left: 10}
	if _, err := w.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Write([]byte{0})
	if !errors.Is(err, sandbox.ErrAgentWorkdir) || errors.Is(err, sandbox.ErrInfra) {
		t.Fatalf("over the bound: %v, want the agent's error", err)
	}
}
