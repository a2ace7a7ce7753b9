package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
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
	// close_task / closed
	Task int  `json:"task,omitempty"`
	OK   bool `json:"ok,omitempty"`
	// gateway / gateway_url
	Provider string `json:"provider,omitempty"`
	Listen   string `json:"listen,omitempty"`
	Host     string `json:"host,omitempty"`
	URL      string `json:"url,omitempty"`
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
	go w.read(out)
	init := &workerInit{
		EvalSet: l.es.File, Flags: l.opts.FleetFlags, TaskGlobs: l.opts.TaskGlobs, SampleGlobs: l.opts.SampleGlobs,
		RunID: l.runID, LockPath: l.lockPath(), Exe: l.opts.Exe, Model: l.es.Model.Name, Tasks: tasks, TaskProv: l.taskProv,
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
		var m wmsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		switch m.Op {
		case "gateway":
			url, err := w.l.gatewayFor(m.Listen, m.Host)
			reply := wmsg{Op: "gateway_url", Provider: m.Provider, URL: url}
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
				ch <- *m.Row
			}
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
	if err != nil {
		reason = fmt.Sprintf("worker process for %s crashed (%v)", w.name, err)
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
		w.l.failTask(ti, report.StatusErrored, reason)
	}
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
			Status: report.StatusErrored, Reason: reason, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Started: now, Finished: now, Source: a.Sample.Source}
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
func (l *launcher) gatewayFor(listenAddr, host string) (string, error) {
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
	go func() { _ = l.gw.Serve(l.gwCtx, ln) }()
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

// Worker runs a worker process: it reads the supervisor's messages on in
// and answers on out. It ends when in closes or on shutdown, removing every
// sandbox it made.
func Worker(ctx context.Context, in io.Reader, out io.Writer, stderr io.Writer, providers ProviderFactory, getenv func(string) string) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	var encMu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m wmsg) {
		encMu.Lock()
		defer encMu.Unlock()
		_ = enc.Encode(m)
	}
	var first wmsg
	if err := dec.Decode(&first); err != nil || first.Op != "init" || first.Init == nil {
		return fmt.Errorf("worker: expected an init message: %v", err)
	}
	ini := first.Init
	actx, abort := context.WithCancel(ctx)
	defer abort()
	x, finalize, err := workerSetup(actx, ini, stderr, providers, getenv, func(m wmsg) (wmsg, error) {
		send(m)
		var r wmsg
		if err := dec.Decode(&r); err != nil {
			return r, err
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
	ex := newExecutor(x)
	send(wmsg{Op: "ready"})
	bySeq := map[int]*plan.Attempt{}
	for _, a := range x.p.Attempts {
		bySeq[a.Seq] = a
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var m wmsg
		if err := dec.Decode(&m); err != nil {
			abort() // the supervisor is gone: stop and clean up
			return nil
		}
		switch m.Op {
		case "attempt":
			a := bySeq[m.Seq]
			if a == nil {
				send(wmsg{Op: "result", Seq: m.Seq, Row: &record.Attempt{Seq: m.Seq, Status: report.StatusErrored, Reason: "worker: unknown attempt"}})
				continue
			}
			wg.Add(1)
			go func(seq int, token string) {
				defer wg.Done()
				row := ex.attempt(actx, a, token)
				send(wmsg{Op: "result", Seq: seq, Row: &row})
			}(m.Seq, m.Token)
		case "close_task":
			go func(task int) { send(wmsg{Op: "closed", Task: task, OK: ex.closeTask(task)}) }(m.Task)
		case "abort":
			abort()
		case "shutdown":
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
		runID: ini.RunID, exe: ini.Exe, model: ini.Model, stderr: stderr}
	for _, t := range p.Tasks {
		x.specs = append(x.specs, specFor(t.Task, ini.RunID))
	}
	byProv := map[string][]*sandbox.Spec{}
	for _, ti := range ini.Tasks {
		byProv[ini.TaskProv[ti]] = append(byProv[ini.TaskProv[ti]], x.specs[ti])
	}
	for name, specs := range byProv {
		prov, err := providers.Provider(ctx, name, RunInfo{RunID: ini.RunID, LockPath: ini.LockPath, Stderr: stderr, Kubernetes: es.Fleet.Kubernetes})
		if err != nil {
			return nil, finalize, fmt.Errorf("sandbox provider %s: %w", name, err)
		}
		provs = append(provs, prov)
		x.providers[name] = prov
		if err := prov.Prepare(ctx, specs); err != nil {
			return nil, finalize, fmt.Errorf("prepare %s sandboxes: %w", name, err)
		}
		addr, err := prov.Gateway(ctx)
		if err != nil {
			return nil, finalize, fmt.Errorf("find the gateway address for %s sandboxes: %w", name, err)
		}
		r, err := ask(wmsg{Op: "gateway", Provider: name, Listen: addr.Listen, Host: addr.Host})
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
