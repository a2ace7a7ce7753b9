package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/score"
	"github.com/steward-evals/steward/internal/status"
)

// Executor runs attempts: sandbox from a pool or new, files, setup, agent,
// scorer, teardown, publish.
type Executor struct {
	x     *Env
	mu    sync.Mutex
	pools map[string][]sandbox.Sandbox // pool key -> idle sandboxes
	owner map[string]int               // pool key -> task
	bins  map[sandbox.Sandbox]bool     // sandboxes that hold the steward binary
	arts  ArtifactStore                // collected artifacts by seq (artifacts.go)
}

// attemptSlack is the time an attempt may take beyond its task timeout for
// sandbox creation, file copies and scoring bookkeeping.
const attemptSlack = time.Minute

// Env is what attempt execution needs; the supervisor fills it in
// process, a worker process fills it from its init message (W1).
type Env struct {
	Plan  *plan.Plan
	Specs []*sandbox.Spec
	// SampleSpecs: the specs of samples with environments of their own (internal/specs).
	SampleSpecs map[string]*sandbox.Spec
	// SampleErrs: samples whose own environment could not be prepared.
	SampleErrs map[string]SampleEnvError
	Providers  map[string]sandbox.Provider
	TaskProv   []string
	GatewayURL map[string]string
	// JudgeURL is the gateway's loopback listener the model judge calls
	// ("" when no task has scorer.model_graded).
	JudgeURL string
	RunID    string
	Exe      string
	Model    string
	// ModelSettings is model.settings as JSON ("" when none), for agents
	// (STEWARD_MODEL_SETTINGS; the built-in chat agent sends them).
	ModelSettings string
	Stderr        io.Writer
	// Fault, when set, injects a panic for a task (fault-injection tests of W1).
	Fault string
	// Started, when set, is told an attempt's sandbox exists and it executes
	// (the one definition of running: panel, tend, the ramp's saturation).
	Started func(seq int)
	// Bind restricts an attempt's gateway token to its sandbox's address.
	Bind func(ctx context.Context, token string, ip netip.Addr) error
	// Deadline gives the gateway attempt seq's agent deadline (zero: none; limits.go).
	Deadline func(ctx context.Context, seq int, at time.Time) error
}

// gatewayPeer is a sandbox whose connections to the gateway come from an
// address the gateway sees (Docker: the container's IP on its network).
type gatewayPeer interface {
	GatewayPeer() (netip.Addr, bool)
}

// NewExecutor is an executor of attempts in the environment x.
func NewExecutor(x *Env) *Executor {
	return &Executor{x: x, pools: map[string][]sandbox.Sandbox{}, owner: map[string]int{}, bins: map[sandbox.Sandbox]bool{}}
}

// poolKey: group lanes reuse one sandbox per lane (D3); sandbox_reuse tasks
// keep a pool per task (D2); others use a fresh sandbox per attempt.
func (e *Executor) poolKey(a *plan.Attempt) string {
	if a.Lane != "" {
		return "lane:" + a.Lane
	}
	if e.x.Plan.Tasks[a.Task].Task.SandboxReuse {
		return "task:" + strconv.Itoa(a.Task)
	}
	return ""
}

