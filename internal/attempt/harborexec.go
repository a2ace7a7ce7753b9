package attempt

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/score"
	"github.com/steward-evals/steward/internal/status"
)

// The Harbor verifier's contract (docs/harbor.md, "The verifier"), in the
// attempt path:
//
//  1. the agent runs with /logs/agent, /logs/verifier and /logs/artifacts
//     present and no /tests (nor /solution, but for the oracle); when it
//     ends (or its timeout does) the sandbox is settled: nothing it
//     started runs on; but for a shared verifier that keeps the agent's
//     processes (tasks_from's keep_processes, the default), as Harbor's
//     does: the agent's command has ended (at its timeout, its process
//     group is killed), what it left in the background (a server) runs on;
//  2. then, in the agent's own sandbox resumed (environment_mode shared,
//     Harbor's default; as it is, when it keeps the agent's processes) or
//     in a fresh one of the sample's image holding a
//     copy of the agent's workdir (separate: Steward's grader), /tests and
//     /logs/verifier are made afresh (nothing the agent put there counts),
//     tests/ is copied to /tests and bash /tests/test.sh runs in the
//     workdir with TEST_DIR=/tests and [verifier] env, bounded by the
//     verifier's timeout;
//  3. the verdict is the reward file it left (score.Harbor), never its exit
//     status.

// OracleAgent is the agent name that runs a Harbor task's reference
// solution (solution/solve.sh) as the agent.
const OracleAgent = "oracle"

// Paths inside a Harbor sample's sandbox.
const (
	harborTests    = "/tests"
	harborSolution = "/solution"
	harborLogs     = "/logs"
	rewardTxt      = "/logs/verifier/reward.txt"
	rewardJSON     = "/logs/verifier/reward.json"
)

// bashOr runs a script with bash, as Harbor does, or with sh in an image
// without bash.
func bashOr(script string) string {
	return `if command -v bash >/dev/null 2>&1; then exec bash ` + script + `; else exec sh ` + script + `; fi`
}

// keepsProcesses says whether the attempt's verifier runs in the agent's
// own sandbox beside the processes the agent left there (a Harbor sample
// in shared mode, keep_processes not false): the sandbox is then never
// settled.
func (r *attemptRun) keepsProcesses() bool {
	h := r.a.Sample.Harbor
	return h != nil && h.VerifierMode != "separate" && h.KeepProcesses
}

// isOracle says whether the attempt's agent is the oracle (a Harbor sample's only).
func (r *attemptRun) isOracle() bool {
	return r.a.Sample.Harbor != nil && strings.TrimSpace(r.t.Agent) == OracleAgent
}

// harborDirs makes /logs/agent, /logs/verifier and /logs/artifacts before
// the agent starts (a Harbor sample's sandbox only).
func (r *attemptRun) harborDirs() (record.Attempt, bool) {
	if r.a.Sample.Harbor == nil {
		return record.Attempt{}, false
	}
	if err := mkLogs(r.ctx, r.sb, false); err != nil {
		r.healthy = false
		return r.classify(err, "make /logs"), true
	}
	return record.Attempt{}, false
}

// mkLogs makes /logs's directories; fresh also empties /tests and
// /logs/verifier first, so that nothing the agent left there counts.
func mkLogs(ctx context.Context, sb sandbox.Sandbox, fresh bool) error {
	script := `mkdir -p /logs/agent /logs/verifier /logs/artifacts`
	if fresh {
		script = `rm -rf /tests /logs/verifier && mkdir -p /tests && ` + script
	}
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: script, Timeout: time.Minute, MaxOutput: 16 << 10})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("%s exited %d: %s (a Harbor sample's image needs /bin/sh, rm and mkdir, and a writable root)", script, res.ExitCode, score.OutputTail(res.Stdout, res.Stderr, score.TailBytes))
	}
	return nil
}

