package run

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/tend"
)

// waitAll is an agent that marks itself in dir and passes only once n
// attempts are marked at the same time (it gives up after ~10 s, so a
// scheduler that never runs them together makes it fail).
func waitAll(dir string, n int) string {
	return `touch "` + dir + `/$STEWARD_SAMPLE_ID"; i=0; while [ $i -lt 100 ]; do [ "$(ls "` + dir + `" | wc -l)" -ge ` + itoa(n) + ` ] && { echo ok; exit 0; }; sleep 0.1; i=$((i+1)); done; echo lonely`
}

func itoa(n int) string { return strconv.Itoa(n) }

// A task waiting for a lease holds no share of the budget (C6, C4): with a
// budget of 2, the other task runs its two attempts side by side. (They
// pass only together; the old split gave each task 1 slot, so the first
// attempt sat alone until it gave up.)
func TestWaitingTaskShareGoesToReadyTask(t *testing.T) {
	dir := t.TempDir()
	sync := filepath.Join(dir, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: pair
    sandbox: {provider: local}
    exclusive: false
    agent: '`+waitAll(sync, 2)+`'
    scorer: {match: exact}
    samples: [{id: p1, input: "", target: ok}, {id: p2, input: "", target: ok}]
  - name: waiter
    sandbox: {provider: local}
    exclusive: false
    shared_state: {key: k}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: w1, input: "", target: ok}]
`)
	ctx := context.Background()
	db, tok := holdLease(t, dir, "k", "waiter") // another invocation holds the key
	done := make(chan launched, 1)
	w := newWatch()
	go func() { done <- launchSet(t, path, func(o *Options) { o.Concurrency = 2; o.Observe = w.observe }) }()
	// Free the lease once pair is done, so the waiter runs too.
	w.until(t, "both of pair's attempts", func(evs []Event) bool { return len(attempts(evs, "pair")) == 2 })
	if err := db.Release(ctx, "k", tok); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if got := statuses(r.rep); got != "p1:p p2:p w1:p" {
		t.Fatalf("statuses %s: the waiting task kept a share of the budget\n%s", got, r.stderr)
	}
}

// With samples_ramp: false a finished task's share goes to the task still
// running: wide's four attempts (which pass only together) get the whole
// budget of 4 once quick is done.
func TestFinishedShareGoesToOthersRampOff(t *testing.T) {
	dir := t.TempDir()
	sync := filepath.Join(dir, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "_steward.yaml", "samples_ramp: false\n")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: quick
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: q1, input: "", target: ok}, {id: q2, input: "", target: ok}]
  - name: wide
    sandbox: {provider: local}
    exclusive: false
    agent: '`+waitAll(sync, 4)+`'
    scorer: {match: exact}
    samples:
      - {id: w1, input: "", target: ok}
      - {id: w2, input: "", target: ok}
      - {id: w3, input: "", target: ok}
      - {id: w4, input: "", target: ok}
`)
	r := launchSet(t, path, func(o *Options) { o.Concurrency = 4 })
	if got := statuses(r.rep); got != "q1:p q2:p w1:p w2:p w3:p w4:p" {
		t.Fatalf("statuses %s: quick's share did not go to wide once quick finished\n%s", got, r.stderr)
	}
}

// More tasks than a budget of 2: the starting setpoints (in the PLAN line,
// and in `steward tend` before the first tend) add up to the budget, by
// most rounds first, and the live counts line agrees with the task rows.
func TestStartingSetpointsFitBudgetAndShowBeforeFirstTend(t *testing.T) {
	dir := t.TempDir()
	gofile := filepath.Join(dir, "go")
	write(t, dir, "_steward.yaml", "tend_interval: 1h\n")
	agent := `i=0; while [ ! -e ` + gofile + ` ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo ok`
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: s1
    sandbox: {provider: local}
    exclusive: false
    agent: '`+agent+`'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}]
  - name: s2
    sandbox: {provider: local}
    exclusive: false
    agent: '`+agent+`'
    scorer: {match: exact}
    samples: [{id: b, input: "", target: ok}]
  - name: big
    sandbox: {provider: local}
    exclusive: false
    agent: '`+agent+`'
    scorer: {match: exact}
    attempts: 4
    samples: [{id: c, input: "", target: ok}]