// Run runs one try with the attempt's gateway tokens and returns its row
// (never publishes; the supervisor scrubs, charges usage and publishes). Its
// steps: a sandbox (fresh, or the lane's or pool's), the token bound to it,
// sample files and setup, the agent, then the verdict (attemptRun's methods).
func (e *Executor) Run(ctx context.Context, a *plan.Attempt, tok Tokens) record.Attempt {
	l := e.x
	if e.x.Fault == "panic:"+l.Plan.Tasks[a.Task].Task.Name {
		panic("injected fault: STEWARD_WORKER_FAULT=" + e.x.Fault)
	}
	t := l.Plan.Tasks[a.Task].Task
	// The whole attempt (sandbox creation included) is bounded: a daemon that
	// stops answering cannot hang the run.
	runCtx := ctx
	ctx, cancelAttempt := context.WithTimeout(ctx, attemptBound(t, a.Sample)+attemptSlack)
	defer cancelAttempt()
	r := &attemptRun{e: e, a: a, t: t, token: tok.Agent, grading: tok.Grading, runCtx: runCtx, ctx: ctx, row: record.Attempt{
		RunID: l.RunID, Seq: a.Seq, Task: t.Name, Sample: a.Sample.ID, Attempt: a.Number,
		Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Started: time.Now(), Source: a.Sample.Source,
	}}
	key := e.poolKey(a)
	sb, err := e.get(ctx, a, key)
	if err != nil {
		return r.classify(err, "create sandbox")
	}
	r.sb, r.healthy, r.row.Sandbox = sb, true, sb.ID()
	if l.Started != nil {
		l.Started(a.Seq)
	}
	defer func() { e.put(key, a.Task, sb, r.healthy) }()
	defer func() { e.collectArtifacts(ctx, sb, a, r.harborLogs) }() // before the sandbox goes back or away
	for _, step := range []func() (record.Attempt, bool){r.bind, r.harborDirs, r.setup, r.agent} {
		if row, done := step(); done {
			return row
		}
	}
	return r.judge()
}

// attemptRun is one attempt in progress on a worker. Each step returns the
// finished row and true when the attempt ends there.
type attemptRun struct {
	e        *Executor
	a        *plan.Attempt
	t        *evalset.Task
	token    string
	grading  string          // the model judge's token ("" unless model_graded)
	runCtx   context.Context // the run's: cancelled means interrupted
	ctx      context.Context // the attempt's: the run's, bounded by timeout + slack
	row      record.Attempt
	sb       sandbox.Sandbox
	healthy  bool // the sandbox may go back to its lane or pool
	env      map[string]string
	deadline time.Time
	logb     strings.Builder
	agentRes sandbox.ExecResult // the agent's run
	// harborLogs are what a Harbor trial left under /logs (harborexec.go).
	harborLogs []record.Artifact
}

func (r *attemptRun) finish(st status.Attempt, reason string) record.Attempt {
	r.row.Status, r.row.Reason = st, reason
	r.row.Finished = time.Now()
	r.row.Duration = r.row.Finished.Sub(r.row.Started)
	return r.row
}

// classify ends the attempt on err: interrupted when the run was cancelled,
// infra when the provider did not answer in time or said so, errored else.
func (r *attemptRun) classify(err error, what string) record.Attempt {
	if r.runCtx.Err() != nil {
		return r.finish(status.Interrupted, "interrupted: the run was cancelled")
	}
	if r.ctx.Err() != nil {
		return r.finish(status.Infra, fmt.Sprintf("%s: the sandbox provider did not answer within the attempt's time (timeout %s + %s): %v", what, r.t.Timeout, attemptSlack, err))
	}
	if errors.Is(err, sandbox.ErrInfra) {
		return r.finish(status.Infra, what+": "+err.Error())
	}
	return r.finish(status.Errored, what+": "+err.Error())
}

// bind makes the token work only from this sandbox's address, before the
// sandbox ever sees it.
func (r *attemptRun) bind() (record.Attempt, bool) {
	l := r.e.x
	if gp, ok := r.sb.(gatewayPeer); ok && l.Bind != nil {
		if ip, ok := gp.GatewayPeer(); ok {
			if err := l.Bind(r.ctx, r.token, ip); err != nil {
				return r.classify(sandbox.InfraError(err), "bind the gateway token to the sandbox"), true
			}
		}
	}
	return record.Attempt{}, false
}