// agentCommand is the agent's command and environment: the task's agent,
// or for the oracle the sample's solution, copied to /solution now (no
// other agent ever sees it), run with [solution] env.
func (r *attemptRun) agentCommand() (string, map[string]string, error) {
	if !r.isOracle() {
		return r.t.Agent, r.env, nil
	}
	h := r.a.Sample.Harbor
	if _, ok := h.Solution["solve.sh"]; !ok {
		return "", nil, fmt.Errorf("the oracle runs solution/solve.sh, and Harbor task %s has none", r.a.Sample.ID)
	}
	if err := r.sb.CopyIn(r.ctx, harborFiles(harborSolution, h.Solution)); err != nil {
		return "", nil, fmt.Errorf("copy the solution to %s: %w", harborSolution, err)
	}
	env := make(map[string]string, len(r.env)+len(h.SolutionEnv))
	for k, v := range r.env {
		env[k] = v
	}
	for k, v := range h.SolutionEnv {
		env[k] = v
	}
	return bashOr(harborSolution + "/solve.sh"), env, nil
}

// harborFiles places a Harbor task's files under dir.
func harborFiles(dir string, m map[string]evalset.HarborFile) []sandbox.File {
	files := make([]sandbox.File, 0, len(m))
	for _, p := range evalset.SortedHarborFiles(m) {
		f := m[p]
		files = append(files, sandbox.File{Path: path.Join(dir, p), Data: f.Data, Mode: f.Mode})
	}
	return files
}

// verify runs the Harbor verifier for a settled sandbox and judges the
// attempt by its reward file.
func (r *attemptRun) verify() record.Attempt {
	h := r.a.Sample.Harbor
	timeout := r.t.ScorerTimeoutD()
	if r.a.Sample.ScorerTimeout > 0 {
		timeout = r.a.Sample.ScorerTimeout.D()
	}
	vsb, cleanup, err := r.verifierSandbox(h.VerifierMode)
	if err != nil {
		r.healthy = false
		return r.verifyErr(err, "prepare the verifier's sandbox")
	}
	defer cleanup()
	if err := mkLogs(r.ctx, vsb, true); err != nil {
		return r.verifyErr(err, "prepare /tests and /logs for the verifier")
	}
	if err := vsb.CopyIn(r.ctx, harborFiles(harborTests, h.Tests)); err != nil {
		return r.verifyErr(err, "copy tests/ to /tests")
	}
	env := make(map[string]string, len(r.env)+len(h.VerifierEnv)+2)
	for k, v := range r.env {
		env[k] = v
	}
	withoutAgentFiles(env) // a separate verifier's sandbox does not hold them
	env["STEWARD_WORKDIR"] = vsb.Workdir()
	env["TEST_DIR"] = harborTests
	for k, v := range h.VerifierEnv {
		env[k] = v
	}
	res, err := vsb.Exec(r.ctx, sandbox.ExecSpec{Shell: bashOr(harborTests + "/test.sh"), Env: env, Timeout: timeout, MaxOutput: 256 << 10})
	r.logb.WriteString(section("verifier ("+h.VerifierMode+")", res))
	r.row.Log = tail([]byte(r.logb.String()), 16<<10)
	if err != nil {
		return r.verifyErr(err, "run the verifier")
	}
	run := score.HarborRun{Run: score.Run{Exit: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled}}
	if !res.TimedOut {
		for _, f := range []struct {
			path string
			dst  *[]byte
		}{{rewardTxt, &run.RewardTxt}, {rewardJSON, &run.RewardJSON}} {
			b, err := vsb.CopyOut(r.ctx, f.path)
			if errors.Is(err, sandbox.ErrInfra) {
				return r.verifyErr(err, "read "+f.path)
			}
			if err == nil {
				*f.dst = b
			}
		}
	}
	r.collectLogs(vsb, h.VerifierMode)
	v, err := score.Harbor(run, "verifier timeout "+timeout.String())
	var nv *score.NoVerdict
	if errors.As(err, &nv) {
		return r.finish(status.Errored, withAgent(nv.Reason, r.agentNote()))
	}
	if err != nil {
		return r.finish(status.Errored, err.Error())
	}
	r.row.Score, r.row.Explanation = &v.Score, truncate(v.Explanation, 4<<10)
	if v.Passed {
		return r.finish(status.Passed, "")
	}
	return r.finish(status.Failed, "")
}

