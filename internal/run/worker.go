package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
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
	"github.com/steward-evals/steward/internal/status"
)

// WorkerArg is the hidden subcommand that runs a worker process (W1).
const WorkerArg = "__worker"

// wmsg is one line of the supervisor ⇄ worker protocol (JSON lines on the
// worker's stdin and stdout).
type wmsg struct {
	Op string `json:"op"`
	// init
	Init *workerInit `json:"init,omitempty"`
	// attempt / result
	Seq   int             `json:"seq,omitempty"`
	Token string          `json:"token,omitempty"`
	Row   *record.Attempt `json:"row,omitempty"`
	// Artifacts the attempt left (with a result).
	Artifacts []record.Artifact `json:"artifacts,omitempty"`
	// close_task / closed
	Task int  `json:"task,omitempty"`
	OK   bool `json:"ok,omitempty"`
	// gateway / gateway_url
	Provider string `json:"provider,omitempty"`
	Listen   string `json:"listen,omitempty"`
	Host     string `json:"host,omitempty"`
	URL      string `json:"url,omitempty"`
	Proxied  bool   `json:"proxied,omitempty"`
	Err      string `json:"err,omitempty"`
}

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
	Images     []string                   `json:"images,omitempty"`
	GatewayURL map[string]string          `json:"gateway_url,omitempty"`
	Shared     map[string]json.RawMessage `json:"shared,omitempty"`
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
	encMu sync.Mutex
	enc   *json.Encoder

	mu      sync.Mutex
	pending map[int]chan record.Attempt
	closing map[int]chan bool
	ready   chan error
	dead    error
	done    chan struct{}
	tail    *tailBuffer
	arts    artifactStore // artifacts that came with results (artifacts.go)

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

func (w *workerProc) send(m wmsg) error {
	w.encMu.Lock()
	defer w.encMu.Unlock()
	return w.enc.Encode(m)
}

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

// workerEnv is the supervisor's environment without the model's real key
// or the GitHub token: a worker never holds them.
func (l *launcher) workerEnv() []string {
	drop := map[string]bool{"GITHUB_TOKEN": true, "INPUT_GITHUB-TOKEN": true, "INPUT_GITHUB_TOKEN": true}
	if k := l.es.Model.APIKeyEnv; k != "" {
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
		ready: make(chan error, 1), done: make(chan struct{}), tail: &tailBuffer{max: 4096},
	}
	cmd := exec.Command(l.opts.Exe, WorkerArg, "--for", w.name) // --for names the tasks in ps
	cmd.Env = l.workerEnv()
	// A process group of its own: a signal to the supervisor's group (a
	// terminal's ^C, a CI runner killing the job's group) leaves the worker
	// alive to remove its sandboxes once it sees the supervisor gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = io.MultiWriter(l.opts.Stderr, w.tail)
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
	w.cmd, w.in, w.enc = cmd, in, json.NewEncoder(in)
	w.lastSeen.Store(time.Now().UnixNano())
	go w.read(out)
	every := min(time.Second, l.workerTimeout()/3)
	tick := time.NewTicker(every)
	go func() {
		w.heartbeat(tick.C, time.Now, l.workerTimeout())
		tick.Stop()
	}()
	init := &workerInit{
		EvalSet: l.es.File, Flags: l.opts.FleetFlags, TaskGlobs: l.opts.TaskGlobs, SampleGlobs: l.opts.SampleGlobs,
		RunID: l.runID, LockPath: l.lockPath(), Exe: l.opts.Exe, Model: l.es.Model.Name, Tasks: tasks, TaskProv: l.taskProv,
		GatewayURL: l.gwURL, Shared: map[string]json.RawMessage{},
	}
	for _, sp := range l.specs {
		init.Images = append(init.Images, sp.Image)
	}
	for name, prov := range l.providers {
		if sh, ok := prov.(sharer); ok {
			if st, err := sh.SharedState(); err == nil {
				init.Shared[name] = st
			}
		}
	}
	if err := w.send(wmsg{Op: "init", Init: init}); err != nil {
		return nil, fmt.Errorf("start worker for %s: %w", w.name, err)
	}
	return w, nil
}

