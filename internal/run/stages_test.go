package run

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/specs"
	"github.com/steward-evals/steward/internal/status"
)

// cancelAtGateway cancels the launch the moment the gateway is placed: the
// stop arrives while the dispatch stage is still being set up.
type cancelAtGateway struct {
	*counting
	cancel context.CancelFunc
}

func (c cancelAtGateway) Gateway(ctx context.Context) (sandbox.GatewayAddr, error) {
	c.cancel()
	return c.counting.Gateway(ctx)
}

type cancelFactory struct{ p cancelAtGateway }

func (f cancelFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return f.p, nil
}
func (f cancelFactory) Available(ctx context.Context, name string) bool { return false }

// A stop that arrives before dispatching starts skips every queued attempt
// and ends the run cancelled. Under -race this also proves the stop's
// watcher reads the task-finished hook only after it was set (the hook used
// to be assigned after the watcher had started).
func TestCancelBeforeDispatchSkipsEverything(t *testing.T) {
	t.Run("in-process", func(t *testing.T) { cancelBeforeDispatch(t, false) })
	// Workers start between the watcher and the hook: the window is wide.
	t.Run("workers", func(t *testing.T) { cancelBeforeDispatch(t, true) })
}

func cancelBeforeDispatch(t *testing.T, workers bool) {
	dir := t.TempDir()
	write(t, dir, "helper.txt", "ok")
	path := write(t, dir, "steward.yaml", basicSet)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prov := cancelAtGateway{counting: &counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}, cancel: cancel}
	opts := Options{EvalSet: es, Providers: cancelFactory{prov}}
	if workers {
		opts.Workers, opts.Exe = true, buildSteward(t)
	}
	res, err := Launch(ctx, opts)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if !res.Cancelled || !res.Report.Partial {
		t.Fatalf("cancelled %v partial %v, want both", res.Cancelled, res.Report.Partial)
	}
	if len(res.Report.Attempts) != 6 {
		t.Fatalf("%d attempts reported, want 6", len(res.Report.Attempts))
	}
	for _, a := range res.Report.Attempts {
		if a.Status != status.Skipped || a.Reason != "cancelled before it started" {
			t.Errorf("%s#%d: %s (%s), want skipped: cancelled before it started", a.Sample, a.Attempt, a.Status, a.Reason)
		}
	}
	if n := prov.created.Load(); n != 0 {
		t.Errorf("%d sandboxes created after the stop, want 0", n)
	}
}

// Each stage alone, from a value of the stage before it built by hand
// (issue 26 item 2): the stages read what the earlier ones set and write
// only their own value.

// runOf is run id's row in db.
func runOf(t *testing.T, db *record.DB, id string) record.Run {
	t.Helper()
	runs, err := db.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no run %s in the record", id)
	return record.Run{}
}

// handLaunch is the launch's own value: options, the eval set (basicSet:
// one task, samples a, b and c, two attempts each; the record beside it),
// a run id and no secrets.
func handLaunch(t *testing.T, opts Options) *launch {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "helper.txt", "ok")
	es, err := evalset.Load(write(t, dir, "steward.yaml", basicSet), evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Providers == nil {
		opts.Providers = factory{&counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}}
	}
	opts.EvalSet = es
	opts = opts.withDefaults()
	return &launch{opts: opts, es: es, runID: "run-" + strings.ReplaceAll(t.Name(), "/", "-"), start: time.Now(), scrubber: secret.New()}
}

