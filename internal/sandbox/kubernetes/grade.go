package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/steward-evals/steward/internal/sandbox"
)

// The agent cannot influence its verdict (docs/security.md): before the
// scorer runs, every process the agent started is killed (the pod shares one
// process namespace, so the idle shell sees them all), and the scorer runs in
// a fresh pod of the same image holding a copy of the workdir, so nothing the
// agent changed outside its workdir counts.

// graderScorerDir is where the scorer's own files go in the grader pod: a
// path the agent's pod never held.
const graderScorerDir = "/tmp/steward-scorer"

// maxGraderCopy bounds the workdir streamed from the agent's pod into the grader.
const maxGraderCopy = 1 << 30

// settleScript kills every process but the pod's idle shell and this script,
// then checks that none is left: a process killed a moment ago may still be
// exiting, so it kills and looks again for up to two seconds before it says
// which one survived.
const settleScript = `for try in 1 2 3 4 5 6 7 8 9 10; do ` + killAllScript + `; me=$$; left=; for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = 1 ] && continue; [ "$p" = $me ] && continue; read -r q c st pp r < $d/stat 2>/dev/null || continue; [ "$pp" = 0 ] && continue; [ "$st" = Z ] && continue; [ "$pp" = $me ] && continue; left=$p; done; [ -z "$left" ] && exit 0; sleep 0.2; done; echo "left: $left" >&2; exit 1`

// Settle implements sandbox.Sandbox: nothing the agent started runs on.
func (s *Sandbox) Settle(ctx context.Context) error {
	if _, err := s.run(ctx, settleScript); err != nil {
		return sandbox.InfraError(fmt.Errorf("settle sandbox %s: %w", s.name, err))
	}
	return nil
}

// Resume implements sandbox.Resumer (Harbor's shared verifier): Settle
// already leaves the pod able to run commands with its files kept, so
// resuming ends (again) whatever is left and checks that nothing is.
func (s *Sandbox) Resume(ctx context.Context) error { return s.Settle(ctx) }

var _ sandbox.Resumer = (*Sandbox)(nil)

// RunsSampleEnvironments implements sandbox.SampleEnvironments: a pod per
// sample's spec (its image: the cluster's, never built here), a writable
// root when the spec asks, and pods that resume for the shared verifier.
func (p *Provider) RunsSampleEnvironments() bool { return true }

var _ sandbox.SampleEnvironments = (*Provider)(nil)

// confineScript removes, in the grader's copy of the workdir, every symlink
// that leads out of it (to the scorer's files, /proc, the image's files), and
// anything that is not a regular file, directory or link (FIFOs hang scorers).
const confineScript = `cd "$1" || exit 1; find . -type l | while read -r l; do t=$(readlink -f "$l" 2>/dev/null); case "$t" in "$1"|"$1"/*) ;; *) rm -f "$l";; esac; done; find . ! -type f ! -type d ! -type l -exec rm -f {} + 2>/dev/null; true`

// Grader implements sandbox.Sandbox: a fresh pod of the same spec, the
// agent's workdir streamed into it (tar over exec, pod to pod through the
// supervisor), links leading out of the workdir removed, and the scorer's
// files copied to graderScorerDir.
func (s *Sandbox) Grader(ctx context.Context, files []sandbox.File) (sandbox.Sandbox, string, error) {
	gs, err := s.p.Create(ctx, s.spec)
	if err != nil {
		return nil, "", fmt.Errorf("create the scorer's pod: %w", err)
	}
	g := gs.(*Sandbox)
	fail := func(err error) (sandbox.Sandbox, string, error) {
		_ = g.Close(context.WithoutCancel(ctx))
		return nil, "", err
	}
	pr, pw := io.Pipe()
	outErr := make(chan error, 1)
	go func() {
		errb := sandbox.NewCapped(64 << 10)
		code, err := s.stream(ctx, []string{"tar", "-C", s.workdir, "-cf", "-", "."}, nil, &limitWriter{w: pw, left: maxGraderCopy}, errb)
		if err == nil && code != 0 {
			err = fmt.Errorf("tar exited %d: %s", code, errb.Bytes())
		}
		pw.CloseWithError(err)
		outErr <- err
	}()
	errb := sandbox.NewCapped(64 << 10)
	code, err := g.stream(ctx, []string{"tar", "-C", g.workdir, "-xf", "-"}, pr, io.Discard, errb)
	_ = pr.CloseWithError(io.ErrClosedPipe)
	oerr := <-outErr
	if oerr != nil && err == nil {
		err = oerr
	}
	if err == nil && code != 0 {
		err = fmt.Errorf("tar exited %d: %s", code, errb.Bytes())
	}
	if errors.Is(oerr, sandbox.ErrAgentWorkdir) {
		return fail(oerr) // what the agent left: its outcome, never a retry
	}
	if err != nil {
		return fail(sandbox.InfraError(fmt.Errorf("copy the workdir into the scorer's pod: %w", err)))
	}
	if _, err := g.run(ctx, confineScript, g.workdir); err != nil {
		return fail(sandbox.InfraError(fmt.Errorf("confine the scorer's copy of the workdir: %w", err)))
	}
	var in []sandbox.File
	for _, f := range files {
		p := f.Path
		if !path.IsAbs(p) {
			p = path.Join(graderScorerDir, p)
		}
		f.Path = p
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, sandbox.File{Path: path.Join(graderScorerDir, ".keep"), Mode: 0o644})
	}
	if err := g.CopyIn(ctx, in); err != nil {
		return fail(fmt.Errorf("copy the scorer's files: %w", err))
	}
	return g, graderScorerDir, nil
}

// limitWriter fails once more than left bytes were written.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.left {
		// Sparse files count at their full size: the agent's outcome (issue 23 item 3).
		return 0, sandbox.AgentWorkdirError(fmt.Errorf("the workdir is larger than %d MiB (sparse files count at their full size): not handed to the scorer", int64(maxGraderCopy)>>20))
	}
	l.left -= int64(len(b))
	return l.w.Write(b)
}
