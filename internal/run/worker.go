package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/runlock"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/proctree"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/status"
)

// WorkerArg is the hidden subcommand that runs a worker process (W1).
const WorkerArg = "__worker"

type workerInit struct {
	EvalSet     string                 `json:"evalset"`
	Flags       evalset.FleetOverrides `json:"flags"`
	TaskGlobs   []string               `json:"task_globs"`
	SampleGlobs []string               `json:"sample_globs"`
	RunID       string                 `json:"run_id"`
	LockPath    string                 `json:"lock_path"`
	Exe         string                 `json:"exe"`
	Model       string                 `json:"model"`
	Tasks       []int                  `json:"tasks"`
	TaskProv    []string               `json:"task_prov"`
	// What the supervisor prepared once for the run (W1): each task's image
	// (build: directories built), the gateway URL per provider, and the
	// providers' run-wide resources (networks) for the worker's providers
	// to adopt instead of making their own.
	Images []string `json:"images,omitempty"`
	// SampleImages are the images of samples with environments of their
	// own (a Harbor dataset's), by sampleKey.
	SampleImages map[string]string `json:"sample_images,omitempty"`
	// SampleErrors: the samples whose own environment could not be prepared.
	SampleErrors map[string]attempt.SampleEnvError `json:"sample_errors,omitempty"`
	GatewayURL   map[string]string                 `json:"gateway_url,omitempty"`
	Shared       map[string]json.RawMessage        `json:"shared,omitempty"`
	// JudgeURL is the gateway's loopback listener for the model judge.
	JudgeURL string `json:"judge_url,omitempty"`
	// Extras are --confirm's attempts, added to the rebuilt plan.
	Extras []plan.Extra `json:"extras,omitempty"`
	// Planned are the supervisor's attempts of the worker's tasks, with
	// their fingerprints (resolved images included): the worker's rebuilt
	// plan must match them part for part, and runs them under these (issue
	// 26 item 3: an edit during the launch never produces a result under a
	// fingerprint whose definition did not).
	Planned []plannedAttempt `json:"planned,omitempty"`
}

// plannedAttempt is one attempt as the supervisor planned it.
type plannedAttempt struct {
	Seq         int               `json:"seq"`
	Task        int               `json:"task"`
	Sample      string            `json:"sample"`
	Number      int               `json:"attempt"`
	Fingerprint string            `json:"fingerprint"`
	Parts       map[string]string `json:"parts"`
}

// adoptPlanned checks the worker's rebuilt plan against the supervisor's
// attempts of its tasks and gives its attempts the supervisor's
// fingerprints; any difference (an edit to the eval set or an input since
// the supervisor planned) is refused, naming what changed.
func adoptPlanned(p *plan.Plan, tasks []int, planned []plannedAttempt) error {
	mine := map[int]bool{}
	for _, t := range tasks {
		mine[t] = true
	}
	// The supervisor's plan may hold fewer (a shard keeps its own); each
	// of them must be the worker's, unchanged.
	bySeq := map[int]*plan.Attempt{}
	for _, a := range p.Attempts {
		if mine[a.Task] {
			bySeq[a.Seq] = a
		}
	}
	changed := func(what string) error {
		return fmt.Errorf("worker: the eval set changed since the supervisor planned it: %s; nothing of it is run (launch again to run the new definition)", what)
	}
	for _, pa := range planned {
		a := bySeq[pa.Seq]
		name := p.Tasks[pa.Task].Task.Name + "/" + pa.Sample
		if a == nil || a.Task != pa.Task || a.Sample.ID != pa.Sample || a.Number != pa.Number {
			return changed(fmt.Sprintf("attempt %d is no longer %s#%d", pa.Seq, name, pa.Number))
		}
		var diff []string
		for k, v := range pa.Parts {
			if k != "image" && a.Parts[k] != v {
				diff = append(diff, k)
			}
		}
		for k := range a.Parts {
			if _, ok := pa.Parts[k]; !ok && k != "image" {
				diff = append(diff, k)
			}
		}
		if len(diff) > 0 {
			sort.Strings(diff)
			return changed(fmt.Sprintf("%s: its %s changed", name, strings.Join(diff, ", ")))
		}
		a.Fingerprint, a.Parts = pa.Fingerprint, pa.Parts
	}
	return nil
}