// setup copies the sample's files in and runs the sample's setup; the
// attempt's deadline starts here.
func (r *attemptRun) setup() (record.Attempt, bool) {
	files, err := sampleFiles(r.e.x.Plan.EvalSet, r.a.Sample)
	if err != nil {
		r.healthy = false
		return r.finish(status.Errored, "sample files: "+err.Error()), true
	}
	if len(files) > 0 {
		if err := r.sb.CopyIn(r.ctx, files); err != nil {
			r.healthy = false
			return r.classify(err, "copy sample files"), true
		}
	}
	r.env = r.e.env(r.a, r.token, r.sb)
	// The instruction in files too (bigvalues.go): a large one only there.
	if err := r.agentFiles(); err != nil {
		r.healthy = false
		return r.classify(err, "copy the instruction's files"), true
	}
	r.deadline = time.Now().Add(r.t.Timeout.D())
	if row, done := r.startDeadline(); done { // limits.go: the agent's deadline, told
		return row, true
	}
	if r.a.Sample.Setup == "" {
		return record.Attempt{}, false
	}
	res, err := r.sb.Exec(r.ctx, sandbox.ExecSpec{Shell: r.a.Sample.Setup, Env: r.env, Timeout: time.Until(r.deadline), MaxOutput: 64 << 10})
	r.logb.WriteString(section("sample setup", res))
	r.row.Log = r.logb.String()
	if err != nil {
		r.healthy = false
		return r.classify(err, "sample setup"), true
	}
	if p := execProblemFor("sample setup", res, r.t, r.a.Sample); p != "" {
		r.healthy = !res.OOMKilled
		return r.finish(status.Errored, p), true
	}
	return record.Attempt{}, false
}

// agent runs the agent, then stops everything it started: nothing may run
// on while it is judged (see grade.go), but for a Harbor sample whose
// shared verifier keeps the agent's processes (keepsProcesses).
func (r *attemptRun) agent() (record.Attempt, bool) {
	shell, env, err := r.agentCommand() // harborexec.go: the oracle runs the solution
	if err != nil {
		r.healthy = false
		return r.classify(err, "oracle"), true
	}
	res, err := r.sb.Exec(r.ctx, sandbox.ExecSpec{Shell: shell, Env: env, Timeout: time.Until(r.deadline), Grace: r.t.AgentGraceD(), MaxOutput: 1 << 20})
	r.endDeadline()
	r.logb.WriteString(section("agent", res))
	r.row.Log = tail([]byte(r.logb.String()), 16<<10)
	if err != nil {
		r.healthy = false
		return r.classify(err, "run agent"), true
	}
	// The agent ran to its end: from here on the try is judged, and never
	// retried for another verdict (issue 23 item 2).
	r.row.ReachedJudging = true
	if res.TimedOut && !res.OOMKilled {
		// Its deadline: judged on what it left, as on_limit says (limits.go).
		r.healthy = false
		if row, done := r.timedOut(res); done {
			return row, true
		}
	} else if p := execProblemFor("agent", res, r.t, r.a.Sample); p != "" {
		if res.OOMKilled || res.TimedOut {
			r.healthy = false
		}
		// A scorer command judges what an agent that exited non-zero left
		// (Harbor's rule; judge_failed_agents: false opts out); its exit and
		// output stay beside the verdict. A match has no answer to judge.
		if !(res.ExitCode != 0 && !res.OOMKilled && !res.TimedOut && !res.DiskFull && r.t.JudgesFailedAgents()) {
			return r.finish(status.Errored, p), true
		}
		r.row.AgentExit, r.row.AgentOutput = res.ExitCode, score.OutputTail(res.Stdout, res.Stderr, score.TailBytes)
	}
	// A Harbor sample's shared verifier that keeps the agent's processes
	// (harborexec.go) runs beside them: the sandbox is not settled.
	if !r.keepsProcesses() {
		if err := r.sb.Settle(r.ctx); err != nil {
			r.healthy = false
			return r.classify(err, "stop the agent's processes"), true
		}
	}
	r.agentRes = res
	return record.Attempt{}, false
}

