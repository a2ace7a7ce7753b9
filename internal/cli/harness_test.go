package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/eventlog"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/tend"
)

// streams is the outside world a command sees: its own stdout and stderr
// buffers and an environment read through a function, as main hands them in.
type streams struct {
	stdout, stderr bytes.Buffer
	env            map[string]string
}

func newStreams() *streams { return &streams{env: map[string]string{}} }

// run runs one command line in-process and returns its exit code.
func (s *streams) run(t *testing.T, args ...string) int {
	t.Helper()
	s.stdout.Reset()
	s.stderr.Reset()
	return Main(context.Background(), args, Env{
		Stdin: strings.NewReader(""), Stdout: &s.stdout, Stderr: &s.stderr,
		Getenv: func(k string) string { return s.env[k] },
	})
}

// must runs a command and fails unless it exits with want.
func (s *streams) must(t *testing.T, want int, args ...string) {
	t.Helper()
	if code := s.run(t, args...); code != want {
		t.Fatalf("steward %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, s.stdout.String(), s.stderr.String())
	}
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const mixedSet = `
name: mixed
tasks:
  - name: echo
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "%s" "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: right, input: "x", target: "x"}
      - {id: wrong, input: "y", target: "z"}
`

func TestVersion(t *testing.T) {
	s := newStreams()
	s.must(t, ExitOK, "version")
	if got, want := s.stdout.String(), "steward "+version()+"\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if s.stderr.Len() != 0 {
		t.Fatalf("stderr %q", s.stderr.String())
	}
}

// Bad input of every kind exits 2 with one clear line on stderr naming
// what is wrong, and prints nothing on stdout.
func TestBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), mixedSet)
	badSet := writeFile(t, filepath.Join(dir, "bad", "steward.yaml"), "tasks:\n  - name: t\n    agent: echo\n    sandbox: {provider: dockr}\n    samples: [{id: a, input: x, target: x}]\n")
	empty := t.TempDir()
	fifo := filepath.Join(empty, "events.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", nil, []string{"launch", "--nope", set}, "unknown flag: --nope"},
		{"flag without value", nil, []string{"report", "--format"}, "flag needs an argument"},
		{"bad flag value", nil, []string{"launch", "--max-concurrency", "many", set}, `invalid argument "many"`},
		{"too many args", nil, []string{"version", "extra"}, `unknown command "extra"`},
		{"zero concurrency", nil, []string{"launch", "--max-concurrency", "0", set}, "flag: --max-concurrency: must be at least 1, got 0"},
		{"negative budget", nil, []string{"launch", "--budget", "-1", set}, "flag: --budget: must not be negative"},
		{"bad worker timeout (env)", map[string]string{"STEWARD_WORKER_TIMEOUT": "soon"}, []string{"launch", "--record", filepath.Join(dir, "rec"), set}, `env: STEWARD_WORKER_TIMEOUT: "soon"`},
		{"events FIFO without a reader", nil, []string{"launch", "--record", filepath.Join(dir, "rec"), "--events", fifo, set}, "a FIFO with no reader"},
		{"events in a missing directory", nil, []string{"launch", "--record", filepath.Join(dir, "rec"), "--events", filepath.Join(empty, "no", "events.jsonl"), set}, "--events"},
		{"eval set error with did-you-mean", nil, []string{"launch", "--dry", badSet}, `tasks[0].sandbox.provider: unknown provider "dockr" (did you mean "docker"?)`},
		{"missing eval set", nil, []string{"launch", filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"hold without reason", nil, []string{"ramp", "hold", "--record", empty}, "--reason is required"},
		{"recover without confirmations", nil, []string{"lease", "recover", "k", "--record", empty}, "recover needs --token"},
		{"report of no record", nil, []string{"report", "--record", filepath.Join(empty, "none")}, "none"},
		{"lease inspect of no record", nil, []string{"lease", "inspect", "--record", filepath.Join(empty, "none")}, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStreams()
			for k, v := range c.env {
				s.env[k] = v
			}
			s.must(t, ExitBadInput, c.args...)
			if !strings.Contains(s.stderr.String(), c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, s.stderr.String())
			}
			if !strings.HasPrefix(s.stderr.String(), "steward: ") && !strings.Contains(s.stderr.String(), "\nsteward: ") {
				t.Errorf("stderr does not say steward: …\n%s", s.stderr.String())
			}
			if s.stdout.Len() != 0 {
				t.Errorf("stdout on bad input:\n%s", s.stdout.String())
			}
		})
	}
}

