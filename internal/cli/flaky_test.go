package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// flakyParts are the fingerprint parts of the seeded rows.
const flakyParts = `{"image":"image:busybox","inputs":"i","model":"m","sample":"s","task":"t"}`

// seedFlaky makes a record of two runs of dir/steward.yaml and one of
// another eval set: arith/add passed 2 of 3 (and a carried copy that does
// not count), arith/mul passed only, files/shout failed 1 of 2 with an
// error, and the other eval set's run fails arith/mul once.
func seedFlaky(t *testing.T) (dir, evalSet string) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	evalSet = filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(evalSet, []byte("tasks: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := record.Open(ctx, filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	for i, r := range []struct{ id, es string }{{"r1", evalSet}, {"r2", evalSet}, {"o1", "/elsewhere/steward.yaml"}} {
		if err := db.StartRun(ctx, record.Run{ID: r.id, EvalSet: r.es, Started: t0.Add(time.Duration(i) * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	seq := map[string]int{}
	pub := func(run, task, sample string, n int, st status.Attempt, carried string, at time.Time) {
		t.Helper()
		if err := db.Publish(ctx, record.Attempt{RunID: run, Seq: seq[run], Task: task, Sample: sample, Attempt: n, Status: st, CarriedFrom: carried,
			Fingerprint: task + "/" + sample + "#" + string(rune('0'+n)), Parts: flakyParts, Finished: at}); err != nil {
			t.Fatal(err)
		}
		seq[run]++
	}
	day := 24 * time.Hour
	pub("r1", "arith", "add", 1, status.Passed, "", t0.Add(time.Minute))
	pub("r1", "arith", "add", 2, status.Failed, "", t0.Add(2*time.Minute))
	pub("r1", "arith", "mul", 1, status.Passed, "", t0.Add(3*time.Minute))
	pub("r1", "files", "shout", 1, status.Errored, "", t0.Add(4*time.Minute))
	pub("r2", "arith", "add", 3, status.Passed, "", t0.Add(day+time.Minute))
	pub("r2", "arith", "add", 1, status.Failed, "r1", t0.Add(day+2*time.Minute)) // a carried copy
	pub("r2", "arith", "mul", 2, status.Passed, "", t0.Add(day+3*time.Minute))
	pub("r2", "files", "shout", 2, status.Passed, "", t0.Add(day+4*time.Minute))
	pub("r2", "files", "shout", 3, status.Failed, "", t0.Add(day+5*time.Minute))
	pub("o1", "arith", "mul", 1, status.Failed, "", t0.Add(2*day))
	return dir, evalSet
}

func short(task, sample string) string { return record.Identity(task, sample, flakyParts)[:8] }

func TestFlaky(t *testing.T) {
	dir, evalSet := seedFlaky(t)
	rec := filepath.Join(dir, ".steward")

	// The eval set's runs: add and shout are flaky, mul is not.
	out, code := steward("flaky", evalSet)
	want := `┌───────┬────────┬────────┬───────┬────────────┬─────────┬──────┬──────────────────────┬────────────┐
│ TASK  │ SAMPLE │ PASSED │ RATE  │  INTERVAL  │ ERRORED │ RUNS │      LAST SEEN       │ DEFINITION │
├───────┼────────┼────────┼───────┼────────────┼─────────┼──────┼──────────────────────┼────────────┤
│ arith │ add    │ 2/3    │ 66.7% │ 20.8–93.9% │ 0       │ 2    │ 2026-12-01 02:01 UTC │ ` + short("arith", "add") + `   │
│ files │ shout  │ 1/2    │ 50.0% │ 9.5–90.5%  │ 1       │ 2    │ 2026-12-01 02:05 UTC │ ` + short("files", "shout") + `   │
└───────┴────────┴────────┴───────┴────────────┴─────────┴──────┴──────────────────────┴────────────┘
2 samples are flaky (passed and failed at one definition); intervals are 95% Wilson; carried attempts are not counted
`
	if code != ExitOK || out != want {
		t.Fatalf("steward flaky EVALSET: exit %d\n%s\nwant\n%s", code, out, want)
	}

	// Every eval set's runs (the default record beside ./steward.yaml is
	// not this one: --record): the other run's failure makes mul flaky.
	out, code = steward("flaky", "--record", rec)
	if code != ExitOK || !strings.Contains(out, "│ arith │ mul    │ 2/3    │ 66.7% │") || !strings.Contains(out, "3 samples are flaky") {
		t.Fatalf("steward flaky --record: exit %d\n%s", code, out)
	}

	// --all --json: every ledger row, stable field names.
	out, code = steward("flaky", evalSet, "--all", "--json")
	if code != ExitOK {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	var rep struct {
		EvalSet    string  `json:"evalset"`
		Confidence float64 `json:"confidence"`
		All        bool    `json:"all"`
		Samples    []struct {
			Task, Sample, Identity string
			Flaky                  bool
			Passed, Failed         int
			Errored, Judged        int
			Rate                   *float64
			Interval               *struct{ Lo, Hi float64 }
			Runs                   int
			MaxAttempt             int       `json:"max_attempt"`
			FirstSeen              time.Time `json:"first_seen"`
			LastSeen               time.Time `json:"last_seen"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if rep.EvalSet != evalSet || rep.Confidence != 0.95 || !rep.All || len(rep.Samples) != 3 {
		t.Fatalf("--json: %+v", rep)
	}
	add, mul := rep.Samples[0], rep.Samples[1]
	if add.Task != "arith" || add.Sample != "add" || !add.Flaky || add.Passed != 2 || add.Failed != 1 || add.Judged != 3 || add.Runs != 2 ||
		add.MaxAttempt != 3 || add.Rate == nil || *add.Rate != 2.0/3 || add.Interval == nil || add.Interval.Lo < 0.2076 || add.Interval.Lo > 0.2078 ||
		add.FirstSeen != time.Date(2026, 11, 30, 2, 1, 0, 0, time.UTC) || add.Identity != record.Identity("arith", "add", flakyParts) {
		t.Errorf("add: %+v", add)
	}
	if mul.Sample != "mul" || mul.Flaky || mul.Passed != 2 || mul.Failed != 0 {
		t.Errorf("mul: %+v", mul)
	}
	for _, field := range []string{`"evalset"`, `"confidence"`, `"samples"`, `"task"`, `"sample"`, `"identity"`, `"flaky"`, `"passed"`, `"failed"`, `"errored"`, `"judged"`, `"rate"`, `"interval"`, `"lo"`, `"hi"`, `"runs"`, `"max_attempt"`, `"first_seen"`, `"last_seen"`} {
		if !strings.Contains(out, field) {
			t.Errorf("--json has no %s field", field)
		}
	}
	out, _ = steward("flaky", evalSet, "--all")
	if !strings.Contains(out, "│ arith │ add (flaky)   │ 2/3    │ 66.7%  │") || !strings.Contains(out, "│ arith │ mul           │ 2/2    │ 100.0% │ 34.2–100.0% │") {
		t.Errorf("--all:\n%s", out)
	}
}

func TestFlakyNoneAndBadInput(t *testing.T) {
	dir, evalSet := seedFlaky(t)
	empty := t.TempDir()
	seed(t, empty, 3) // one run, passed only
	out, code := steward("flaky", "--record", empty)
	if code != ExitOK || out != "no flaky samples in the record (no sample both passed and failed at one definition)\n" {
		t.Errorf("no flaky samples: exit %d %q", code, out)
	}
	out, code = steward("flaky", "--record", empty, "--json")
	if code != ExitOK || !strings.Contains(out, `"samples": []`) {
		t.Errorf("no flaky samples --json: exit %d %s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"flaky", "--record", t.TempDir()}, "no record"},
		{[]string{"flaky", "--record", filepath.Join(dir, ".steward"), filepath.Join(dir, "other.yaml")}, "holds no run of " + filepath.Join(dir, "other.yaml") + "; its runs are of /elsewhere/steward.yaml, " + evalSet},
		{[]string{"flaky", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"flaky", "--nope"}, "unknown flag: --nope"},
	} {
		out, code := steward(c.args...)
		if code != ExitBadInput || !strings.Contains(out, c.want) {
			t.Errorf("steward %v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, out)
		}
	}
}