// judge takes the answer (answer.txt, else the agent's output) and runs the scorer.
func (r *attemptRun) judge() record.Attempt {
	answer := strings.TrimSpace(string(r.agentRes.Stdout))
	if b, err := r.sb.CopyOut(r.ctx, "answer.txt"); err == nil {
		answer = strings.TrimSpace(string(b))
	}
	r.row.Answer = truncate(answer, 8<<10)
	if r.a.Sample.Harbor != nil {
		return r.verify() // harborexec.go: the verdict is the reward file
	}
	v, serr := r.e.score(r.ctx, r.sb, r.t, r.a.Sample, answer, r.env, Tokens{r.token, r.grading}, time.Now().Add(r.t.ScorerTimeoutD()), &r.logb)
	r.row.Log = tail([]byte(r.logb.String()), 16<<10)
	agent := ""
	if r.row.AgentExit != 0 {
		agent = fmt.Sprintf("agent exited %d", r.row.AgentExit)
		if r.row.AgentOutput != "" {
			agent += ": " + r.row.AgentOutput
		}
	}
	if serr != nil {
		var nv *score.NoVerdict
		switch {
		case errors.Is(serr, sandbox.ErrAgentWorkdir):
			// What the agent left cannot be judged: its failure, never infra.
			zero := 0.0
			r.row.Score, r.row.Explanation = &zero, truncate(serr.Error(), 4<<10)
			return r.finish(status.Failed, "")
		case errors.Is(serr, sandbox.ErrInfra) || r.ctx.Err() != nil:
			r.healthy = false
			return r.classify(serr, "run scorer")
		case errors.As(serr, &nv):
			return r.finish(status.Errored, withAgent(nv.Reason, agent))
		}
		return r.finish(status.Errored, withAgent(serr.Error(), agent))
	}
	r.row.Score, r.row.Explanation = &v.Score, truncate(v.Explanation, 4<<10)
	if v.Passed {
		return r.finish(status.Passed, "")
	}
	return r.finish(status.Failed, "")
}

// withAgent adds what the agent did to an errored scorer's reason.
func withAgent(reason, agent string) string {
	if agent == "" {
		return reason
	}
	return reason + " (" + agent + ")"
}

func execProblem(what string, res sandbox.ExecResult, t *evalset.Task) string {
	return execProblemFor(what, res, t, nil)
}

// execProblemFor is execProblem naming the limits of sample s's own
// sandbox and timeout where it has them (a Harbor task's).
func execProblemFor(what string, res sandbox.ExecResult, t *evalset.Task, s *evalset.Sample) string {
	mem, disk, timeout := t.Sandbox.Memory, t.Sandbox.Disk, "task timeout "+t.Timeout.String()
	if s != nil && s.Sandbox != nil {
		mem, disk = s.Sandbox.Memory, s.Sandbox.Disk
	}
	if s != nil && s.Timeout > 0 {
		timeout = "agent timeout " + s.Timeout.String()
	}
	switch {
	case res.OOMKilled:
		return fmt.Sprintf("%s ran out of memory (limit %s)", what, mem)
	case res.TimedOut:
		return fmt.Sprintf("%s timed out (%s)", what, timeout)
	case res.DiskFull:
		return fmt.Sprintf("%s exceeded the sandbox's disk quota (disk %s): disk quota exceeded", what, disk)
	case res.ExitCode != 0:
		out := score.OutputTail(res.Stdout, res.Stderr, score.TailBytes)
		if out == "" {
			out = "no output"
		}
		return fmt.Sprintf("%s exited %d: %s", what, res.ExitCode, out)
	}
	return ""
}