// A launch with a failing attempt exits 1; its report is read back from
// the record in each format, and report's own bad input exits 2.
func TestLaunchThenReport(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), mixedSet)
	rec := filepath.Join(dir, "rec")
	s := newStreams()
	s.must(t, ExitFailed, "launch", "--record", rec, set)
	if !strings.Contains(s.stderr.String()+s.stdout.String(), "2 attempts") {
		t.Errorf("no plan line:\nstdout:\n%s\nstderr:\n%s", s.stdout.String(), s.stderr.String())
	}

	s.must(t, ExitOK, "report", "--record", rec, "--format", "json")
	var rep report.Report
	if err := json.Unmarshal(s.stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report --format json is not JSON: %v\n%s", err, s.stdout.String())
	}
	if rep.Counts.Passed != 1 || rep.Counts.Failed != 1 || len(rep.Attempts) != 2 {
		t.Fatalf("counts %+v, %d attempts", rep.Counts, len(rep.Attempts))
	}
	runID := rep.RunIDs[0]

	s.must(t, ExitOK, "report", "--record", rec, "--format", "markdown", "--run", runID)
	if !strings.Contains(s.stdout.String(), "| echo | wrong | 1 | failed |") || !strings.Contains(s.stdout.String(), "50.0% (9.5–90.5%, n=2)") {
		t.Errorf("markdown report lacks the failure or the pass rate:\n%s", s.stdout.String())
	}
	s.must(t, ExitOK, "report", "--record", rec, "--format", "junit")
	if !strings.Contains(s.stdout.String(), "<testsuite") || !strings.Contains(s.stdout.String(), "failures=\"1\"") {
		t.Errorf("junit report:\n%s", s.stdout.String())
	}

	s.must(t, ExitBadInput, "report", "--record", rec, "--run", "r-nope")
	if !strings.Contains(s.stderr.String(), "--run r-nope: no such run") {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
	s.must(t, ExitBadInput, "report", "--record", rec, "--format", "pdf")
	if !strings.Contains(s.stderr.String(), `--format "pdf"`) {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}

	// The same launch again carries both attempts: it still fails (a carried failure counts).
	s.must(t, ExitFailed, "launch", "--record", rec, set)
}

// ramp hold and resume write the control live runs read; hold needs a reason.
func TestRampHoldResume(t *testing.T) {
	rec := t.TempDir()
	s := newStreams()
	s.must(t, ExitOK, "ramp", "hold", "--record", rec, "--reason", "provider looks unhappy")
	if got := s.stdout.String(); !strings.Contains(got, "ramp held: provider looks unhappy") {
		t.Fatalf("stdout %q", got)
	}
	if got := control(t, rec); got != "provider looks unhappy" {
		t.Fatalf("hold control %q", got)
	}
	s.must(t, ExitOK, "ramp", "resume", "--record", rec)
	if got := s.stdout.String(); !strings.Contains(got, "ramp resumed") {
		t.Fatalf("stdout %q", got)
	}
	if got := control(t, rec); got != "" {
		t.Fatalf("hold control after resume %q", got)
	}
	s.must(t, ExitBadInput, "ramp", "hold", "--record", rec, "--reason", "  ")
	if got := control(t, rec); got != "" {
		t.Fatalf("a blank reason held the ramp: %q", got)
	}
}

