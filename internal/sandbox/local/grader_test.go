package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// TestGraderRunsTheScorer: the scorer's sandbox runs a command in the
// agent's workdir, with its own files beside it, and Close removes its
// directory (the grader once lacked its provider and every local scorer
// crashed the worker).
func TestGraderRunsTheScorer(t *testing.T) {
	ctx := context.Background()
	p, _, err := ForRun(t.TempDir(), "r-grader", filepath.Join(t.TempDir(), "lock"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := b.Exec(ctx, sandbox.ExecSpec{Shell: "echo answer > out.txt"}); err != nil {
		t.Fatal(err)
	}
	g, dir, err := b.(interface {
		Grader(context.Context, []sandbox.File) (sandbox.Sandbox, string, error)
	}).Grader(ctx, []sandbox.File{{Path: "check.sh", Data: []byte("cat out.txt; echo $STEWARD_RUN_ID\n")}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Exec(ctx, sandbox.ExecSpec{Shell: "sh " + filepath.Join(dir, "check.sh")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != "answer" || got[1] != "r-grader" {
		t.Fatalf("scorer said %q, want the agent's answer and the run id", res.Stdout)
	}
	root := g.(*box).root
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("the scorer's directory %s is still there: %v", root, err)
	}
}
