package attempt

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/score"
)

// The agent cannot influence its verdict (docs/security.md). By the time
// runScorer runs, the agent's sandbox is settled: every process it started is
// gone. The scorer then runs in the sandbox's grader (docker: a fresh
// container of the task's image holding a copy of the agent's workdir), with
// its files copied there only now, and the targets only in its environment.

// runScorer runs the task's scorer command for a settled sandbox.
func (e *Executor) runScorer(ctx context.Context, sb sandbox.Sandbox, t *evalset.Task, s *evalset.Sample, targets []string, answer string, env map[string]string, token string, deadline time.Time, logb *strings.Builder) (score.Verdict, error) {
	files, err := e.scorerFiles(t, sb)
	if err != nil {
		return score.Verdict{}, err
	}
	g, dir, err := sb.Grader(ctx, append(files, valueFiles(s.Input, answer, targets)...))
	if err != nil {
		return score.Verdict{}, fmt.Errorf("prepare the scorer's sandbox: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := g.Close(cctx); err != nil {
			fmt.Fprintf(e.x.Stderr, "steward: remove the scorer's sandbox %s: %v\n", g.ID(), err)
		}
	}()
	// A model-graded scorer calls the gateway with the attempt's token from
	// the grader's own address: the token works from there too.
	if gp, ok := g.(gatewayPeer); ok && e.x.Bind != nil && token != "" {
		if ip, ok := gp.GatewayPeer(); ok {
			if err := e.x.Bind(ctx, token, ip); err != nil {
				return score.Verdict{}, sandbox.InfraError(fmt.Errorf("bind the gateway token to the scorer's sandbox: %w", err))
			}
		}
	}
	senv := make(map[string]string, len(env)+4)
	for k, v := range env {
		senv[k] = v
	}
	senv["STEWARD_WORKDIR"] = g.Workdir()
	senv["STEWARD_SCORER_DIR"] = dir
	// The answer, the targets and the input are in files (STEWARD_*_FILE),
	// and in the environment only when small enough to exec with.
	setValues(senv, dir, s.Input, answer, targets)
	res, err := g.Exec(ctx, sandbox.ExecSpec{Shell: t.Scorer.Command, Env: senv, Timeout: time.Until(deadline), MaxOutput: 256 << 10})
	logb.WriteString(section("scorer", res))
	if err != nil {
		return score.Verdict{}, err
	}
	// The contract (internal/score, docs/evalset.md): 0 passes, 1 fails,
	// anything else (a crash, a timeout, no verdict) is errored.
	return score.Command(score.Run{Exit: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled},
		"task timeout "+t.Timeout.String())
}

// scorerFiles are the scorer's files, and the steward binary where the
// scorer command asks for it and the grader is not on the host.
func (e *Executor) scorerFiles(t *evalset.Task, sb sandbox.Sandbox) ([]sandbox.File, error) {
	var files []sandbox.File
	for dst, src := range t.Scorer.Files {
		data, mode, err := e.x.Plan.EvalSet.FileData(src)
		if err != nil {
			return nil, fmt.Errorf("scorer file %s: %w", dst, err)
		}
		files = append(files, sandbox.File{Path: dst, Data: data, Mode: mode})
	}
	if e.hasBin(sb) && strings.Contains(t.Scorer.Command, "STEWARD_BIN") {
		b, err := os.ReadFile(e.x.Exe)
		if err != nil {
			return nil, fmt.Errorf("read the steward binary: %w", err)
		}
		files = append(files, sandbox.File{Path: "/opt/steward/steward", Data: b, Mode: 0o755})
	}
	return files, nil
}