// collectLogs keeps what the trial left under /logs, as Harbor collects it:
// /logs/verifier from the verifier's sandbox, /logs/agent and
// /logs/artifacts from the agent's (the same one in shared mode); the
// files directly in each, bounded as a task's artifacts are.
func (r *attemptRun) collectLogs(vsb sandbox.Sandbox, mode string) {
	agent := []string{"/logs/agent/*", "/logs/artifacts/*"}
	if mode == "separate" {
		r.harborLogs = append(gatherUnder(r.ctx, vsb, []string{"/logs/verifier/*"}, harborLogs), gatherUnder(r.ctx, r.sb, agent, harborLogs)...)
		return
	}
	r.harborLogs = gatherUnder(r.ctx, vsb, append([]string{"/logs/verifier/*"}, agent...), harborLogs)
}

// verifierSandbox is where the verifier runs: the agent's own sandbox,
// resumed (shared; as it is, when it keeps the agent's processes), or a
// fresh one of the sample's image holding a copy of the agent's workdir
// (separate); cleanup removes a fresh one.
func (r *attemptRun) verifierSandbox(mode string) (sandbox.Sandbox, func(), error) {
	if mode == "separate" {
		g, _, err := r.sb.Grader(r.ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		cleanup := func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 2*time.Minute)
			defer cancel()
			if err := g.Close(cctx); err != nil {
				fmt.Fprintf(r.e.x.Stderr, "steward: remove the verifier's sandbox %s: %v\n", g.ID(), err)
			}
		}
		if gp, ok := g.(gatewayPeer); ok && r.e.x.Bind != nil && r.token != "" {
			if ip, ok := gp.GatewayPeer(); ok {
				if err := r.e.x.Bind(r.ctx, r.token, ip); err != nil {
					cleanup()
					return nil, nil, sandbox.InfraError(fmt.Errorf("bind the gateway token to the verifier's sandbox: %w", err))
				}
			}
		}
		return g, cleanup, nil
	}
	if r.keepsProcesses() {
		return r.sb, func() {}, nil // never settled: as the agent left it
	}
	res, ok := r.sb.(sandbox.Resumer)
	if !ok {
		return nil, nil, fmt.Errorf("the %s provider cannot run a verifier in the agent's own sandbox (environment_mode shared)", r.e.x.TaskProv[r.a.Task])
	}
	if err := res.Resume(r.ctx); err != nil {
		return nil, nil, err
	}
	return r.sb, func() {}, nil
}

// verifyErr ends an attempt whose verifier could not run: infra when the
// provider says so, else errored; what the agent left that cannot be
// judged (sandbox.ErrAgentWorkdir) fails it, as for a scorer.
func (r *attemptRun) verifyErr(err error, what string) record.Attempt {
	if errors.Is(err, sandbox.ErrAgentWorkdir) {
		zero := 0.0
		r.row.Score, r.row.Explanation = &zero, truncate(err.Error(), 4<<10)
		return r.finish(status.Failed, "")
	}
	if errors.Is(err, sandbox.ErrInfra) || r.ctx.Err() != nil {
		r.healthy = false
		return r.classify(err, what)
	}
	return r.finish(status.Errored, withAgent(what+": "+err.Error(), r.agentNote()))
}

// agentNote is what the agent's non-zero exit adds to an errored reason.
func (r *attemptRun) agentNote() string {
	if r.row.AgentExit == 0 {
		return ""
	}
	n := fmt.Sprintf("agent exited %d", r.row.AgentExit)
	if r.row.AgentOutput != "" {
		n += ": " + r.row.AgentOutput
	}
	return n
}