func control(t *testing.T, rec string) string {
	t.Helper()
	db, err := record.OpenReadOnly(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.Control(context.Background(), tend.HoldKey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tend shows the live state of runs that are alive (their lock held), not
// of finished runs; with no live run it says so and exits 0.
func TestTend(t *testing.T) {
	ctx := context.Background()
	rec := t.TempDir()
	s := newStreams()
	s.must(t, ExitOK, "tend", "--record", filepath.Join(rec, "none"))
	if !strings.HasPrefix(s.stdout.String(), "no live run") {
		t.Fatalf("stdout %q", s.stdout.String())
	}

	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(rec, "runs", "r-live.lock")
	lock, err := runlock.Acquire(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	now := time.Now()
	for _, id := range []string{"r-live", "r-done"} {
		if err := db.StartRun(ctx, record.Run{ID: id, EvalSet: "steward.yaml", Started: now, PID: os.Getpid(), Host: "h", LockPath: filepath.Join(rec, "runs", id+".lock")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(ctx, "r-done", "finished", now, nil); err != nil {
		t.Fatal(err)
	}
	s.must(t, ExitOK, "tend", "--record", rec)
	if !strings.Contains(s.stdout.String(), "no live run on this record has tended yet") {
		t.Fatalf("stdout %q", s.stdout.String())
	}
	for _, id := range []string{"r-live", "r-done"} {
		st := tend.LiveState{RunID: id, EvalSet: "steward.yaml", Plan: "3 attempts", At: now, Range: "[2, 10]", Held: "looks unhappy",
			Tasks: []string{"alpha"}, Setpoints: []int{2}, Caps: []int{4}, Running: []int{1}, Queued: []int{2}, Budget: 8}
		b, _ := json.Marshal(st)
		if err := db.SetLive(ctx, id, string(b), now); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s.must(t, ExitOK, "tend", "--record", rec)
	out := s.stdout.String()
	for _, want := range []string{"run r-live", "not tended yet", "HELD: looks unhappy", "budget 8", "alpha", "setpoint    2 (cap 4)", "queued     2"} {
		if !strings.Contains(out, want) {
			t.Errorf("tend lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "r-done") {
		t.Errorf("tend shows a finished run:\n%s", out)
	}
	s.must(t, ExitOK, "tend", "--record", rec, "--json")
	var st tend.LiveState
	if err := json.Unmarshal([]byte(strings.TrimSpace(s.stdout.String())), &st); err != nil || st.RunID != "r-live" {
		t.Fatalf("tend --json: %v\n%s", err, s.stdout.String())
	}
}

// lease inspect shows the holder and its token (the only place it is
// shown); recover needs the token and both confirmations; a wrong token is refused.
func TestLeaseInspectAndRecover(t *testing.T) {
	ctx := context.Background()
	rec := t.TempDir()
	s := newStreams()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	s.must(t, ExitOK, "lease", "inspect", "--record", rec)
	if got := s.stdout.String(); got != "no lease is held\n" {
		t.Fatalf("stdout %q", got)
	}
	token, err := db.TryAcquire(ctx, "db", "r-1", "migrations", 4242, "ci-host", time.Now())
	if err != nil || token == "" {
		t.Fatalf("acquire: %q, %v", token, err)
	}
	db.Close()

	s.must(t, ExitOK, "lease", "inspect", "--record", rec)
	for _, want := range []string{"key:      db", "run:      r-1", "task:     migrations", "pid 4242 on ci-host", "token:    " + token, "steward lease recover KEY"} {
		if !strings.Contains(s.stdout.String(), want) {
			t.Errorf("inspect lacks %q:\n%s", want, s.stdout.String())
		}
	}
	s.must(t, ExitOK, "lease", "inspect", "other", "--record", rec)
	if got := s.stdout.String(); got != "lease \"other\" is free\n" {
		t.Fatalf("stdout %q", got)
	}
	s.must(t, ExitBadInput, "lease", "recover", "db", "--record", rec, "--token", token, "--owner-gone")
	s.must(t, ExitBadInput, "lease", "recover", "db", "--record", rec, "--token", "not-the-token", "--owner-gone", "--state-quiescent")
	s.must(t, ExitOK, "lease", "inspect", "db", "--record", rec)
	if !strings.Contains(s.stdout.String(), token) {
		t.Fatal("a refused recover freed the lease")
	}
	s.must(t, ExitOK, "lease", "recover", "db", "--record", rec, "--token", token, "--owner-gone", "--state-quiescent")
	if got := s.stdout.String(); got != "lease \"db\" recovered\n" {
		t.Fatalf("stdout %q", got)
	}
	s.must(t, ExitOK, "lease", "inspect", "db", "--record", rec)
	if got := s.stdout.String(); got != "lease \"db\" is free\n" {
		t.Fatalf("after recover: %q", got)
	}
}

// `launch --events FILE` writes each attempt as it is published and "end"
// last with the counts; the next launch starts the file afresh and its
// carried attempts say where they came from.
func TestLaunchEvents(t *testing.T) {
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), mixedSet)
	events := filepath.Join(dir, "events.jsonl")
	read := func() (attempts []eventlog.AttemptEvent, end eventlog.EndEvent) {
		t.Helper()
		b, err := os.ReadFile(events)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for i, l := range lines {
			var k struct{ Event string }
			if err := json.Unmarshal([]byte(l), &k); err != nil {
				t.Fatalf("line %d %q: %v", i+1, l, err)
			}
			switch k.Event {
			case "attempt":
				var a eventlog.AttemptEvent
				if err := json.Unmarshal([]byte(l), &a); err != nil {
					t.Fatal(err)
				}
				attempts = append(attempts, a)
			case "end":
				if i != len(lines)-1 {
					t.Fatalf("end is line %d of %d", i+1, len(lines))
				}
				if err := json.Unmarshal([]byte(l), &end); err != nil {
					t.Fatal(err)
				}
			case "tend", "live":
			default:
				t.Fatalf("line %d: unknown event %q", i+1, k.Event)
			}
		}
		return attempts, end
	}
	s := newStreams()
	s.must(t, ExitFailed, "launch", "--record", filepath.Join(dir, "rec"), "--events", events, set)
	as, end := read()
	if len(as) != 2 || end.Counts.Passed != 1 || end.Counts.Failed != 1 || len(end.RunIDs) != 1 || end.Cancelled {
		t.Fatalf("first launch: attempts %+v, end %+v", as, end)
	}
	first := end.RunIDs[0]
	for _, a := range as {
		if a.RunID != first || a.CarriedFrom != "" || (a.Sample == "right") != (a.Status == "passed") {
			t.Errorf("first launch's attempt %+v", a)
		}
	}
	s.must(t, ExitFailed, "launch", "--record", filepath.Join(dir, "rec"), "--events", events, set)
	as, end = read()
	if len(as) != 2 || end.Counts.Passed != 1 || end.RunIDs[0] == first {
		t.Fatalf("second launch: attempts %+v, end %+v", as, end)
	}
	// A carried line says what the record says of the attempt.
	s.must(t, ExitOK, "report", "--record", filepath.Join(dir, "rec"), "--format", "json")
	var rep report.Report
	if err := json.Unmarshal(s.stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		var row *report.AttemptRow
		for i := range rep.Attempts {
			if rep.Attempts[i].Sample == a.Sample {
				row = &rep.Attempts[i]
			}
		}
		if row == nil || a.CarriedFrom != first || a.CarriedFrom != row.CarriedFrom || a.RunID != end.RunIDs[0] ||
			a.Reason != row.Reason || a.Finished.IsZero() || (a.Score == nil) != (row.Score == nil) || (a.Score != nil && *a.Score != *row.Score) {
			t.Errorf("second launch's attempt %+v\nwant as the record has it, carried from %s: %+v", a, first, row)
		}
	}

	// A launch that fails after the file is open still ends it, with its error.
	s.must(t, ExitBadInput, "launch", "--record", filepath.Join(dir, "rec"), "--events", events, "--task", "nope", set)
	if as, end = read(); len(as) != 0 || !strings.Contains(end.Error, "no attempts") {
		t.Fatalf("failed launch: attempts %+v, end %+v", as, end)
	}

	// A file that holds anything but events is never overwritten: a
	// forgotten FILE would otherwise wipe the eval set.
	before := mustReadFile(t, set)
	s.must(t, ExitBadInput, "launch", "--record", filepath.Join(dir, "rec"), "--events", set, set)
	if !strings.Contains(s.stderr.String(), "not an events file") || mustReadFile(t, set) != before {
		t.Fatalf("--events on the eval set: %s", s.stderr.String())
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
