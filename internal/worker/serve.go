package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/status"
)

// The worker's side of the boundary: the `steward __worker` process. It is
// handed its slice of the plan, makes its providers (adopting what the
// supervisor prepared), runs the attempts the supervisor sends, answers the
// heartbeat whatever it is doing, and removes every sandbox it made when it
// stops, the supervisor goes, or a line cannot be read.

// Providers makes the sandbox providers of a worker's tasks (the
// registered ones: sandbox.Factory).
type Providers interface {
	Provider(ctx context.Context, name string, run sandbox.RunInfo) (sandbox.Provider, error)
}

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
	sc.Buffer(make([]byte, 64<<10), maxSupervisorLine)
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

// Serve runs a worker process: it reads the supervisor's messages on in
// and answers on out. It ends when in closes (the supervisor is gone), when
// ctx ends (a signal, or the caller saw the supervisor die) or on shutdown,
// removing every sandbox it made. Heartbeats ("ping") are answered at once,
// whatever the worker is doing. A line it cannot read (malformed, an
// unknown op, a message out of place) stops it with that error.
func Serve(ctx context.Context, in io.Reader, out io.Writer, stderr io.Writer, providers Providers, getenv func(string) string) error {
	w := &msgWriter{w: out}
	send := func(m wireMsg) {
		_ = w.send(m) // EPIPE once the supervisor is gone: nobody is left to tell
	}
	box := newMailbox()
	// The reader blocks on stdin; it is not waited for (the process ends
	// with Serve), but everything it feeds stops when it closes the box.
	go readSupervisor(in, box, send)
	ini, err := box.init(ctx)
	if err != nil {
		return err
	}
	var watch sync.WaitGroup // the gone-watcher: it ends with actx
	defer watch.Wait()
	actx, abort := context.WithCancel(ctx)
	defer abort()
	ws := &workerServer{box: box, send: send, actx: actx, abort: abort}
	defer ws.work.Wait()
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-box.gone:
			if !ws.shuttingDown.Load() {
				abort() // the supervisor is gone: stop whatever runs, setup included, and clean up
			}
		case <-actx.Done():
		}
	}()
	x, err := receive(ini, func() (wireMsg, error) { return box.next(actx) })
	if err != nil {
		send(msgReady{Err: toWireErr(err)})
		return err
	}
	finalize, err := setup(actx, ini, x, stderr, providers, func(m *msgGateway) (*msgGatewayURL, error) {
		send(m)
		return box.gatewayURL(actx)
	})
	defer finalize()
	if err != nil {
		send(msgReady{Err: toWireErr(err)})
		return nil
	}
	ws.hook(x, getenv("STEWARD_WORKER_FAULT"))
	send(msgReady{})
	return ws.serve()
}