// sharer is a provider whose run-wide resources (networks) one process
// prepares and others adopt.
type sharer interface {
	SharedState() (json.RawMessage, error)
	AdoptShared(json.RawMessage) error
}

// ---- supervisor side ----

type workerProc struct {
	l     *launcher
	name  string
	tasks []int
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *msgWriter // the worker's stdin
	// pings wakes the pinger: the heartbeat never blocks on a full pipe.
	pings chan struct{}
	// goroutines tracks the reader, the heartbeat and the pinger.
	goroutines sync.WaitGroup

	mu      sync.Mutex
	pending map[int]chan record.Attempt
	closing map[int]chan bool
	ready   chan error
	dead    error
	done    chan struct{}
	tail    *tailBuffer
	stderr  *secret.Writer        // the worker's stderr, scrubbed on its way to ours
	arts    attempt.ArtifactStore // artifacts that came with results (artifacts.go)

	// mu guards pending, closing and dead (reader, attempts, closeTask).
	// Heartbeat: the supervisor pings, the worker answers; lastSeen is the
	// time of the worker's last message (UnixNano), killed the reason the
	// supervisor killed it ("" = it was not).
	lastSeen atomic.Int64
	killed   atomic.Pointer[string]
}

type workerPool struct {
	l      *launcher
	procs  []*workerProc
	byTask map[int]*workerProc
}

func (w *workerProc) send(m wireMsg) error { return w.out.send(m) }

// startWorkers starts the worker processes and waits until each has
// prepared its sandboxes and found the gateway.
func (l *launcher) startWorkers(ctx context.Context) (*workerPool, error) {
	var withWork []int
	for i := range l.p.Tasks {
		if l.taskHasWork(i) {
			withWork = append(withWork, i)
		}
	}
	n := len(withWork)
	if m := l.es.Fleet.MaxWorkers; m > 0 && m < n {
		n = m
	}
	pool := &workerPool{l: l, byTask: map[int]*workerProc{}}
	if n == 0 {
		return pool, nil
	}
	groups := make([][]int, n)
	for k, ti := range withWork {
		groups[k%n] = append(groups[k%n], ti)
	}
	for k, tasks := range groups {
		w, err := l.startWorker(ctx, k, tasks)
		if err != nil {
			pool.shutdown()
			return nil, err
		}
		pool.procs = append(pool.procs, w)
		for _, ti := range tasks {
			pool.byTask[ti] = w
		}
	}
	for _, w := range pool.procs {
		select {
		case err := <-w.ready:
			if err != nil {
				pool.shutdown()
				return nil, err
			}
		case <-ctx.Done():
			pool.shutdown()
			return nil, ctx.Err()
		}
	}
	return pool, nil
}

// workerEnv is the supervisor's environment without a secret: the model's
// real key (and the variables that usually hold one), the variables the eval
// set (secret_env) and _steward.yaml (secrets) name, the GitHub token and
// the runner's own tokens. A worker never holds them (host hooks, which may
// use them, run in the supervisor).
func (l *launcher) workerEnv() []string {
	drop := map[string]bool{}
	for _, k := range secret.Names([]string{l.es.Model.APIKeyEnv}, l.es.SecretEnv, l.es.Fleet.Secrets) {
		drop[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			env = append(env, kv)
		}
	}
	return env
}

