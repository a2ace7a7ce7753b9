package local

import (
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Name is the provider's name in eval sets.
const Name = "local"

func init() {
	sandbox.Register(sandbox.Descriptor{
		Name:      Name,
		Summary:   "host processes in a temporary workdir, one at a time unless exclusive: false",
		Exclusive: true,
		OnHost:    true,
		Fallback:  true,
		Check:     check,
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) {
			if ri.RunID == "" {
				return New(Options{}), nil
			}
			// One directory per run holds its local sandboxes; after the run (and
			// at the next launch, after a crash) what it left is stopped and removed.
			p, _, err := ForRun(os.TempDir(), ri.RunID, ri.LockPath)
			return p, err
		},
		Sweep: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			Sweep(os.TempDir(), JudgeHere, w)
			return nil
		},
	})
}

// check refuses what a host process cannot honour.
func check(s sandbox.Settings) []sandbox.Problem {
	var out []sandbox.Problem
	if s.Image != "" {
		out = append(out, sandbox.Problem{Field: "image", Message: "the local provider runs on the host and takes no image: remove it or name a provider that runs images"})
	}
	if s.Build != "" {
		out = append(out, sandbox.Problem{Field: "build", Message: "the local provider runs on the host and takes no build: remove it or name a provider that runs images"})
	}
	return out
}

// JudgeHere judges a run's liveness from this process's boot and mount
// namespace (runlock.Judge): a run that cannot be proven dead is left alone.
func JudgeHere(lockPath string, owner runlock.Identity) (bool, error) {
	return runlock.Judge(lockPath, owner, runlock.Here())
}

// PreflightRun sweeps what dead runs left before this run starts (a
// provider made by ForRun; others have no run directory to sweep beside).
func (p *Provider) PreflightRun(ctx context.Context, specs []*sandbox.Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error {
	if p.runDir != "" {
		Sweep(filepath.Dir(p.runDir), JudgeHere, io.Discard)
	}
	return nil
}

// SweepAfterRun stops and removes what this run (now dead) and other dead runs left.
func (p *Provider) SweepAfterRun(ctx context.Context) {
	if p.runDir != "" {
		Sweep(filepath.Dir(p.runDir), JudgeHere, io.Discard)
	}
}

var (
	_ sandbox.Preflighter     = (*Provider)(nil)
	_ sandbox.AfterRunSweeper = (*Provider)(nil)
)