func section(name string, res sandbox.ExecResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "── %s (exit %d, %s)\n", name, res.ExitCode, res.Duration.Round(time.Millisecond))
	if len(res.Stdout) > 0 {
		b.WriteString(tail(res.Stdout, 6000))
		b.WriteString("\n")
	}
	if len(res.Stderr) > 0 {
		b.WriteString("stderr: ")
		b.WriteString(tail(res.Stderr, 6000))
		b.WriteString("\n")
	}
	return b.String()
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// env is what every command of the attempt sees.
func (e *Executor) env(a *plan.Attempt, token string, sb sandbox.Sandbox) map[string]string {
	l := e.x
	t := l.Plan.Tasks[a.Task].Task
	input, inputJSON := inputStrings(a.Sample.Input)
	meta, _ := json.Marshal(a.Sample.Metadata)
	env := map[string]string{
		"STEWARD_RUN_ID":     l.RunID,
		"STEWARD_TASK":       t.Name,
		"STEWARD_SAMPLE_ID":  a.Sample.ID,
		"STEWARD_INPUT":      input,
		"STEWARD_INPUT_JSON": inputJSON,
		"STEWARD_ATTEMPT":    strconv.Itoa(a.Number),
		"STEWARD_METADATA":   string(meta),
		"STEWARD_MODEL":      l.Model,
		"STEWARD_WORKDIR":    sb.Workdir(),
	}
	if l.ModelSettings != "" {
		env["STEWARD_MODEL_SETTINGS"] = l.ModelSettings
	}
	for _, kv := range gateway.Env(l.GatewayURL[l.TaskProv[a.Task]], token) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if sandbox.IsOnHost(l.TaskProv[a.Task]) && l.Exe != "" {
		env["STEWARD_BIN"] = l.Exe
	} else if e.hasBin(sb) {
		env["STEWARD_BIN"] = "/opt/steward/steward"
	}
	return env
}

func inputStrings(in any) (text, js string) {
	b, _ := json.Marshal(in)
	switch v := in.(type) {
	case string:
		return v, string(b)
	case []any:
		// Chat messages: the text is the last user message's content.
		for i := len(v) - 1; i >= 0; i-- {
			if m, ok := v[i].(map[string]any); ok && m["role"] == "user" {
				if c, ok := m["content"].(string); ok {
					return c, string(b)
				}
			}
		}
	}
	return string(b), string(b)
}

func sampleFiles(es *evalset.EvalSet, s *evalset.Sample) ([]sandbox.File, error) {
	var out []sandbox.File
	for dst, src := range s.Files {
		data, _, err := es.FileData(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dst, err)
		}
		out = append(out, sandbox.File{Path: dst, Data: data, Mode: 0o644})
	}
	return out, nil
}

// score judges the answer: a scorer command in the sandbox, or a target
// match (internal/score decides; this runs).
func (e *Executor) score(ctx context.Context, sb sandbox.Sandbox, t *evalset.Task, s *evalset.Sample, answer string, env map[string]string, tok Tokens, deadline time.Time, logb *strings.Builder) (score.Verdict, error) {
	if t.Scorer.ModelGraded != nil {
		return e.modelJudge(ctx, t, s, answer, tok.Grading, deadline, logb)
	}
	targets := s.Targets()
	if t.Scorer.Command != "" {
		return e.runScorer(ctx, sb, t, s, targets, answer, env, tok.Agent, deadline, logb)
	}
	ok, expl, err := score.MatchAnswer(t.Scorer.Match, t.Scorer.IgnoreCase, answer, targets)
	if err != nil {
		return score.Verdict{}, err
	}
	if ok {
		return score.Verdict{Passed: true, Score: 1, Explanation: expl}, nil
	}
	return score.Verdict{Explanation: expl}, nil
}

// taskFiles reads the task's `files:`, copied into the workdir of every
// sandbox for every attempt (a reused sandbox's reset removes them).
func taskFiles(es *evalset.EvalSet, t *evalset.Task) ([]sandbox.File, error) {
	var files []sandbox.File
	for dst, src := range t.Files {
		// From the snapshot taken at load, never the disk as it is now.
		b, mode, err := es.FileData(src)
		if err != nil {
			return nil, fmt.Errorf("task file %s: %w", dst, err)
		}
		files = append(files, sandbox.File{Path: dst, Data: b, Mode: mode})
	}
	return files, nil
}