`)
	release := func() { _ = os.WriteFile(gofile, nil, 0o644) }
	defer release()
	ctx := context.Background()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan launched, 1)
	w := newWatch()
	go func() { done <- launchSet(t, path, func(o *Options) { o.Concurrency = 2; o.Observe = w.observe }) }()
	evs := w.until(t, "the live state before the first tend (tend_interval 1h)", func(evs []Event) bool { return len(lives(evs, false)) > 0 })
	live := *lives(evs, false)[0]
	states, err := db.Live(ctx) // what `steward tend` reads is that state
	if err != nil {
		t.Fatal(err)
	}
	var stored tend.LiveState
	if err := json.Unmarshal([]byte(states[live.RunID]), &stored); err != nil || stored.Plan != live.Plan {
		t.Fatalf("the record's live state %+v (%v), published %+v", stored, err, live)
	}
	release()
	if live.Tended {
		t.Fatal("tended within a 1h window")
	}
	if want := "setpoints s1 1, s2 0, big 1"; !strings.Contains(live.Plan, want) {
		t.Fatalf("PLAN %q does not name the starting setpoints %q", live.Plan, want)
	}
	sum, running, queued := 0, 0, 0
	for i := range live.Tasks {
		sum += live.Setpoints[i]
		running += live.Running[i]
		queued += live.Queued[i]
	}
	if sum > 2 {
		t.Fatalf("setpoints %v add up to %d, over the budget 2", live.Setpoints, sum)
	}
	if running != live.Counts.Running || queued != live.Counts.Queued {
		t.Fatalf("task rows (running %d, queued %d) disagree with the counts line %+v", running, queued, live.Counts)
	}
	r := <-done
	if r.rep.Counts.Passed != 6 {
		t.Fatalf("counts %+v\n%s", r.rep.Counts, r.stderr)
	}
}

// An agent making two model calls at once that both meet a 429: each
// request backs off and resumes (backoff is counted per request), so the
// sample passes. (The old scheduler allowed one backoff per attempt: the
// second request's resume failed and the agent got a 503.)
func TestParallelRequestsBothBackOff(t *testing.T) {
	fp := fakeprovider.New(fakeprovider.Config{APIKey: "real-key"})
	var calls atomic.Int32
	var mu gosync.Mutex
	refused := map[string]bool{}
	h := fp.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			calls.Add(1)
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			which := "1+1"
			if bytes.Contains(body, []byte("2+2")) {
				which = "2+2"
			}
			// Refuse every call until both of the agent's calls were refused
			// once: the second is refused while the first waits out its backoff.
			mu.Lock()
			refuse := !(refused["1+1"] && refused["2+2"])
			refused[which] = true
			mu.Unlock()
			if refuse {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`))
				return
			}
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-fake
  base_url: http://`+ln.Addr().String()+`/v1
  api_key_env: FAKE_KEY
tasks:
  - name: parallel
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat >o1 & p1=$!; STEWARD_INPUT="What is 2+2?" "$STEWARD_BIN" agent chat >o2 & p2=$!; wait $p1 || exit 11; wait $p2 || exit 12; cat o1'
    scorer: {match: numeric}
    samples: [{id: s, input: "What is 1+1?", target: "2"}]
