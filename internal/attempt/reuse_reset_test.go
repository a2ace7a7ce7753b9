package attempt

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// resetFails is a reused sandbox whose reset fails (a provider error between
// two members of a lane).
type resetFails struct {
	sandbox.Sandbox // only ID, Reset and Close are called
	closed          bool
}

func (s *resetFails) ID() string                      { return "sb-1" }
func (s *resetFails) Reset(ctx context.Context) error { return errors.New("exec: pod gone") }
func (s *resetFails) Close(ctx context.Context) error { s.closed = true; return nil }

// A lane's sandbox that cannot be reset is removed, not pooled, and the run
// says so: the lane goes on in a fresh sandbox without the state it held,
// which must not look like the agent's fault.
func TestPutSaysWhenAReusedSandboxCannotBeReset(t *testing.T) {
	var stderr bytes.Buffer
	e := NewExecutor(&Env{Stderr: &stderr})
	sb := &resetFails{}
	e.put("lane:g1", 0, sb, true)
	if !sb.closed {
		t.Fatal("the sandbox that could not be reset was not removed")
	}
	if n := len(e.pools["lane:g1"]); n != 0 {
		t.Fatalf("the sandbox that could not be reset went back to its lane (%d pooled)", n)
	}
	if out := stderr.String(); !strings.Contains(out, "reset sandbox sb-1 for reuse: exec: pod gone") || !strings.Contains(out, "the next attempt gets a new one") {
		t.Fatalf("stderr does not say the lane loses its sandbox: %q", out)
	}
}
