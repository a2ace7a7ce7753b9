package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/proctree"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/status"
)

// The supervisor's side of the boundary: a Pool starts the worker
// processes, hands each its slice of the plan, runs attempts in them,
// keeps them answering (the heartbeat) and turns a worker that crashed,
// hung or broke the protocol into errored or infra rows for its tasks.

// Arg is the hidden subcommand that runs a worker process (W1).
const Arg = "__worker"

// DefaultTimeout is how long a worker may stay silent (no answer to the
// once-a-second heartbeat) before the supervisor kills it.
const DefaultTimeout = 20 * time.Second

// Config is what a Pool needs of the supervisor.
type Config struct {
	// Env is the run's attempt environment, as the supervisor would run
	// attempts in its own process (the plan with its fingerprints, the
	// prepared specs, the providers, the gateway's addresses, and the
	// hooks Bind, Deadline and Started, which answer the workers'
	// questions): each worker is handed its tasks' slice of it.
	Env *attempt.Env
	// LockPath is the run's lock (labels and sweeps of the workers' providers).
	LockPath string
	// Environ is the workers' environment (the secrets left out).
	Environ []string
	// Timeout is DefaultTimeout when 0; MaxWorkers packs tasks into fewer
	// processes when set (max_workers).
	Timeout    time.Duration
	MaxWorkers int
	// Stderr takes the pool's notes and the workers' stderr, each through
	// Scrubber on its way.
	Stderr   io.Writer
	Scrubber *secret.Scrubber
	// Gateway makes the gateway listen where a worker's sandboxes reach it
	// and returns the URL they use.
	Gateway func(sandbox.GatewayAddr) (string, error)
	// Lost is told a worker is gone, once for each of its tasks: the
	// task's queued attempts end with st and reason (W1: a crash costs its
	// tasks, never the run).
	Lost func(task int, st status.Attempt, reason string)
}