`)
	exe := buildSteward(t)
	r := launchSet(t, path, func(o *Options) {
		o.Exe = exe
		o.Concurrency = 1
		o.Getenv = func(k string) string {
			if k == "FAKE_KEY" {
				return "real-key"
			}
			return ""
		}
	})
	if got := statuses(r.rep); got != "s:p" {
		t.Fatalf("statuses %s (%s)\n%s", got, r.rep.Attempts[0].Reason, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if !refused["1+1"] || !refused["2+2"] || calls.Load() < 4 {
		t.Fatalf("upstream saw %d chat calls (refused %v), want both calls refused and retried", calls.Load(), refused)
	}
}

// gatedLocal is the real local provider whose sandboxes come up only when
// the test opens the gate (a slow daemon), so admitted attempts stay starting.
type gatedLocal struct {
	*local.Provider
	gate    chan struct{}
	created atomic.Int64
}

func (g *gatedLocal) Create(ctx context.Context, s sandbox.Spec) (sandbox.Sandbox, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	g.created.Add(1)
	return g.Provider.Create(ctx, s)
}

type gatedFactory struct{ p *gatedLocal }

func (f gatedFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return f.p, nil
}
func (f gatedFactory) Available(ctx context.Context, name string) bool { return false }

// Running means a sandbox exists and the attempt executes: admitted
// attempts whose sandboxes are still being made show as starting (panel,
// `steward tend`), and the ramp does not count them as saturating the
// task, so it does not climb while nothing has started.
func TestStartingIsNotRunningAndDoesNotRamp(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "_steward.yaml", "samples_ramp: [2, 10]\ntend_interval: 100ms\n")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}, {id: c, input: "", target: ok},
              {id: d, input: "", target: ok}, {id: e, input: "", target: ok}, {id: f, input: "", target: ok}]
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prov := &gatedLocal{Provider: local.New(local.Options{BaseDir: t.TempDir()}), gate: make(chan struct{})}
	var stderr bytes.Buffer
	sw := &syncWriter{w: &stderr}
	done := make(chan error, 1)
	w := newWatch()
	go func() {
		_, err := Launch(context.Background(), Options{EvalSet: es, Providers: gatedFactory{prov}, Stderr: sw, PanelInterval: 20 * time.Millisecond, Observe: w.observe})
		done <- err
	}()
	ctx := context.Background()
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := false
	open := func() {
		if !opened {
			close(prov.gate)
			opened = true
		}
	}
	defer open()
	// Three tends while two attempts are admitted and none has a sandbox.
	evs := w.until(t, "three tends", func(evs []Event) bool { return len(lives(evs, true)) >= 3 })
	live := *lives(evs, true)[2]
	if live.Counts.Running != 0 || live.Counts.Starting != 2 || live.Starting[0] != 2 || live.Running[0] != 0 {
		t.Fatalf("with two sandboxes being made: counts %+v, task running %v starting %v", live.Counts, live.Running, live.Starting)
	}
	runs, _ := db.Runs(ctx)
	pts, _ := db.Ramp(ctx, runs[0].ID)
	for _, p := range pts {
		if p.Decision == "up" || p.Saturated {
			t.Fatalf("the ramp counted starting attempts as running: %+v", p)
		}
	}
	open()
	if err := <-done; err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "2 starting") {
		t.Fatalf("the panel never showed the starting attempts apart:\n%s", stderr.String())
	}
}

// A task waiting for a max_tasks slot holds no share of the budget either:
// with max_tasks: 1 and a budget of 2, the running task has both slots.
func TestMaxTasksWaiterHoldsNoShare(t *testing.T) {
	dir := t.TempDir()
	sync := filepath.Join(dir, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "_steward.yaml", "max_tasks: 1\n")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: pair
    sandbox: {provider: local}
    exclusive: false
    agent: '`+waitAll(sync, 2)+`'
    scorer: {match: exact}
    samples: [{id: p1, input: "", target: ok}, {id: p2, input: "", target: ok}]
  - name: later
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: l1, input: "", target: ok}]
`)
	r := launchSet(t, path, func(o *Options) { o.Concurrency = 2 })
	if got := statuses(r.rep); got != "p1:p p2:p l1:p" {
		t.Fatalf("statuses %s: the task waiting for max_tasks kept a share of the budget\n%s", got, r.stderr)
	}
}