// init is the supervisor's first message, which must be init.
func (b *mailbox) init(ctx context.Context) (*Init, error) {
	first, ok := b.get(ctx)
	init, isInit := first.(*msgInit)
	if !ok || !isInit || init.Init == nil {
		if err := b.failure(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("worker: expected an init message")
	}
	return init.Init, nil
}

// next is the supervisor's next message, or why there is none.
func (b *mailbox) next(ctx context.Context) (wireMsg, error) {
	m, ok := b.get(ctx)
	if !ok {
		if err := b.failure(); err != nil {
			return nil, err
		}
		return nil, errors.New("worker: the supervisor is gone")
	}
	return m, nil
}

// hook connects x to the supervisor (Started, Bind, Deadline) and makes
// the executor that serves its attempts.
func (ws *workerServer) hook(x *attempt.Env, fault string) {
	send := ws.send
	x.Fault = fault
	x.Started = func(seq int) { send(msgStarted{Seq: seq}) }
	ws.binds = &binder{wait: map[int]chan *wireErr{}, gone: ws.box.gone}
	x.Bind = func(ctx context.Context, token string, ip netip.Addr) error {
		return ws.binds.bind(ctx, send, token, ip)
	}
	x.Deadline = func(ctx context.Context, seq int, at time.Time) error {
		return ws.binds.ask(ctx, send, func(id int) wireMsg { return msgDeadline{ID: id, Seq: seq, Deadline: at} })
	}
	ws.x, ws.ex = x, attempt.NewExecutor(x)
}

// workerServer answers the supervisor's messages once the worker is ready.
type workerServer struct {
	box          *mailbox
	send         func(wireMsg)
	x            *attempt.Env
	ex           *attempt.Executor
	actx         context.Context
	abort        context.CancelFunc
	binds        *binder
	work         sync.WaitGroup // attempts and task closes
	shuttingDown atomic.Bool
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
	a := ws.x.Plan.BySeq(m.Seq)
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
	if ws.ex == nil {
		return // not set up: nothing was made
	}
	for _, t := range ws.x.Plan.Tasks {
		if t != nil {
			ws.ex.CloseTask(context.Background(), t.Index)
		}
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

// setup makes the providers of the worker's tasks, adopting what the
// supervisor prepared for the run (images, networks; nothing is built or
// created again), and finds each one's gateway URL, asking the supervisor
// when init has none. finalize removes what the providers made.
func setup(ctx context.Context, ini *Init, x *attempt.Env, stderr io.Writer, providers Providers, ask func(*msgGateway) (*msgGatewayURL, error)) (finalize func(), err error) {
	var provs []sandbox.Provider
	finalize = func() {
		for _, p := range provs {
			fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := p.Finalize(fctx); err != nil {
				fmt.Fprintf(stderr, "steward worker: %v\n", err)
			}
			cancel()
		}
	}
	settings, err := decodeSettings(ini.Settings)
	if err != nil {
		return finalize, err
	}
	x.Providers, x.Stderr = map[string]sandbox.Provider{}, stderr
	for name, specs := range specsByProvider(ini, x) {
		prov, err := providers.Provider(ctx, name, sandbox.RunInfo{RunID: ini.RunID, LockPath: ini.LockPath, Stderr: stderr, Settings: settings, Liveness: runlock.Liveness{}})
		if err != nil {
			return finalize, fmt.Errorf("sandbox provider %s: %w", name, err)
		}
		provs = append(provs, prov)
		x.Providers[name] = prov
		url, err := adoptProvider(ctx, ini, name, prov, specs, ask)
		if err != nil {
			return finalize, err
		}
		x.GatewayURL[name] = url
	}
	return finalize, nil
}

// specsByProvider lists, for each provider of the worker's tasks, the specs
// its attempts run in: a task's own when one of its samples runs in it (a
// Harbor dataset's never do: each has a spec of its own), and the samples'
// own that are ready.
func specsByProvider(ini *Init, x *attempt.Env) map[string][]*sandbox.Spec {
	ownSpec := map[int]bool{}
	for _, a := range x.Plan.Attempts {
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
	seen := map[string]bool{}
	for _, a := range x.Plan.Attempts {
		k := attempt.SampleKey(a.Task, a.Sample.ID)
		sp := x.SampleSpecs[k]
		if _, failed := x.SampleErrs[k]; sp == nil || failed || seen[k] {
			continue // none, or not prepared (its attempts end with why), or listed
		}
		seen[k] = true
		byProv[ini.TaskProv[a.Task]] = append(byProv[ini.TaskProv[a.Task]], sp)
	}
	return byProv
}

// decodeSettings reads the providers' sections as the supervisor decoded
// them, into each section's own type (sandbox.RegisterSection), as
// evalset.Fleet.ProviderSettings hands them to providers.
func decodeSettings(raw map[string]json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	for _, sec := range sandbox.Sections() {
		b, ok := raw[sec.Key]
		if !ok {
			continue
		}
		v := sec.New()
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return nil, fmt.Errorf("worker: provider settings %s: %w", sec.Key, err)
		}
		if sec.Value != nil {
			out[sec.Key] = sec.Value(v)
		} else {
			out[sec.Key] = v
		}
	}
	for key := range raw {
		if _, ok := out[key]; !ok {
			return nil, fmt.Errorf("worker: provider settings %s: no provider declares that section", key)
		}
	}
	return out, nil
}

// adoptProvider adopts what the supervisor prepared for a provider (its
// networks; Prepare only when it shares nothing) and returns the gateway
// URL its sandboxes use, asking the supervisor when it has none yet.
func adoptProvider(ctx context.Context, ini *Init, name string, prov sandbox.Provider, specs []*sandbox.Spec, ask func(*msgGateway) (*msgGatewayURL, error)) (string, error) {
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