func (c *Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Pool is the run's worker processes; its zero value runs none.
type Pool struct {
	cfg    *Config
	procs  []*proc
	byTask map[int]*proc
}

// proc is one worker process.
type proc struct {
	cfg   *Config
	name  string
	tasks []int
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *msgWriter // the worker's stdin
	// pings wakes the pinger: the heartbeat never blocks on a full pipe.
	pings chan struct{}
	// goroutines tracks the reader, the heartbeat and the pinger.
	goroutines sync.WaitGroup

	// mu guards pending, closing and dead (reader, attempts, closeTask).
	mu      sync.Mutex
	pending map[int]chan record.Attempt
	closing map[int]chan bool
	ready   chan error
	dead    error
	done    chan struct{}
	tail    *tailBuffer
	stderr  *secret.Writer        // the worker's stderr, scrubbed on its way to ours
	arts    attempt.ArtifactStore // artifacts that came with results

	// Heartbeat: the supervisor pings, the worker answers; lastSeen is the
	// time of the worker's last message (UnixNano), killed the reason the
	// supervisor killed it (nil = it was not).
	lastSeen atomic.Int64
	killed   atomic.Pointer[string]
}

func newProc(cfg *Config, name string, tasks []int) *proc {
	return &proc{cfg: cfg, name: name, tasks: tasks,
		pending: map[int]chan record.Attempt{}, closing: map[int]chan bool{},
		ready: make(chan error, 1), done: make(chan struct{}), tail: &tailBuffer{max: 4096}, pings: make(chan struct{}, 1)}
}

func (w *proc) send(m wireMsg) error { return w.out.send(m) }

// Start starts the worker processes (one per task with attempts to run, or
// MaxWorkers), hands each its slice of the plan and waits until each has
// made its providers and found the gateway. ctx ending first stops them.
func Start(ctx context.Context, cfg Config) (*Pool, error) {
	var withWork []int
	for i := range cfg.Env.Plan.Tasks {
		if taskHasWork(cfg.Env.Plan, i) {
			withWork = append(withWork, i)
		}
	}
	n := len(withWork)
	if m := cfg.MaxWorkers; m > 0 && m < n {
		n = m
	}
	pool := &Pool{cfg: &cfg, byTask: map[int]*proc{}}
	groups := make([][]int, n)
	for k, ti := range withWork {
		groups[k%n] = append(groups[k%n], ti)
	}
	for _, tasks := range groups {
		w, err := pool.start(tasks)
		if w != nil {
			pool.procs = append(pool.procs, w)
			for _, ti := range tasks {
				pool.byTask[ti] = w
			}
		}
		if err != nil {
			pool.Shutdown()
			return nil, err
		}
	}
	for _, w := range pool.procs {
		select {
		case err := <-w.ready:
			if err != nil {
				pool.Shutdown()
				return nil, err
			}
		case <-ctx.Done():
			pool.Shutdown()
			return nil, ctx.Err()
		}
	}
	return pool, nil
}

func taskHasWork(p *plan.Plan, i int) bool {
	for _, a := range p.Attempts {
		if a.Task == i && a.Action == plan.ActionRun {
			return true
		}
	}
	return false
}

// start starts one worker for tasks and hands it their slice of the plan.
func (p *Pool) start(tasks []int) (*proc, error) {
	cfg := p.cfg
	var names []string
	for _, ti := range tasks {
		names = append(names, cfg.Env.Plan.Tasks[ti].Task.Name)
	}
	w := newProc(cfg, strings.Join(names, ","), tasks)
	cmd := exec.Command(cfg.Env.Exe, Arg, "--for", w.name) // --for names the tasks in ps
	cmd.Env = cfg.Environ
	// A process group of its own: a signal to the supervisor's group (a
	// terminal's ^C, a CI runner killing the job's group) leaves the worker
	// alive to remove its sandboxes once it sees the supervisor gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.stderr = secret.NewWriter(cfg.Stderr, cfg.Scrubber)
	cmd.Stderr = io.MultiWriter(w.stderr, w.tail)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("start worker for %s: %w", w.name, err))
	}
	w.cmd, w.in, w.out = cmd, in, &msgWriter{w: in}
	w.lastSeen.Store(time.Now().UnixNano())
	every := min(time.Second, cfg.timeout()/3)
	w.goroutines.Add(3)
	go func() { defer w.goroutines.Done(); w.read(out) }()
	go func() { defer w.goroutines.Done(); w.heartbeat(clock.Real(), every, cfg.timeout()) }()
	go func() { defer w.goroutines.Done(); w.pinger() }()
	if err := handOver(cfg.Env, cfg.LockPath, tasks, w.send); err != nil {
		w.kill(fmt.Sprintf("worker process for %s: hand over its plan: %v; killed", w.name, err))
		return w, fmt.Errorf("start worker for %s: %w", w.name, err)
	}
	return w, nil
}

// read takes the worker's lines until its stdout ends, then settles what
// it left: its pending attempts and task closes, and its tasks (Lost).
func (w *proc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxWorkerLine)
	broken := false
	for sc.Scan() {
		w.lastSeen.Store(time.Now().UnixNano())
		if broken {
			continue // killed for a protocol error: drain until it is gone
		}
		if err := w.handle(sc.Bytes()); err != nil {
			// A line the supervisor cannot read is the worker's failure,
			// never skipped: its tasks end with the reason.
			broken = true
			w.kill(fmt.Sprintf("worker process for %s broke the protocol: %v; killed", w.name, err))
		}
	}
	if err := sc.Err(); err != nil && !broken {
		w.kill(fmt.Sprintf("worker process for %s broke the protocol: read its output: %v; killed", w.name, err))
	}
	err := w.cmd.Wait()
	if w.stderr != nil { // unset when no stderr was piped (protocol tests)
		_ = w.stderr.Flush()
	}
	st, reason := w.endReason(err)
	w.mu.Lock()
	w.dead = errors.New(reason)
	pending := w.pending
	closing := w.closing
	w.pending, w.closing = map[int]chan record.Attempt{}, map[int]chan bool{}
	w.mu.Unlock()
	select {
	case w.ready <- w.dead:
	default:
	}
	for _, ch := range pending {
		close(ch)
	}
	for _, ch := range closing {
		ch <- false
	}
	close(w.done)
	// The worker's tasks cost it (W1): their queued attempts end with the reason.
	if w.cfg.Lost != nil {
		for _, ti := range w.tasks {
			w.cfg.Lost(ti, st, reason)
		}
	}
}