// handLoaded is the load stage's value: handLaunch's plan and an open record.
func handLoaded(t *testing.T, opts Options) *loaded {
	t.Helper()
	l := handLaunch(t, opts)
	p, err := plan.Build(l.es, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := record.Open(context.Background(), l.es.Fleet.Record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &loaded{launch: l, p: p, db: db}
}

// handChosen is the choose stage's value: one local provider, every task on
// it, a budget of 3 from the flag.
func handChosen(t *testing.T, opts Options) *chosen {
	t.Helper()
	ld := handLoaded(t, opts)
	prov := local.New(local.Options{BaseDir: t.TempDir()})
	ch := &chosen{loaded: ld, providers: map[string]sandbox.Provider{"local": prov}, budget: 3, budgetSrc: "from flag"}
	for range ld.p.Tasks {
		ch.taskProv = append(ch.taskProv, "local")
		ch.exclusive = append(ch.exclusive, false)
	}
	ch.specs = specs.Make(ld.p, ld.runID)
	return ch
}

func TestLoadStage(t *testing.T) {
	l := handLaunch(t, Options{})
	ld, err := load(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.db.Close()
	if len(ld.p.Attempts) != 6 || ld.p.EvalSet != l.es {
		t.Fatalf("plan of %d attempts from %p, want 6 from the launch's eval set", len(ld.p.Attempts), ld.p.EvalSet)
	}
	if _, err := os.Stat(l.es.Fleet.Record); err != nil {
		t.Fatalf("the record was not opened: %v", err)
	}
	none := handLaunch(t, Options{TaskGlobs: []string{"nothing*"}})
	if _, err := load(context.Background(), none); !errors.Is(err, ErrBadInput) {
		t.Fatalf("filters that select nothing: %v, want bad input", err)
	}
}

func TestChooseStage(t *testing.T) {
	ld := handLoaded(t, Options{Concurrency: 5, Shard: "1/2", ConfirmAttempts: 1})
	ch, err := choose(context.Background(), ld)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ch.taskProv, []string{"local"}) || ch.exclusive[0] || ch.budget != 5 || ch.budgetSrc != "from flag" {
		t.Errorf("providers %v exclusive %v budget %d %q", ch.taskProv, ch.exclusive, ch.budget, ch.budgetSrc)
	}
	if len(ch.extras) != 3 || len(ch.specs.Tasks) != 1 || ch.specs.Tasks[0].RunID != ld.runID {
		t.Errorf("extras %v specs %+v", ch.extras, ch.specs)
	}
	// Three samples of three attempts each (one confirming): the shard keeps
	// whole samples, in the whole eval set's seqs, and its task's order.
	per := map[string]int{}
	var order []int
	for _, a := range ld.p.Attempts {
		per[a.Sample.ID]++
		order = append(order, a.Seq)
	}
	if len(per) == 0 || len(per) == 3 || !reflect.DeepEqual(ld.p.Tasks[0].Order, order) {
		t.Errorf("shard kept %v, order %v, attempts %v", per, ld.p.Tasks[0].Order, order)
	}
	for id, n := range per {
		if n != 3 {
			t.Errorf("the shard split sample %s: %d of its 3 attempts", id, n)
		}
	}
	if _, err := choose(context.Background(), handLoaded(t, Options{Shard: "3/2"})); !errors.Is(err, ErrBadInput) {
		t.Errorf("--shard 3/2: %v, want bad input", err)
	}
}

func TestCarryStage(t *testing.T) {
	ctx := context.Background()
	ch := handChosen(t, Options{})
	// The record holds a judged result of the first attempt at its fingerprint.
	a := ch.p.Attempts[0]
	if err := ch.db.StartRun(ctx, record.Run{ID: "before", EvalSet: ch.es.File}); err != nil {
		t.Fatal(err)
	}
	if err := ch.db.Publish(ctx, record.Attempt{RunID: "before", Seq: a.Seq, Task: "echo", Sample: a.Sample.ID, Attempt: a.Number,
		Status: status.Passed, Fingerprint: a.Fingerprint, Parts: a.PartsJSON(), Finished: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cr, err := carry(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if a.Action != plan.ActionCarry || a.From.RunID != "before" || ch.p.Attempts[1].Action != plan.ActionRun {
		t.Errorf("carry decisions: %s from %q, then %s", a.Action, a.From.RunID, ch.p.Attempts[1].Action)
	}
	for _, want := range []string{"6 attempts", "3 samples × 1 tasks", "1 carried", "concurrency 3 (from flag)"} {
		if !strings.Contains(cr.planLine, want) {
			t.Errorf("PLAN line %q lacks %q", cr.planLine, want)
		}
	}
	if cr.fc.Attempts != 5 {
		t.Errorf("the forecast counts %d attempts to run, want 5", cr.fc.Attempts)
	}
}

func TestBeginStage(t *testing.T) {
	ctx := context.Background()
	var stderr bytes.Buffer
	cr := &carried{chosen: handChosen(t, Options{Stderr: &stderr}), planLine: "4 attempts · by hand"}
	b, err := begin(ctx, cr)
	if err != nil {
		t.Fatal(err)
	}
	run := runOf(t, cr.db, cr.runID)
	if run.Status != status.Running || run.Plan != "4 attempts · by hand" {
		t.Fatalf("run %+v", run)
	}
	if _, err := os.Stat(record.ReservePath(cr.db.Dir, cr.runID)); err != nil {
		t.Errorf("no reserve: %v", err)
	}
	if !strings.Contains(stderr.String(), "4 attempts · by hand") {
		t.Errorf("the PLAN line was not printed: %q", stderr.String())
	}
	b.end(errors.New("no image"), false, nil)
	run = runOf(t, cr.db, cr.runID)
	if run.Status != status.Aborted || !strings.Contains(run.Left, "the launch stopped: no image") {
		t.Errorf("ended run %+v", run)
	}
	if _, err := os.Stat(record.ReservePath(cr.db.Dir, cr.runID)); !os.IsNotExist(err) {
		t.Errorf("the reserve is still there: %v", err)
	}
}

// handBegun is the begin stage's value: a started run, its lock held.
func handBegun(t *testing.T, ch *chosen) *begun {
	t.Helper()
	ctx := context.Background()
	lock, err := runlock.Acquire(ch.lockPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.db.StartRun(ctx, record.Run{ID: ch.runID, EvalSet: ch.es.File, Started: time.Now(), LockPath: ch.lockPath()}); err != nil {
		t.Fatal(err)
	}
	b := &begun{carried: &carried{chosen: ch, planLine: "by hand"}, lock: lock}
	t.Cleanup(func() { _ = lock.Release() })
	return b
}

func TestPrepareStage(t *testing.T) {
	ch := handChosen(t, Options{})
	pr, err := prepare(context.Background(), handBegun(t, ch))
	if err != nil {
		t.Fatal(err)
	}
	url := pr.gwURL["local"]
	if !strings.HasPrefix(url, "http://127.0.0.1:") || pr.gw == nil || pr.judgeURL != "" {
		t.Fatalf("gateway %v at %q, judge %q", pr.gw, url, pr.judgeURL)
	}
	if pr.ready.Tasks[0] == ch.specs.Tasks[0] || !reflect.DeepEqual(*pr.ready.Tasks[0], *ch.specs.Tasks[0]) {
		t.Errorf("prepare must prepare copies of the chosen specs: %p %p", pr.ready.Tasks[0], ch.specs.Tasks[0])
	}
	if again, err := pr.openGateway(sandbox.GatewayAddr{Listen: "127.0.0.1:0", Host: "127.0.0.1"}); err != nil || again != url {
		t.Errorf("the same address listened again: %q, %v; want %q", again, err, url)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatalf("the gateway does not answer: %v", err)
	}
	resp.Body.Close()
	pr.close()
	if _, err := http.Get(url + "/v1/models"); err == nil {
		t.Error("the gateway still answers after close")
	}
	// A real upstream without its key, with work to do, is bad input.
	ch = handChosen(t, Options{})
	ch.es.Model.Upstream, ch.es.Model.APIKeyEnv = "openai", "NO_SUCH_KEY"
	pr, err = prepare(context.Background(), handBegun(t, ch))
	pr.close()
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "NO_SUCH_KEY") {
		t.Errorf("missing key: %v", err)
	}
}

// handPrepared is the prepare stage's value: the chosen specs as they are
// (local sandboxes need nothing prepared) and a gateway on the mock.
func handPrepared(t *testing.T, ch *chosen) *prepared {
	t.Helper()
	pr := &prepared{begun: handBegun(t, ch), ready: ch.specs, sampleErrs: map[string]attempt.SampleEnvError{}}
	gw, err := pr.newGateway(true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	pr.gw, pr.listen = gw, gw.Listeners(ctx)
	t.Cleanup(func() { stop(); pr.listen.Wait() })
	url, err := pr.openGateway(sandbox.GatewayAddr{Listen: "127.0.0.1:0", Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pr.gwURL = map[string]string{"local": url}
	return pr
}

func TestDispatchStage(t *testing.T) {
	ctx := context.Background()
	var rows []record.Attempt
	var mu sync.Mutex
	ch := handChosen(t, Options{Observe: func(e Event) {
		if e.Attempt != nil {
			mu.Lock()
			rows = append(rows, *e.Attempt)
			mu.Unlock()
		}
	}})
	ch.p.Attempts[3].Action, ch.p.Attempts[3].Reason = plan.ActionSkip, "by hand"
	d, err := dispatchStage(ctx, handPrepared(t, ch))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]status.Attempt{0: status.Passed, 1: status.Passed, 2: status.Failed, 3: status.Skipped, 4: status.Passed, 5: status.Passed}
	if !reflect.DeepEqual(d.tally.published, want) {
		t.Errorf("tally %v, want %v", d.tally.published, want)
	}
	stored, err := d.db.Attempts(ctx, d.runID)
	if err != nil || len(stored) != 6 || len(rows) != 6 {
		t.Fatalf("%d rows stored (%v), %d observed; want 6", len(stored), err, len(rows))
	}
	for _, r := range stored {
		if r.Status != want[r.Seq] || r.Fingerprint != d.p.BySeq(r.Seq).Fingerprint {
			t.Errorf("row %d: %s %s, want %s with the plan's fingerprint", r.Seq, r.Status, r.Fingerprint, want[r.Seq])
		}
	}
	c, _ := d.snapshot()
	if c.Passed != 4 || c.Failed != 1 || c.Skipped != 1 || c.Running+c.Queued+c.Starting != 0 {
		t.Errorf("counts %+v", c)
	}
}

func TestFinishStage(t *testing.T) {
	ctx := context.Background()
	ch := handChosen(t, Options{Title: "by hand"})
	d := &dispatch{prepared: &prepared{begun: handBegun(t, ch)}, tally: newTally(1)}
	for _, a := range ch.p.Attempts[:2] {
		if err := d.db.Publish(ctx, d.row(a, status.Skipped, stoppedReason)); err != nil {
			t.Fatal(err)
		}
	}
	d.tally.stopSkips, d.tally.spentStop, d.tally.left = 2, true, []string{"2 attempts not started (cancelled before it started)"}
	stopped, cancel := context.WithCancel(ctx)
	cancel() // the first signal came
	res, finished, err := finish(stopped, d)
	if err != nil || !finished {
		t.Fatalf("finish: %v (finished %v)", err, finished)
	}
	if !res.Cancelled || !res.Report.Partial || !res.Report.Spend.BudgetStopped || res.Report.Title != "by hand" || len(res.Report.Attempts) != 2 {
		t.Errorf("result %+v, report %+v", res, res.Report)
	}
	run := runOf(t, d.db, d.runID)
	if run.Status != status.Cancelled || !strings.Contains(run.Left, "2 attempts not started") {
		t.Errorf("run %+v", run)
	}
}
