package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// The scorer runs in a grader of a run's provider (ForRun: commands carry
// the run's marker): it sees the agent's workdir and its own files, its
// commands run, and closing it removes its directory but not the workdir.
func TestGraderOfARunsSandbox(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	p, _, err := ForRun(tmp, "gradertest", filepath.Join(tmp, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Finalize(ctx)
	b, err := p.Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := b.Exec(ctx, sandbox.ExecSpec{Shell: "echo answer > out.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, dir, err := b.Grader(ctx, []sandbox.File{{Path: "check.sh", Data: []byte("grep -q answer out.txt && echo pass $STEWARD_RUN_ID\n")}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Exec(ctx, sandbox.ExecSpec{Shell: "sh " + dir + "/check.sh"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "pass gradertest" || res.ExitCode != 0 {
		t.Fatalf("scorer said %q (exit %d, stderr %q)", got, res.ExitCode, res.Stderr)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("closing the grader left %s", dir)
	}
	if _, err := b.CopyOut(ctx, "out.txt"); err != nil {
		t.Errorf("closing the grader took the agent's workdir: %v", err)
	}
}