// get returns a sandbox ready for the attempt: idle from its pool (its
// workdir was reset, so the task's files are copied in again), or new
// (created, task files copied in, task setup run).
func (e *Executor) get(ctx context.Context, a *plan.Attempt, key string) (sandbox.Sandbox, error) {
	l := e.x
	t := l.Plan.Tasks[a.Task].Task
	if key != "" {
		e.mu.Lock()
		if p := e.pools[key]; len(p) > 0 {
			sb := p[len(p)-1]
			e.pools[key] = p[:len(p)-1]
			e.mu.Unlock()
			files, err := taskFiles(l.Plan.EvalSet, t)
			if err == nil && len(files) > 0 {
				err = sb.CopyIn(ctx, files)
			}
			if err != nil {
				e.put("", a.Task, sb, false) // not fit for reuse: remove it
				return nil, err
			}
			return sb, nil
		}
		e.mu.Unlock()
	}
	if e, ok := l.SampleErrs[SampleKey(a.Task, a.Sample.ID)]; ok {
		return nil, e.err()
	}
	spec := *l.specOf(a)
	prov := l.Providers[l.TaskProv[a.Task]]
	sb, err := prov.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (sandbox.Sandbox, error) {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = sb.Close(cctx)
		return nil, err
	}
	files, err := taskFiles(l.Plan.EvalSet, t)
	if err != nil {
		return fail(err)
	}
	if !sandbox.IsOnHost(l.TaskProv[a.Task]) && l.Exe != "" && mentionsSteward(t) {
		b, err := os.ReadFile(l.Exe)
		if err != nil {
			return fail(fmt.Errorf("read the steward binary: %w", err))
		}
		files = append(files, sandbox.File{Path: "/opt/steward/steward", Data: b, Mode: 0o755})
		e.mu.Lock()
		e.bins[sb] = true
		e.mu.Unlock()
	}
	if len(files) > 0 {
		if err := sb.CopyIn(ctx, files); err != nil {
			return fail(err)
		}
	}
	if t.Setup != "" {
		env := map[string]string{"STEWARD_TASK": t.Name, "STEWARD_RUN_ID": l.RunID}
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: t.Setup, Env: env, Timeout: t.Timeout.D(), MaxOutput: 64 << 10})
		if err != nil {
			return fail(err)
		}
		if r := execProblem("sandbox setup", res, t); r != "" {
			return fail(errors.New(r))
		}
	}
	return sb, nil
}

func mentionsSteward(t *evalset.Task) bool {
	return strings.Contains(t.Agent+t.Setup+t.Scorer.Command, "STEWARD_BIN")
}

func (e *Executor) hasBin(sb sandbox.Sandbox) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bins[sb]
}

// put returns a sandbox to its pool (reset) or removes it. It runs before
// the scheduler frees the attempt's slot, so exclusive providers never overlap.
func (e *Executor) put(key string, task int, sb sandbox.Sandbox, healthy bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if key != "" && healthy {
		err := sb.Reset(ctx)
		if err == nil {
			e.mu.Lock()
			e.pools[key] = append(e.pools[key], sb)
			e.owner[key] = task
			e.mu.Unlock()
			return
		}
		// The lane goes on in a fresh sandbox, without what this one held: say so.
		fmt.Fprintf(e.x.Stderr, "steward: reset sandbox %s for reuse: %v; it is removed and the next attempt gets a new one\n", sb.ID(), err)
	}
	e.mu.Lock()
	delete(e.bins, sb)
	e.mu.Unlock()
	if err := sb.Close(ctx); err != nil {
		fmt.Fprintf(e.x.Stderr, "steward: remove sandbox %s: %v\n", sb.ID(), err)
	}
}

// CloseTask removes a task's pooled sandboxes; it reports whether all went.
// Removal outlives ctx's cancellation (an aborted run still cleans up) but
// keeps its values, each sandbox bounded by two minutes.
func (e *Executor) CloseTask(ctx context.Context, task int) bool {
	e.mu.Lock()
	var boxes []sandbox.Sandbox
	for k, p := range e.pools {
		if e.owner[k] == task {
			boxes = append(boxes, p...)
			delete(e.pools, k)
		}
	}
	e.mu.Unlock()
	ok := true
	for _, sb := range boxes {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		if err := sb.Close(ctx); err != nil {
			fmt.Fprintf(e.x.Stderr, "steward: remove sandbox %s: %v\n", sb.ID(), err)
			ok = false
		}
		cancel()
	}
	return ok
}