func (l *launcher) startWorker(ctx context.Context, k int, tasks []int) (*workerProc, error) {
	var names []string
	for _, ti := range tasks {
		names = append(names, l.p.Tasks[ti].Task.Name)
	}
	w := &workerProc{
		l: l, name: strings.Join(names, ","), tasks: tasks,
		pending: map[int]chan record.Attempt{}, closing: map[int]chan bool{},
		ready: make(chan error, 1), done: make(chan struct{}), tail: &tailBuffer{max: 4096}, pings: make(chan struct{}, 1),
	}
	cmd := exec.Command(l.opts.Exe, WorkerArg, "--for", w.name) // --for names the tasks in ps
	cmd.Env = l.workerEnv()
	// A process group of its own: a signal to the supervisor's group (a
	// terminal's ^C, a CI runner killing the job's group) leaves the worker
	// alive to remove its sandboxes once it sees the supervisor gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.stderr = l.scrubbedStderr()
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
	every := min(time.Second, l.workerTimeout()/3)
	w.goroutines.Add(3)
	go func() { defer w.goroutines.Done(); w.read(out) }()
	go func() { defer w.goroutines.Done(); w.heartbeat(clock.Real(), every, l.workerTimeout()) }()
	go func() { defer w.goroutines.Done(); w.pinger() }()
	init := &workerInit{
		EvalSet: l.es.File, Flags: l.opts.FleetFlags, TaskGlobs: l.opts.TaskGlobs, SampleGlobs: l.opts.SampleGlobs,
		RunID: l.runID, LockPath: l.lockPath(), Exe: l.opts.Exe, Model: l.es.Model.Name, Tasks: tasks, TaskProv: l.taskProv,
		GatewayURL: l.gwURL, JudgeURL: l.judgeURL, Shared: map[string]json.RawMessage{}, Extras: l.extras,
	}
	for _, sp := range l.specs {
		init.Images = append(init.Images, sp.Image)
	}
	mine := map[int]bool{}
	for _, ti := range tasks {
		mine[ti] = true
	}
	for _, a := range l.p.Attempts {
		if mine[a.Task] {
			init.Planned = append(init.Planned, plannedAttempt{Seq: a.Seq, Task: a.Task, Sample: a.Sample.ID, Number: a.Number, Fingerprint: a.Fingerprint, Parts: a.Parts})
		}
	}
	init.SampleImages = sampleImages(l.sampleSpecs)
	if len(l.sampleErrs) > 0 {
		init.SampleErrors = l.sampleErrs
	}
	for name, prov := range l.providers {
		if sh, ok := prov.(sharer); ok {
			if st, err := sh.SharedState(); err == nil {
				init.Shared[name] = st
			}
		}
	}
	if err := w.send(msgInit{Init: init}); err != nil {
		return nil, fmt.Errorf("start worker for %s: %w", w.name, err)
	}
	return w, nil
}

func (w *workerProc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
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
	// The worker's tasks cost it (W1): their queued attempts are errored with the reason.
	for _, ti := range w.tasks {
		w.l.failTask(ti, st, reason)
	}
}