func (w *workerProc) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		w.lastSeen.Store(time.Now().UnixNano())
		var m wmsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		switch m.Op {
		case "gateway":
			url, err := w.l.gatewayFor(sandbox.GatewayAddr{Listen: m.Listen, Host: m.Host, Proxied: m.Proxied})
			reply := wmsg{Op: "gateway_url", Provider: m.Provider, URL: url}
			if err != nil {
				reply.Err = err.Error()
			}
			_ = w.send(reply)
		case "bind":
			reply := wmsg{Op: "bound", Seq: m.Seq}
			ip, err := netip.ParseAddr(m.Host)
			if err == nil {
				err = w.l.gw.Bind(m.Token, ip)
			}
			if err != nil {
				reply.Err = err.Error()
			}
			_ = w.send(reply)
		case "ready":
			var err error
			if m.Err != "" {
				err = errors.New(m.Err)
				if strings.HasPrefix(m.Err, "bad input: ") {
					err = badInput("%s", strings.TrimPrefix(m.Err, "bad input: "))
				}
			}
			w.ready <- err
		case "result":
			w.mu.Lock()
			ch := w.pending[m.Seq]
			delete(w.pending, m.Seq)
			w.mu.Unlock()
			if ch != nil && m.Row != nil {
				w.arts.put(m.Seq, m.Artifacts)
				ch <- *m.Row
			}
		case "started":
			w.l.started(m.Seq)
		case "closed":
			w.mu.Lock()
			ch := w.closing[m.Task]
			delete(w.closing, m.Task)
			w.mu.Unlock()
			if ch != nil {
				ch <- m.OK
			}
		}
	}
	err := w.cmd.Wait()
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