// endReason says how a worker that is gone (waited for with err) ended: it
// crashed (errored, with the panic or first line of its stderr's tail), or
// the supervisor killed it (infra, with why).
func (w *proc) endReason(err error) (status.Attempt, string) {
	reason := "worker process for " + w.name + " ended"
	st := status.Errored
	if err != nil {
		reason = fmt.Sprintf("worker process for %s crashed (%v)", w.name, err)
	}
	if k := w.killed.Load(); k != nil {
		// The supervisor reaped it: the infrastructure failed, not the agent.
		reason, st, err = *k, status.Infra, nil
	}
	if t := strings.TrimSpace(w.tail.String()); t != "" && err != nil {
		if i := strings.Index(t, "panic:"); i >= 0 {
			t = t[i:]
		}
		reason += ": " + firstLine(t)
	}
	return st, reason
}

// handle acts on one line from the worker; an unreadable line, an unknown
// op or a message the supervisor never asked for is an error.
func (w *proc) handle(line []byte) error {
	m, err := decodeMsg(line)
	if err != nil {
		return err
	}
	x := w.cfg.Env
	switch m := m.(type) {
	case *msgPong:
	case *msgGateway:
		url, err := w.cfg.Gateway(sandbox.GatewayAddr{Listen: m.Listen, Host: m.Host, Proxied: m.Proxied})
		_ = w.send(msgGatewayURL{Provider: m.Provider, URL: url, Err: toWireErr(err)})
	case *msgBind:
		ip, err := netip.ParseAddr(m.Host)
		if err == nil {
			err = x.Bind(context.Background(), m.Token, ip)
		}
		_ = w.send(msgBound{ID: m.ID, Err: toWireErr(err)})
	case *msgDeadline:
		_ = w.send(msgBound{ID: m.ID, Err: toWireErr(x.Deadline(context.Background(), m.Seq, m.Deadline))})
	case *msgReady:
		select {
		case w.ready <- m.Err.err():
		default:
			return errors.New("ready sent twice")
		}
	case *msgResult:
		return w.result(m)
	case *msgStarted:
		if x.Started != nil {
			x.Started(m.Seq)
		}
	case *msgClosed:
		w.mu.Lock()
		ch := w.closing[m.Task]
		delete(w.closing, m.Task)
		w.mu.Unlock()
		if ch == nil {
			return fmt.Errorf("closed task %d, which it was not closing", m.Task)
		}
		ch <- m.OK
	default:
		return fmt.Errorf("unexpected %s message from a worker", m.op())
	}
	return nil
}

// result hands an attempt's row (and artifacts) to the attempt waiting for it.
func (w *proc) result(m *msgResult) error {
	if m.Row == nil {
		return fmt.Errorf("result for attempt %d without a row", m.Seq)
	}
	w.mu.Lock()
	ch := w.pending[m.Seq]
	delete(w.pending, m.Seq)
	w.mu.Unlock()
	if ch == nil {
		return fmt.Errorf("result for attempt %d, which it was not running", m.Seq)
	}
	w.arts.Put(m.Seq, m.Artifacts)
	ch <- *m.Row
	return nil
}

// deadStatus is the status of attempts a dead worker never answered.
func (w *proc) deadStatus() status.Attempt {
	if w.killed.Load() != nil {
		return status.Infra
	}
	return status.Errored
}

// heartbeat pings the worker every interval (each second, or a third of
// the timeout when shorter) and kills it once it has said nothing for
// timeout by clk: a stopped or hung worker costs its tasks (infra errors
// with the reason), never the run.
func (w *proc) heartbeat(clk clock.Clock, every, timeout time.Duration) {
	for {
		t := clk.NewTimer(every)
		select {
		case <-w.done:
			t.Stop()
			return
		case <-t.C():
		}
		silent := clk.Now().Sub(time.Unix(0, w.lastSeen.Load()))
		if silent > timeout {
			w.kill(fmt.Sprintf("worker process for %s unresponsive: no answer to the heartbeat for %s (timeout %s); killed", w.name, silent.Round(time.Second), timeout))
			return
		}
		select { // a full pipe must not stop the watch
		case w.pings <- struct{}{}:
		default:
		}
	}
}