// handle acts on one line from the worker; an unreadable line, an unknown
// op or a message the supervisor never asked for is an error.
func (w *workerProc) handle(line []byte) error {
	m, err := decodeMsg(line)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *msgPong:
	case *msgGateway:
		url, err := w.l.gatewayFor(sandbox.GatewayAddr{Listen: m.Listen, Host: m.Host, Proxied: m.Proxied})
		_ = w.send(msgGatewayURL{Provider: m.Provider, URL: url, Err: toWireErr(err)})
	case *msgBind:
		ip, err := netip.ParseAddr(m.Host)
		if err == nil {
			err = w.l.gw.Bind(m.Token, ip)
		}
		_ = w.send(msgBound{ID: m.ID, Err: toWireErr(err)})
	case *msgDeadline:
		_ = w.send(msgBound{ID: m.ID, Err: toWireErr(w.l.setDeadline(context.Background(), m.Seq, m.Deadline))})
	case *msgReady:
		select {
		case w.ready <- m.Err.err():
		default:
			return errors.New("ready sent twice")
		}
	case *msgResult:
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
	case *msgStarted:
		w.l.started(m.Seq)
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

// deadStatus is the status of attempts a dead worker never answered.
func (w *workerProc) deadStatus() status.Attempt {
	if w.killed.Load() != nil {
		return status.Infra
	}
	return status.Errored
}

// DefaultWorkerTimeout is how long a worker may stay silent (no answer to
// the once-a-second heartbeat) before the supervisor kills it.
const DefaultWorkerTimeout = 20 * time.Second

func (l *launcher) workerTimeout() time.Duration {
	if l.opts.WorkerTimeout > 0 {
		return l.opts.WorkerTimeout
	}
	return DefaultWorkerTimeout
}

// heartbeat pings the worker every interval (each second, or a third of
// the timeout when shorter) and kills it once it has said nothing for
// timeout by clk: a stopped or hung worker costs its tasks (infra errors
// with the reason), never the run.
func (w *workerProc) heartbeat(clk clock.Clock, every, timeout time.Duration) {
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
func (w *workerProc) pinger() {
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
func (w *workerProc) kill(reason string) {
	if !w.killed.CompareAndSwap(nil, &reason) {
		return
	}
	fmt.Fprintf(w.l.opts.Stderr, "steward: %s\n", reason)
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

func (p *workerPool) attempt(ctx context.Context, a *plan.Attempt, tok attempt.Tokens) record.Attempt {
	w := p.byTask[a.Task]
	errRow := func(reason string) record.Attempt {
		now := time.Now()
		return record.Attempt{RunID: p.l.runID, Seq: a.Seq, Task: p.l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Attempt: a.Number,
			Status: w.deadStatus(), Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Started: now, Finished: now, Source: a.Sample.Source}
	}
	ch := make(chan record.Attempt, 1)
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return errRow(w.dead.Error())
	}
	w.pending[a.Seq] = ch
	w.mu.Unlock()
	if err := w.send(msgAttempt{Seq: a.Seq, Token: tok.Agent, Grading: tok.Grading}); err != nil {
		<-w.done
		return errRow(w.dead.Error())
	}
	select {
	case row, ok := <-ch:
		if !ok {
			return errRow(w.dead.Error())
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
		return errRow(w.dead.Error())
	}
	return row
}

func (p *workerPool) closeTask(ctx context.Context, task int) bool {
	w := p.byTask[task]
	if w == nil {
		return true
	}
	ch := make(chan bool, 1)
	w.mu.Lock()
	if w.dead != nil {
		w.mu.Unlock()
		return false // a crashed worker never tore down its sandboxes: the lease stays held
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

// abort interrupts every running attempt in every worker.
func (p *workerPool) abort() {
	for _, w := range p.procs {
		_ = w.send(msgAbort{})
	}
}

// shutdown asks workers to finalize their providers and exit, then waits.
func (p *workerPool) shutdown() {
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

// gatewayFor makes the gateway listen where a worker's sandboxes reach it.
func (l *launcher) gatewayFor(addr sandbox.GatewayAddr) (string, error) {
	listenAddr, host := addr.Listen, addr.Host
	l.gwMu.Lock()
	defer l.gwMu.Unlock()
	key := listenAddr + "|" + host
	if url, ok := l.gwListen[key]; ok {
		return url, nil
	}
	ln, err := listen(listenAddr)
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	l.gwListen[key] = url
	if addr.Proxied {
		l.gwServing.Go(func() error { return l.gw.ServeProxied(l.gwCtx, ln) })
	} else {
		l.gwServing.Go(func() error { return l.gw.Serve(l.gwCtx, ln) })
	}
	return url, nil
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

// ---- worker side ----

// mailbox queues the supervisor's messages for the worker without bound, so
// the reader never stops answering heartbeats while the worker is busy.
type mailbox struct {
	mu     sync.Mutex // guards q, closed and err
	q      []wireMsg
	closed bool
	err    error // why the supervisor's stream ended, when not at its end (a protocol error)
	wake   chan struct{}
	gone   chan struct{} // closed when the supervisor's end of stdin closes
}

func newMailbox() *mailbox {
	return &mailbox{wake: make(chan struct{}, 1), gone: make(chan struct{})}
}

func (b *mailbox) put(m wireMsg) {
	b.mu.Lock()
	b.q = append(b.q, m)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// close ends the stream; err says why when it is not the supervisor's end.
func (b *mailbox) close(err error) {
	b.mu.Lock()
	b.closed = true
	b.err = err
	b.mu.Unlock()
	close(b.gone)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// failure is the protocol error that ended the stream, if one did.
func (b *mailbox) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// get returns the next message; ok is false once the supervisor is gone (or ctx ends).
func (b *mailbox) get(ctx context.Context) (wireMsg, bool) {
	for {
		b.mu.Lock()
		if len(b.q) > 0 {
			m := b.q[0]
			b.q = b.q[1:]
			b.mu.Unlock()
			return m, true
		}
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-b.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// gatewayURL is the supervisor's answer to a gateway question: the next
// message, which must be a gateway_url.
func (b *mailbox) gatewayURL(ctx context.Context) (*msgGatewayURL, error) {
	r, ok := b.get(ctx)
	if !ok {
		if err := b.failure(); err != nil {
			return nil, err
		}
		return nil, errors.New("the supervisor is gone")
	}
	u, isURL := r.(*msgGatewayURL)
	if !isURL {
		return nil, fmt.Errorf("worker: expected gateway_url, the supervisor sent %s", r.op())
	}
	return u, nil
}

// readSupervisor puts the supervisor's messages in box and answers pings at
// once; a line it cannot read ends the stream with the error.
func readSupervisor(in io.Reader, box *mailbox, send func(wireMsg)) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		m, err := decodeMsg(sc.Bytes())
		if err != nil {
			box.close(fmt.Errorf("worker: read from the supervisor: %w", err))
			return
		}
		if _, ok := m.(*msgPing); ok {
			send(msgPong{})
			continue
		}
		box.put(m)
	}
	var err error
	if sc.Err() != nil {
		err = fmt.Errorf("worker: read from the supervisor: %w", sc.Err())
	}
	box.close(err)
}

// Worker runs a worker process: it reads the supervisor's messages on in
// and answers on out. It ends when in closes (the supervisor is gone), when
// ctx ends (a signal, or the caller saw the supervisor die) or on shutdown,
// removing every sandbox it made. Heartbeats ("ping") are answered at once,
// whatever the worker is doing. A line it cannot read (malformed, an
// unknown op, a message out of place) stops it with that error.
func Worker(ctx context.Context, in io.Reader, out io.Writer, stderr io.Writer, providers ProviderFactory, getenv func(string) string) error {
	w := &msgWriter{w: out}
	send := func(m wireMsg) {
		_ = w.send(m) // EPIPE once the supervisor is gone: nobody is left to tell
	}
	box := newMailbox()
	// The reader blocks on stdin; it is not waited for (the process ends
	// with Worker), but everything it feeds stops when it closes the box.
	go readSupervisor(in, box, send)
	first, ok := box.get(ctx)
	init, isInit := first.(*msgInit)
	if !ok || !isInit || init.Init == nil {
		if err := box.failure(); err != nil {
			return err
		}
		return fmt.Errorf("worker: expected an init message")
	}
	ini := init.Init
	var watch sync.WaitGroup // the gone-watcher: it ends with actx
	defer watch.Wait()
	actx, abort := context.WithCancel(ctx)
	defer abort()
	var shuttingDown atomic.Bool
	var work sync.WaitGroup // attempts and task closes
	defer work.Wait()
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-box.gone:
			if !shuttingDown.Load() {
				abort() // the supervisor is gone: stop whatever runs, setup included, and clean up
			}
		case <-actx.Done():
		}
	}()
	x, finalize, err := workerSetup(actx, ini, stderr, providers, getenv, func(m *msgGateway) (*msgGatewayURL, error) {
		send(m)
		return box.gatewayURL(actx)
	})
	defer finalize()
	if err != nil {
		send(msgReady{Err: toWireErr(err)})
		return nil
	}
	x.Fault = getenv("STEWARD_WORKER_FAULT")
	x.Started = func(seq int) { send(msgStarted{Seq: seq}) }
	binds := &binder{wait: map[int]chan *wireErr{}, gone: box.gone}
	x.Bind = func(ctx context.Context, token string, ip netip.Addr) error {
		return binds.bind(ctx, send, token, ip)
	}
	x.Deadline = func(ctx context.Context, seq int, at time.Time) error {
		return binds.ask(ctx, send, func(id int) wireMsg { return msgDeadline{ID: id, Seq: seq, Deadline: at} })
	}
	send(msgReady{})
	ws := &workerServer{ini: ini, box: box, send: send, x: x, ex: attempt.NewExecutor(x), bySeq: map[int]*plan.Attempt{}, actx: actx, abort: abort, binds: binds, work: &work, shuttingDown: &shuttingDown}
	for _, a := range x.Plan.Attempts {
		ws.bySeq[a.Seq] = a
	}
	return ws.serve()
}

// workerServer answers the supervisor's messages once the worker is ready.
type workerServer struct {
	ini          *workerInit
	box          *mailbox
	send         func(wireMsg)
	x            *attempt.Env
	ex           *attempt.Executor
	bySeq        map[int]*plan.Attempt
	actx         context.Context
	abort        context.CancelFunc
	binds        *binder
	work         *sync.WaitGroup // attempts and task closes
	shuttingDown *atomic.Bool
}

// serve runs until shutdown, until the supervisor is gone or until a
// message it cannot act on (an error).
func (ws *workerServer) serve() error {
	for {
		m, ok := ws.box.get(ws.actx)
		if !ok {
			// The supervisor is gone (or broke the protocol): stop what
			// runs, then remove pooled sandboxes too (finalize removes the
			// rest on the way out).
			ws.stop()
			return ws.box.failure() // nil when the supervisor closed its end
		}
		switch m := m.(type) {
		case *msgAttempt:
			ws.attempt(m)
		case *msgBound:
			ws.binds.answer(m)
		case *msgCloseTask:
			ws.work.Add(1)
			go func(task int) {
				defer ws.work.Done()
				ws.send(msgClosed{Task: task, OK: ws.ex.CloseTask(ws.actx, task)})
			}(m.Task)
		case *msgAbort:
			ws.abort()
		case *msgShutdown:
			ws.shuttingDown.Store(true)
			ws.work.Wait()
			return nil
		default:
			ws.stop()
			return fmt.Errorf("worker: unexpected %s message from the supervisor", m.op())
		}
	}
}

func (ws *workerServer) attempt(m *msgAttempt) {
	a := ws.bySeq[m.Seq]
	if a == nil {
		ws.send(msgResult{Seq: m.Seq, Row: &record.Attempt{Seq: m.Seq, Status: status.Errored, Reason: "worker: unknown attempt"}})
		return
	}
	ws.work.Add(1)
	go func(seq int, tok attempt.Tokens) {
		defer ws.work.Done()
		row := ws.ex.Run(ws.actx, a, tok)
		ws.send(msgResult{Seq: seq, Row: &row, Artifacts: ws.ex.TakeArtifacts(seq)})
	}(m.Seq, attempt.Tokens{Agent: m.Token, Grading: m.Grading})
}

// stop aborts what runs, waits for it and removes the pooled sandboxes.
func (ws *workerServer) stop() {
	ws.abort()
	ws.work.Wait()
	for _, ti := range ws.ini.Tasks {
		ws.ex.CloseTask(context.Background(), ti)
	}
	// Nobody is left to remove what the supervisor prepared for the run (its
	// shared networks): the workers' finalize does.
	for _, p := range ws.x.Providers {
		if o, ok := p.(interface{ SupervisorGone() }); ok {
			o.SupervisorGone()
		}
	}
}

// binder asks the supervisor, which holds the gateway, to bind tokens to
// sandbox addresses; each request waits for its own answer, or until the
// supervisor's stream ends (gone): no answer can come after that, whatever
// the caller's context allows.
type binder struct {
	mu   sync.Mutex // guards next and wait
	next int
	wait map[int]chan *wireErr
	gone <-chan struct{}
}

func (b *binder) bind(ctx context.Context, send func(wireMsg), token string, ip netip.Addr) error {
	return b.ask(ctx, send, func(id int) wireMsg { return msgBind{ID: id, Token: token, Host: ip.String()} })
}

// ask sends the message m makes with a fresh id and waits for its bound.
func (b *binder) ask(ctx context.Context, send func(wireMsg), m func(id int) wireMsg) error {
	ch := make(chan *wireErr, 1)
	b.mu.Lock()
	b.next++
	id := b.next
	b.wait[id] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.wait, id)
		b.mu.Unlock()
	}()
	msg := m(id)
	send(msg)
	select {
	case e := <-ch:
		return e.err()
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for the supervisor: %w", msg.op(), ctx.Err())
	case <-b.gone:
		return fmt.Errorf("%s: the supervisor is gone", msg.op())
	}
}

func (b *binder) answer(m *msgBound) {
	b.mu.Lock()
	ch := b.wait[m.ID]
	b.mu.Unlock()
	if ch != nil {
		ch <- m.Err
	}
}

// workerSetup rebuilds the plan, makes the providers for the worker's tasks,
// prepares them and asks the supervisor for the gateway URL of each.
func workerSetup(ctx context.Context, ini *workerInit, stderr io.Writer, providers ProviderFactory, getenv func(string) string, ask func(*msgGateway) (*msgGatewayURL, error)) (*attempt.Env, func(), error) {
	var provs []sandbox.Provider
	finalize := func() {
		for _, p := range provs {
			fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := p.Finalize(fctx); err != nil {
				fmt.Fprintf(stderr, "steward worker: %v\n", err)
			}
			cancel()
		}
	}
	es, err := evalset.Load(ini.EvalSet, evalset.LoadOptions{Getenv: getenv, Flags: ini.Flags})
	if err != nil {
		return nil, finalize, badInput("%v", err)
	}
	p, err := plan.Build(es, plan.Options{TaskGlobs: ini.TaskGlobs, SampleGlobs: ini.SampleGlobs})
	if err != nil {
		return nil, finalize, badInput("%v", err)
	}
	if err := p.AddExtras(ini.Extras); err != nil {
		return nil, finalize, fmt.Errorf("worker: the eval set changed since the supervisor planned it: %w", err)
	}
	if len(p.Tasks) != len(ini.TaskProv) {
		return nil, finalize, fmt.Errorf("worker: the eval set changed since the supervisor planned it (%d tasks, want %d)", len(p.Tasks), len(ini.TaskProv))
	}
	if err := adoptPlanned(p, ini.Tasks, ini.Planned); err != nil {
		return nil, finalize, err
	}
	x := &attempt.Env{Plan: p, Providers: map[string]sandbox.Provider{}, TaskProv: ini.TaskProv, GatewayURL: map[string]string{},
		JudgeURL: ini.JudgeURL, RunID: ini.RunID, Exe: ini.Exe, Model: ini.Model, ModelSettings: modelSettings(es), Stderr: stderr}
	for _, t := range p.Tasks {
		x.Specs = append(x.Specs, specFor(t.Task, ini.RunID))
	}
	x.SampleSpecs, x.SampleErrs = sampleSpecs(p, ini.RunID), map[string]attempt.SampleEnvError{}
	mine := map[int]bool{}
	for _, ti := range ini.Tasks {
		mine[ti] = true
	}
	// A task's own spec is prepared when one of its samples runs in it (a
	// Harbor dataset's never do: each has a spec of its own).
	ownSpec := map[int]bool{}
	for _, a := range p.Attempts {
		if !a.Sample.OwnEnvironment() {
			ownSpec[a.Task] = true
		}
	}
	byProv := map[string][]*sandbox.Spec{}
	for _, ti := range ini.Tasks {
		name := ini.TaskProv[ti]
		if _, ok := byProv[name]; !ok {
			byProv[name] = nil // every task's provider is made, specs or not
		}
		if ownSpec[ti] {
			byProv[name] = append(byProv[name], x.Specs[ti])
		}
	}
	for _, k := range sortedSpecKeys(x.SampleSpecs) {
		ti, _ := taskOfKey(k)
		if !mine[ti] {
			delete(x.SampleSpecs, k) // another worker's
			continue
		}
		if e, ok := ini.SampleErrors[k]; ok {
			x.SampleErrs[k] = e // not prepared again: its attempts end with why
			continue
		}
		if img := ini.SampleImages[k]; img != "" {
			x.SampleSpecs[k].Image = img
		}
		byProv[ini.TaskProv[ti]] = append(byProv[ini.TaskProv[ti]], x.SampleSpecs[k])
	}
	for name, specs := range byProv {
		prov, err := providers.Provider(ctx, name, RunInfo{RunID: ini.RunID, LockPath: ini.LockPath, Stderr: stderr, Settings: es.Fleet.ProviderSettings(), Liveness: runlock.Liveness{}})
		if err != nil {
			return nil, finalize, fmt.Errorf("sandbox provider %s: %w", name, err)
		}
		provs = append(provs, prov)
		x.Providers[name] = prov
		// The supervisor prepared the run once: its images, networks and
		// gateway address are adopted, nothing is built or created again.
		for _, ti := range ini.Tasks {
			if ini.TaskProv[ti] == name && ti < len(ini.Images) && ini.Images[ti] != "" {
				x.Specs[ti].Image = ini.Images[ti]
			}
		}
		url, err := adoptProvider(ctx, ini, name, prov, specs, ask)
		if err != nil {
			return nil, finalize, err
		}
		x.GatewayURL[name] = url
	}
	return x, finalize, nil
}

// adoptProvider adopts what the supervisor prepared for a provider (its
// networks; Prepare only when it shares nothing) and returns the gateway
// URL its sandboxes use, asking the supervisor when it has none yet.
func adoptProvider(ctx context.Context, ini *workerInit, name string, prov sandbox.Provider, specs []*sandbox.Spec, ask func(*msgGateway) (*msgGatewayURL, error)) (string, error) {
	sh, canShare := prov.(sharer)
	if st := ini.Shared[name]; canShare && st != nil {
		if err := sh.AdoptShared(st); err != nil {
			return "", err
		}
	} else if err := prov.Prepare(ctx, specs); err != nil {
		return "", fmt.Errorf("prepare %s sandboxes: %w", name, err)
	}
	if url := ini.GatewayURL[name]; url != "" {
		return url, nil
	}
	addr, err := prov.Gateway(ctx)
	if err != nil {
		return "", fmt.Errorf("find the gateway address for %s sandboxes: %w", name, err)
	}
	r, err := ask(&msgGateway{Provider: name, Listen: addr.Listen, Host: addr.Host, Proxied: addr.Proxied})
	if err != nil {
		return "", fmt.Errorf("ask for the gateway: %w", err)
	}
	if err := r.Err.err(); err != nil {
		return "", err
	}
	return r.URL, nil
}