// heartbeat pings the worker at every tick (each second, or a third of the
// timeout when shorter) and kills it once it has said nothing for timeout
// by now's clock: a stopped or hung worker costs its tasks (infra errors
// with the reason), never the run.
func (w *workerProc) heartbeat(tick <-chan time.Time, now func() time.Time, timeout time.Duration) {
	for {
		select {
		case <-w.done:
			return
		case <-tick:
		}
		silent := now().Sub(time.Unix(0, w.lastSeen.Load()))
		if silent > timeout {
			w.kill(fmt.Sprintf("worker process for %s unresponsive: no answer to the heartbeat for %s (timeout %s); killed", w.name, silent.Round(time.Second), timeout))
			return
		}
		go func() { _ = w.send(wmsg{Op: "ping"}) }() // a full pipe must not stop the watch
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

func (p *workerPool) attempt(ctx context.Context, a *plan.Attempt, token string) record.Attempt {
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
	if err := w.send(wmsg{Op: "attempt", Seq: a.Seq, Token: token}); err != nil {
		<-w.done
		return errRow(w.dead.Error())
	}
	row, ok := <-ch
	if !ok {
		return errRow(w.dead.Error())
	}
	return row
}

func (p *workerPool) closeTask(task int) bool {
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
	if err := w.send(wmsg{Op: "close_task", Task: task}); err != nil {
		return false
	}
	return <-ch
}

// abort interrupts every running attempt in every worker.
func (p *workerPool) abort() {
	for _, w := range p.procs {
		_ = w.send(wmsg{Op: "abort"})
	}
}

// shutdown asks workers to finalize their providers and exit, then waits.
func (p *workerPool) shutdown() {
	for _, w := range p.procs {
		_ = w.send(wmsg{Op: "shutdown"})
		_ = w.in.Close()
	}
	for _, w := range p.procs {
		select {
		case <-w.done:
		case <-time.After(2 * time.Minute):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
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
		go func() { _ = l.gw.ServeProxied(l.gwCtx, ln) }()
	} else {
		go func() { _ = l.gw.Serve(l.gwCtx, ln) }()
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
	mu     sync.Mutex
	q      []wmsg
	closed bool
	wake   chan struct{}
	gone   chan struct{} // closed when the supervisor's end of stdin closes
}

func newMailbox() *mailbox {
	return &mailbox{wake: make(chan struct{}, 1), gone: make(chan struct{})}
}

func (b *mailbox) put(m wmsg) {
	b.mu.Lock()
	b.q = append(b.q, m)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *mailbox) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	close(b.gone)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// get returns the next message; ok is false once the supervisor is gone (or ctx ends).
func (b *mailbox) get(ctx context.Context) (wmsg, bool) {
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
			return wmsg{}, false
		}
		select {
		case <-b.wake:
		case <-ctx.Done():
			return wmsg{}, false
		}
	}
}

// Worker runs a worker process: it reads the supervisor's messages on in
// and answers on out. It ends when in closes (the supervisor is gone), when
// ctx ends (a signal, or the caller saw the supervisor die) or on shutdown,
// removing every sandbox it made. Heartbeats ("ping") are answered at once,
// whatever the worker is doing.
func Worker(ctx context.Context, in io.Reader, out io.Writer, stderr io.Writer, providers ProviderFactory, getenv func(string) string) error {
	var encMu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m wmsg) {
		encMu.Lock()
		defer encMu.Unlock()
		_ = enc.Encode(m) // EPIPE once the supervisor is gone: nobody is left to tell
	}
	box := newMailbox()
	go func() {
		defer box.close()
		dec := json.NewDecoder(bufio.NewReader(in))
		for {
			var m wmsg
			if err := dec.Decode(&m); err != nil {
				return
			}
			if m.Op == "ping" {
				send(wmsg{Op: "pong"})
				continue
			}
			box.put(m)
		}
	}()
	first, ok := box.get(ctx)
	if !ok || first.Op != "init" || first.Init == nil {
		return fmt.Errorf("worker: expected an init message")
	}
	ini := first.Init
	actx, abort := context.WithCancel(ctx)
	defer abort()
	var shuttingDown atomic.Bool
	go func() {
		select {
		case <-box.gone:
			if !shuttingDown.Load() {
				abort() // the supervisor is gone: stop whatever runs, setup included, and clean up
			}
		case <-actx.Done():
		}
	}()
	x, finalize, err := workerSetup(actx, ini, stderr, providers, getenv, func(m wmsg) (wmsg, error) {
		send(m)
		r, ok := box.get(actx)
		if !ok {
			return r, errors.New("the supervisor is gone")
		}
		return r, nil
	})
	defer finalize()
	if err != nil {
		msg := err.Error()
		if errors.Is(err, ErrBadInput) {
			msg = "bad input: " + strings.TrimPrefix(msg, "bad input: ")
		}
		send(wmsg{Op: "ready", Err: msg})
		return nil
	}
	x.fault = getenv("STEWARD_WORKER_FAULT")
	x.started = func(seq int) { send(wmsg{Op: "started", Seq: seq}) }
	// Token binding asks the supervisor, which holds the gateway.
	var bindMu sync.Mutex
	bindWait := map[int]chan string{}
	bindSeq := 0
	x.bind = func(ctx context.Context, token string, ip netip.Addr) error {
		ch := make(chan string, 1)
		bindMu.Lock()
		bindSeq++
		id := bindSeq
		bindWait[id] = ch
		bindMu.Unlock()
		defer func() {
			bindMu.Lock()
			delete(bindWait, id)
			bindMu.Unlock()
		}()
		send(wmsg{Op: "bind", Seq: id, Token: token, Host: ip.String()})
		select {
		case e := <-ch:
			if e != "" {
				return errors.New(e)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("bind the gateway token: %w", ctx.Err())
		}
	}
	ex := newExecutor(x)
	send(wmsg{Op: "ready"})
	bySeq := map[int]*plan.Attempt{}
	for _, a := range x.p.Attempts {
		bySeq[a.Seq] = a
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m, ok := box.get(actx)
		if !ok {
			// The supervisor is gone: stop what runs, then remove pooled
			// sandboxes too (finalize removes the rest on the way out).
			abort()
			wg.Wait()
			for _, ti := range ini.Tasks {
				ex.closeTask(ti)
			}
			return nil
		}
		switch m.Op {
		case "attempt":
			a := bySeq[m.Seq]
			if a == nil {
				send(wmsg{Op: "result", Seq: m.Seq, Row: &record.Attempt{Seq: m.Seq, Status: status.Errored, Reason: "worker: unknown attempt"}})
				continue
			}
			wg.Add(1)
			go func(seq int, token string) {
				defer wg.Done()
				row := ex.attempt(actx, a, token)
				send(wmsg{Op: "result", Seq: seq, Row: &row, Artifacts: ex.takeArtifacts(seq)})
			}(m.Seq, m.Token)
		case "bound":
			bindMu.Lock()
			ch := bindWait[m.Seq]
			bindMu.Unlock()
			if ch != nil {
				ch <- m.Err
			}
		case "close_task":
			wg.Add(1)
			go func(task int) {
				defer wg.Done()
				send(wmsg{Op: "closed", Task: task, OK: ex.closeTask(task)})
			}(m.Task)
		case "abort":
			abort()
		case "shutdown":
			shuttingDown.Store(true)
			wg.Wait()
			return nil
		}
	}
}

// workerSetup rebuilds the plan, makes the providers for the worker's tasks,
// prepares them and asks the supervisor for the gateway URL of each.
func workerSetup(ctx context.Context, ini *workerInit, stderr io.Writer, providers ProviderFactory, getenv func(string) string, ask func(wmsg) (wmsg, error)) (*execEnv, func(), error) {
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
	if len(p.Tasks) != len(ini.TaskProv) {
		return nil, finalize, fmt.Errorf("worker: the eval set changed since the supervisor planned it (%d tasks, want %d)", len(p.Tasks), len(ini.TaskProv))
	}
	x := &execEnv{p: p, providers: map[string]sandbox.Provider{}, taskProv: ini.TaskProv, gwURL: map[string]string{},
		runID: ini.RunID, exe: ini.Exe, model: ini.Model, modelSettings: modelSettings(es), stderr: stderr}
	for _, t := range p.Tasks {
		x.specs = append(x.specs, specFor(t.Task, ini.RunID))
	}
	byProv := map[string][]*sandbox.Spec{}
	for _, ti := range ini.Tasks {
		byProv[ini.TaskProv[ti]] = append(byProv[ini.TaskProv[ti]], x.specs[ti])
	}
	for name, specs := range byProv {
		prov, err := providers.Provider(ctx, name, RunInfo{RunID: ini.RunID, LockPath: ini.LockPath, Stderr: stderr})
		if err != nil {
			return nil, finalize, fmt.Errorf("sandbox provider %s: %w", name, err)
		}
		provs = append(provs, prov)
		x.providers[name] = prov
		// The supervisor prepared the run once: its images, networks and
		// gateway address are adopted, nothing is built or created again.
		for _, ti := range ini.Tasks {
			if ini.TaskProv[ti] == name && ti < len(ini.Images) && ini.Images[ti] != "" {
				x.specs[ti].Image = ini.Images[ti]
			}
		}
		sh, canShare := prov.(sharer)
		if st := ini.Shared[name]; canShare && st != nil {
			if err := sh.AdoptShared(st); err != nil {
				return nil, finalize, err
			}
		} else if err := prov.Prepare(ctx, specs); err != nil {
			return nil, finalize, fmt.Errorf("prepare %s sandboxes: %w", name, err)
		}
		if url := ini.GatewayURL[name]; url != "" {
			x.gwURL[name] = url
			continue
		}
		addr, err := prov.Gateway(ctx)
		if err != nil {
			return nil, finalize, fmt.Errorf("find the gateway address for %s sandboxes: %w", name, err)
		}
		r, err := ask(wmsg{Op: "gateway", Provider: name, Listen: addr.Listen, Host: addr.Host, Proxied: addr.Proxied})
		if err != nil {
			return nil, finalize, fmt.Errorf("ask for the gateway: %w", err)
		}
		if r.Err != "" {
			return nil, finalize, errors.New(r.Err)
		}
		x.gwURL[name] = r.URL
	}
	return x, finalize, nil
}