// pinger sends the heartbeat's pings until the worker is gone.
func (w *proc) pinger() {
	for {
		select {
		case <-w.done:
			return
		case <-w.pings:
			_ = w.send(msgPing{})
		}
	}
}

// kill ends a worker that stopped answering, with every process below it
// (a stopped worker cannot remove its agents itself).
func (w *proc) kill(reason string) {
	if !w.killed.CompareAndSwap(nil, &reason) {
		return
	}
	fmt.Fprintf(w.cfg.Stderr, "steward: %s\n", reason)
	pid := w.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP) // it forks no more while its tree is killed
	proctree.KillDescendants(pid)
	_ = w.cmd.Process.Kill()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Run runs one try of a in its task's worker with its gateway tokens and
// returns its row; a worker that is gone (or goes) answers with a row that
// says why (errored, or infra when the supervisor killed it).
func (p *Pool) Run(ctx context.Context, a *plan.Attempt, tok attempt.Tokens) record.Attempt {
	w := p.byTask[a.Task]
	errRow := func() record.Attempt {
		now := time.Now()
		return record.Attempt{RunID: p.cfg.Env.RunID, Seq: a.Seq, Task: p.cfg.Env.Plan.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: w.deadStatus(), Reason: w.dead.Error(), Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Started: now, Finished: now, Source: a.Sample.Source}
	}
	ch := make(chan record.Attempt, 1)
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return errRow()
	}
	w.pending[a.Seq] = ch
	w.mu.Unlock()
	if err := w.send(msgAttempt{Seq: a.Seq, Token: tok.Agent, Grading: tok.Grading}); err != nil {
		<-w.done
		return errRow()
	}
	select {
	case row, ok := <-ch:
		if !ok {
			return errRow()
		}
		return row
	case <-ctx.Done():
	}
	// Aborted: the worker interrupts the attempt and still answers with
	// its row (what ran, the log); a worker that cannot is killed by the
	// heartbeat and the row says why.
	_ = w.send(msgAbort{})
	row, ok := <-ch
	if !ok {
		return errRow()
	}
	return row
}

// TakeArtifacts returns (and forgets) the artifacts that came with attempt
// seq's result.
func (p *Pool) TakeArtifacts(seq int) []record.Artifact {
	if p.cfg == nil {
		return nil
	}
	a := p.cfg.Env.Plan.BySeq(seq)
	if a == nil {
		return nil
	}
	if w := p.byTask[a.Task]; w != nil {
		return w.arts.Take(seq)
	}
	return nil
}

// CloseTask removes the task's pooled sandboxes in its worker; false when
// some failed or the worker is gone (a crashed worker never tore them
// down: the task's lease stays held).
func (p *Pool) CloseTask(ctx context.Context, task int) bool {
	w := p.byTask[task]
	if w == nil {
		return true
	}
	ch := make(chan bool, 1)
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return false
	}
	w.closing[task] = ch
	w.mu.Unlock()
	if err := w.send(msgCloseTask{Task: task}); err != nil {
		return false
	}
	select {
	case ok := <-ch:
		return ok
	case <-ctx.Done():
		return false
	}
}

// Abort interrupts every running attempt in every worker.
func (p *Pool) Abort() {
	for _, w := range p.procs {
		_ = w.send(msgAbort{})
	}
}

// Shutdown asks the workers to finalize their providers and exit, then
// waits for them (a worker that does not end within two minutes is killed).
func (p *Pool) Shutdown() {
	for _, w := range p.procs {
		_ = w.send(msgShutdown{})
		_ = w.in.Close()
	}
	for _, w := range p.procs {
		t := time.NewTimer(2 * time.Minute)
		select {
		case <-w.done:
		case <-t.C:
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		t.Stop()
		w.goroutines.Wait()
	}
}

type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
