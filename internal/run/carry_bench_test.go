package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

// carrySet writes an eval set of 1 000 samples × 5 attempts and a record in
// which a finished run judged all 5 000 (each with a 2 KB log), as a real
// run would have left it.
func carrySet(tb testing.TB) (path, rec string) {
	tb.Helper()
	dir := tb.TempDir()
	var b strings.Builder
	b.WriteString("tasks:\n  - name: big\n    sandbox: {provider: local}\n    exclusive: false\n    agent: 'echo ok'\n    scorer: {match: exact}\n    attempts: 5\n    samples:\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "      - {id: s%04d, input: \"question %d\", target: ok}\n", i, i)
	}
	path = filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Build(es, plan.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	rec = es.Fleet.Record
	ctx := context.Background()
	db, err := record.Open(ctx, rec)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	if err := db.StartRun(ctx, record.Run{ID: "r-producer", EvalSet: path, Started: now}); err != nil {
		tb.Fatal(err)
	}
	tx, err := db.SQL().Begin()
	if err != nil {
		tb.Fatal(err)
	}
	log := strings.Repeat("agent output line\n", 110)
	for _, a := range p.Attempts {
		if _, err := tx.Exec(`INSERT INTO attempts(run_id, seq, task, sample, attempt, status, score, fingerprint, parts, started_at, finished_at, duration_ns, input_tokens, output_tokens, cost_usd, requests, log, source)
			VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, "r-producer", a.Seq, "big", a.Sample.ID, a.Number, "passed", 1.0, a.Fingerprint, a.PartsJSON(),
			now.UnixNano(), now.UnixNano(), int64(time.Second), 1200, 300, 0.004, 3, log, a.Sample.Source); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	if err := db.FinishRun(ctx, "r-producer", "finished", now, nil); err != nil {
		tb.Fatal(err)
	}
	return path, rec
}

func launchCarry(tb testing.TB, path string, dry bool) (time.Duration, *Result) {
	tb.Helper()
	prov := &counting{Provider: local.New(local.Options{BaseDir: tb.TempDir()})}
	start := time.Now()
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Launch(context.Background(), Options{EvalSet: es, Providers: factory{prov}, Dry: dry})
	d := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	if prov.created.Load() != 0 {
		tb.Fatalf("a fully carried run created %d sandboxes", prov.created.Load())
	}
	return d, res
}

func recordBytes(tb testing.TB, rec string) int64 {
	tb.Helper()
	var n int64
	for _, suf := range []string{"", "-wal"} {
		if st, err := os.Stat(filepath.Join(rec, record.FileName+suf)); err == nil {
			n += st.Size()
		}
	}
	return n
}

// BenchmarkCarry5000: a fully carried re-run of 5 000 attempts, and its
// --dry, against a baseline measured side by side: reading the producing
// run's 5 000 attempts from the record (what any report of them must do).
// Also reports how much the record grows per no-op re-run.
func BenchmarkCarry5000(b *testing.B) {
	path, rec := carrySet(b)
	// Warm the page cache once (untimed), so `-benchtime 1x` (make bench)
	// compares warm runs.
	launchCarry(b, path, true)
	if db, err := record.OpenReadOnly(context.Background(), rec); err == nil {
		_, _ = db.Attempts(context.Background(), "r-producer")
		db.Close()
	}
	b.ResetTimer()
	var carry, dry, base time.Duration
	var grow int64
	for i := 0; i < b.N; i++ {
		d, res := launchCarry(b, path, true)
		dry += d
		if len(res.Report.Attempts) != 5000 {
			b.Fatalf("dry planned %d attempts", len(res.Report.Attempts))
		}
		before := recordBytes(b, rec)
		d, res = launchCarry(b, path, false)
		carry += d
		if res.Report.Counts.Reused != 5000 {
			b.Fatalf("carried %d of 5000", res.Report.Counts.Reused)
		}
		grow += recordBytes(b, rec) - before
		start := time.Now()
		db, err := record.OpenReadOnly(context.Background(), rec)
		if err != nil {
			b.Fatal(err)
		}
		as, err := db.Attempts(context.Background(), "r-producer")
		db.Close()
		base += time.Since(start)
		if err != nil || len(as) != 5000 {
			b.Fatalf("baseline read %d attempts: %v", len(as), err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(carry.Seconds()/n, "carry-s")
	b.ReportMetric(dry.Seconds()/n, "dry-s")
	b.ReportMetric(base.Seconds()/n, "baseline-read-s")
	b.ReportMetric(carry.Seconds()/base.Seconds(), "carry/baseline")
	b.ReportMetric(dry.Seconds()/base.Seconds(), "dry/baseline")
	b.ReportMetric(float64(grow)/n/1024, "record-KiB/rerun")
}
