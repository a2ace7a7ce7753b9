package record

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

func TestIdentity(t *testing.T) {
	p := `{"image":"i","inputs":"n","model":"m","sample":"s","task":"t"}`
	id := Identity("t", "a", p)
	if got := Identity("t", "a", "{ \"task\":\"t\", \"sample\":\"s\", \"model\":\"m\", \"inputs\":\"n\", \"image\":\"i\" }"); got != id {
		t.Errorf("the same parts written differently: %s, want %s", got, id)
	}
	for _, c := range [][3]string{
		{"u", "a", p}, {"t", "b", p}, {"t", "a", strings.Replace(p, `"m"`, `"m2"`, 1)},
		{"t/a", "", p}, {"t", "a", "{}"}, {"t", "a", "not json"},
	} {
		if Identity(c[0], c[1], c[2]) == id {
			t.Errorf("Identity%q = the identity of (t, a, p)", c)
		}
	}
	if len(id) != 32 {
		t.Errorf("identity %q: want 32 hex digits", id)
	}
}

// ledgerRecord is a record of three runs of eval set "e" and one of "other".
func ledgerRecord(t *testing.T) (*DB, time.Time) {
	t.Helper()
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	t0 := time.Unix(1_700_000_000, 0)
	for i, r := range []struct{ id, es string }{{"r1", "e"}, {"r2", "e"}, {"r3", "e"}, {"o1", "other"}} {
		if err := db.StartRun(ctx, Run{ID: r.id, EvalSet: r.es, Started: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	p1 := `{"image":"i","inputs":"n","model":"m","sample":"s1","task":"t"}`
	p2 := `{"image":"i","inputs":"n","model":"m","sample":"s2","task":"t"}`
	seq := map[string]int{}
	pub := func(run, task, sample, parts string, n int, st status.Attempt, carried string, at time.Duration) {
		t.Helper()
		err := db.Publish(ctx, Attempt{RunID: run, Seq: seq[run], Task: task, Sample: sample, Attempt: n, Status: st,
			CarriedFrom: carried, Fingerprint: fmt.Sprintf("%s/%s#%d@%s", task, sample, n, parts), Parts: parts, Finished: t0.Add(at)})
		if err != nil {
			t.Fatal(err)
		}
		seq[run]++
	}
	// t/a at p1: flaky (2 passed, 1 failed over r1 and r2); a carried
	// copy in r3 (attempt 3) is not counted but holds the highest number.
	pub("r1", "t", "a", p1, 1, status.Passed, "", 1*time.Minute)
	pub("r1", "t", "a", p1, 2, status.Failed, "", 2*time.Minute)
	pub("r2", "t", "a", p1, 1, status.Passed, "", 61*time.Minute)
	pub("r3", "t", "a", p1, 3, status.Failed, "r9", 121*time.Minute)
	// t/a at p2 (the sample changed): a definition of its own.
	pub("r3", "t", "a", p2, 1, status.Failed, "", 122*time.Minute)
	// t/b: passed only; its infra error, skip and interruption count nowhere.
	pub("r1", "t", "b", p1, 1, status.Passed, "", 3*time.Minute)
	pub("r2", "t", "b", p1, 1, status.Infra, "", 63*time.Minute)
	pub("r2", "t", "b", p1, 2, status.Skipped, "", 64*time.Minute)
	pub("r3", "t", "b", p1, 4, status.Interrupted, "", 124*time.Minute)
	// s/x: errored and failed.
	pub("r1", "s", "x", p1, 1, status.Errored, "", 4*time.Minute)
	pub("r2", "s", "x", p1, 1, status.Failed, "", 65*time.Minute)
	// Another eval set's run: t/a at p1 failed once more.
	pub("o1", "t", "a", p1, 1, status.Failed, "", 181*time.Minute)
	// A carried reference (carries table) is no new row of its own.
	if err := db.PublishCarried(ctx, []Ref{{RunID: "r3", Seq: 99, SrcRun: "r1", SrcSeq: 0}}); err != nil {
		t.Fatal(err)
	}
	return db, t0
}

func TestLedger(t *testing.T) {
	ctx := context.Background()
	db, t0 := ledgerRecord(t)
	p1 := `{"image":"i","inputs":"n","model":"m","sample":"s1","task":"t"}`
	p2 := `{"image":"i","inputs":"n","model":"m","sample":"s2","task":"t"}`
	m := func(d time.Duration) time.Time { return t0.Add(d) }
	want := []LedgerRow{
		{Task: "s", Sample: "x", Identity: Identity("s", "x", p1), Failed: 1, Errored: 1, Runs: 2, MaxAttempt: 1, First: m(4 * time.Minute), Last: m(65 * time.Minute)},
		{Task: "t", Sample: "a", Identity: Identity("t", "a", p1), Passed: 2, Failed: 1, Runs: 2, MaxAttempt: 3, First: m(1 * time.Minute), Last: m(61 * time.Minute)},
		{Task: "t", Sample: "a", Identity: Identity("t", "a", p2), Failed: 1, Runs: 1, MaxAttempt: 1, First: m(122 * time.Minute), Last: m(122 * time.Minute)},
		{Task: "t", Sample: "b", Identity: Identity("t", "b", p1), Passed: 1, Runs: 1, MaxAttempt: 4, First: m(3 * time.Minute), Last: m(3 * time.Minute)},
	}
	got, err := db.Ledger(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Ledger(e):\n%s\nwant\n%s", ledgerDump(got), ledgerDump(want))
	}
	var flaky []string
	for _, r := range got {
		if r.Flaky() {
			flaky = append(flaky, r.Task+"/"+r.Sample)
		}
	}
	if !reflect.DeepEqual(flaky, []string{"t/a"}) {
		t.Errorf("flaky %v, want [t/a]", flaky)
	}

	// Every eval set: the other run's failure joins t/a at p1.
	all, err := db.Ledger(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want[1].Failed, want[1].Runs, want[1].Last = 2, 3, m(181*time.Minute)
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("Ledger(\"\"):\n%s\nwant\n%s", ledgerDump(all), ledgerDump(want))
	}
	if none, err := db.Ledger(ctx, "nope"); err != nil || len(none) != 0 {
		t.Errorf("Ledger(nope) = %v, %v; want nothing", none, err)
	}
}

// TestLedgerReadOnly reads the ledger from a read-only record.
func TestLedgerReadOnly(t *testing.T) {
	ctx := context.Background()
	db, _ := ledgerRecord(t)
	if err := db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, db.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rows, err := ro.Ledger(ctx, "e")
	if err != nil || len(rows) != 4 {
		t.Fatalf("read-only Ledger = %d rows, %v", len(rows), err)
	}
}

func ledgerDump(rows []LedgerRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %s/%s %s… +%d −%d !%d runs %d max #%d %s..%s\n", r.Task, r.Sample, r.Identity[:8], r.Passed, r.Failed, r.Errored, r.Runs, r.MaxAttempt, r.First.UTC().Format(time.TimeOnly), r.Last.UTC().Format(time.TimeOnly))
	}
	return b.String()
}

// bigRecord writes runs × samples attempts (one attempt per sample and run,
// every third run's rows carried copies, answers and logs of a realistic
// size) in one transaction, half the runs in eval set "e".
func bigRecord(tb testing.TB, runs, samples int) *DB {
	tb.Helper()
	ctx := context.Background()
	db, err := Open(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO attempts(run_id, seq, task, sample, attempt, status, answer, log, carried_from, fingerprint, parts, finished_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	answer, logText := strings.Repeat("a", 100), strings.Repeat("log line\n", 20)
	for r := 0; r < runs; r++ {
		id := fmt.Sprintf("r%04d", r)
		es := "e"
		if r%2 == 1 {
			es = "other"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, evalset, status, started_at) VALUES(?,?,?,?)`, id, es, status.Finished, int64(r)); err != nil {
			tb.Fatal(err)
		}
		carried := ""
		if r%3 == 2 {
			carried = "r0000"
		}
		for s := 0; s < samples; s++ {
			task := fmt.Sprintf("task%02d", s%20)
			sample := fmt.Sprintf("sample-%05d", s)
			parts := fmt.Sprintf(`{"image":"image:busybox@sha256:%064d","inputs":"%032d","model":"%032d","sample":"%032d","task":"%032d"}`, 0, 0, 0, s, s%20)
			stat := status.Passed
			if (r+s)%4 == 0 {
				stat = status.Failed
			}
			if _, err := st.ExecContext(ctx, id, s, task, sample, 1+r%3, stat, answer, logText, carried, fmt.Sprintf("fp-%d-%d", s, 1+r%3), parts, int64(r*samples+s+1)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return db
}

// TestLedgerLarge reads the ledger of 100 000 rows (100 runs × 1 000
// samples) and checks its sums; BenchmarkLedger times it.
func TestLedgerLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a record of 100 000 rows")
	}
	const runs, samples = 100, 1000
	db := bigRecord(t, runs, samples)
	ctx := context.Background()
	for _, es := range []string{"", "e"} {
		rows, err := db.Ledger(ctx, es)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != samples {
			t.Fatalf("Ledger(%q): %d rows, want %d", es, len(rows), samples)
		}
		// Own runs: r%3 != 2; in "e" also r even.
		ownRuns := 0
		for r := 0; r < runs; r++ {
			if r%3 != 2 && (es == "" || r%2 == 0) {
				ownRuns++
			}
		}
		for _, row := range rows {
			if row.Judged() != ownRuns || row.Runs != ownRuns || row.MaxAttempt != 3 {
				t.Fatalf("Ledger(%q) row %+v: want %d judged in %d runs, max attempt 3", es, row, ownRuns, ownRuns)
			}
		}
		if rows[0].Sample != "sample-00000" || rows[0].Task != "task00" || rows[len(rows)-1].Task != "task19" {
			t.Fatalf("Ledger(%q) order: first %s/%s, last %s/%s", es, rows[0].Task, rows[0].Sample, rows[len(rows)-1].Task, rows[len(rows)-1].Sample)
		}
	}
	// One eval set's runs are found by the attempts' primary key, not by a
	// scan of every run's rows.
	plan, err := db.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT a.task FROM attempts a WHERE a.run_id IN (SELECT id FROM runs WHERE evalset = ?) GROUP BY a.task, a.sample, a.parts`, "e")
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	var steps []string
	for plan.Next() {
		var id, parent, notused int
		var detail string
		if err := plan.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	if s := strings.Join(steps, "; "); !strings.Contains(s, "SEARCH a USING INDEX sqlite_autoindex_attempts_1 (run_id=?)") {
		t.Errorf("query plan %q: want the attempts' primary key searched by run_id", s)
	}
}

func BenchmarkLedger(b *testing.B) {
	db := bigRecord(b, 100, 1000)
	ctx := context.Background()
	for _, es := range []string{"", "e"} {
		b.Run("evalset="+es, func(b *testing.B) {
			for b.Loop() {
				if _, err := db.Ledger(ctx, es); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
