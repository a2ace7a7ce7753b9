package docker

import (
	"context"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

// A command that leaves a background process holding its output returns when
// the command itself exits, not when the background process does.
func TestExecReturnsDespiteBackgroundChild(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "bg")
	prepare(t, r, &s)
	sb := mustCreate(t, r, s)
	res, err := sb.Exec(context.Background(), sandbox.ExecSpec{Shell: "sleep 600 & echo started", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %v", res.Duration)
	if res.TimedOut || string(res.Stdout) != "started\n" || res.ExitCode != 0 {
		t.Fatalf("%+v %q", res, res.Stdout)
	}
}
