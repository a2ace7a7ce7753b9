package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

// A hard link to a FIFO left in the workdir made the grader's extraction
// fail (the FIFO was dropped, the link to it was not) as an infrastructure
// error, which is retried: the agent bought re-rolls (issue 23 item 2). The
// link goes with the FIFO, and the grader holds the rest. Fails on the old
// code: Grader returned an infra error.
func TestGraderDropsHardLinksToSpecialFiles(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "fifolink")
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	res := mustExec(t, sb, `echo 41 > answer.txt && mkfifo p && ln p hard && mkdir d && ln p d/hard2 && echo made`)
	if !strings.Contains(string(res.Stdout), "made") {
		t.Fatalf("the hard link to a FIFO was not made: %+v %q", res, res.Stderr)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, _, err := sb.Grader(ctx, nil)
	if err != nil {
		t.Fatalf("Grader with a hard link to a FIFO: %v (infra %v): the agent's workdir made it fail", err, errors.Is(err, sandbox.ErrInfra))
	}
	defer g.Close(ctx)
	if res := mustExec(t, g, `cat answer.txt; ls -A | tr '\n' ' '; ls -A d | wc -l`); string(res.Stdout) != "41\nanswer.txt d 0\n" {
		t.Fatalf("the grader's workdir: %q %q, want answer.txt and an empty d", res.Stdout, res.Stderr)
	}
}

// A sparse file (truncate -s, no quota used) streamed its whole logical size
// of zeros to the grader, past the attempt's timeout, then failed as infra
// and was retried (issue 23 item 3). The copy is bounded by the disk
// quota's logical size: over it, the copy ends at once with the agent's
// error (sandbox.ErrAgentWorkdir, not infra). Fails on the old code: the
// copy streamed 20 GiB (the test's context ends it first: infra).
func TestGraderBoundsSparseFiles(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "sparse")
	s.Disk = 64 << 20
	prepare(t, r, &s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not a measure
	defer cancel()
	sb := mustCreate(t, r, s)
	res := mustExec(t, sb, `echo ok > small.txt && truncate -s 20G huge && ls -ls huge`)
	if res.ExitCode != 0 {
		t.Fatalf("truncate -s 20G: %+v %q", res, res.Stderr)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, _, err := sb.Grader(ctx, nil)
	if err == nil {
		g.Close(context.Background())
		t.Fatal("Grader took a 20 GiB workdir into a 64 MiB sandbox")
	}
	if !errors.Is(err, sandbox.ErrAgentWorkdir) || errors.Is(err, sandbox.ErrInfra) || ctx.Err() != nil {
		t.Fatalf("Grader: %v (agent's %v, infra %v, ctx %v): want the agent's error at once", err, errors.Is(err, sandbox.ErrAgentWorkdir), errors.Is(err, sandbox.ErrInfra), ctx.Err())
	}
	if !strings.Contains(err.Error(), "huge") || !strings.Contains(err.Error(), "64.0 MiB") {
		t.Fatalf("the reason does not name the file and the bound: %v", err)
	}
}

// A workdir within the bound is copied whole, sparse files included.
func TestGraderTakesAWorkdirWithinTheQuota(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	s := spec(t, "sparseok")
	s.Disk = 64 << 20
	prepare(t, r, &s)
	ctx := context.Background()
	sb := mustCreate(t, r, s)
	mustExec(t, sb, `truncate -s 1M sparse && echo ok > small.txt`)
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, _, err := sb.Grader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if res := mustExec(t, g, `wc -c < sparse; cat small.txt`); strings.Join(strings.Fields(string(res.Stdout)), " ") != "1048576 ok" {
		t.Fatalf("the grader's workdir: %q %q", res.Stdout, res.Stderr)
	}
}
