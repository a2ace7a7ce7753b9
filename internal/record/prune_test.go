package record

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// ciSim simulates CI runs of one eval set into a record: the first run
// runs every sample, each later one re-runs the few samples a pull request
// changed (new fingerprints) and carries the rest (references), as a
// cached record sees them.
type ciSim struct {
	db      *DB
	samples int
	changed int
	t0      time.Time
	version []int // each sample's definition
	src     []Ref // each sample's newest own row (SrcRun, SrcSeq)
	outcome func(s, v, attempt int) status.Attempt
	runs    int
	rng     *rand.Rand
}

func newCISim(db *DB, samples, changed int) *ciSim {
	return &ciSim{db: db, samples: samples, changed: changed, t0: time.Unix(1_750_000_000, 0),
		version: make([]int, samples), src: make([]Ref, samples), rng: rand.New(rand.NewPCG(1, 2)),
		outcome: func(s, v, a int) status.Attempt {
			if (s*31+v*7+a)%5 == 0 {
				return status.Failed
			}
			return status.Passed
		}}
}

func (c *ciSim) parts(s int) string {
	return fmt.Sprintf(`{"image":"img","inputs":"in-%d-v%d","model":"m","sample":"s%04d","task":"t"}`, s, c.version[s], s)
}

func (c *ciSim) fingerprint(s, attempt int) string {
	return fmt.Sprintf("fp-%04d-v%d-#%d", s, c.version[s], attempt)
}

// run simulates one CI run; extra is how many more own attempts of every
// changed sample it runs (a nightly --confirm's evidence). It returns the
// run's id.
func (c *ciSim) run(tb testing.TB, st status.Run, extra int) string {
	tb.Helper()
	ctx := context.Background()
	i := c.runs
	c.runs++
	id := fmt.Sprintf("r%04d", i)
	at := c.t0.Add(time.Duration(i) * time.Hour)
	if err := c.db.StartRun(ctx, Run{ID: id, EvalSet: "/ws/steward.yaml", Started: at}); err != nil {
		tb.Fatal(err)
	}
	changed := map[int]bool{}
	if i > 0 {
		for k := 0; k < c.changed; k++ {
			changed[(i*7+k*131)%c.samples] = true
		}
	}
	var own []Attempt
	var refs []Ref
	blob := make([]byte, 3<<10) // a compressed transcript: incompressible
	for s := 0; s < c.samples; s++ {
		if i > 0 && !changed[s] {
			refs = append(refs, Ref{RunID: id, Seq: s, SrcRun: c.src[s].SrcRun, SrcSeq: c.src[s].SrcSeq})
			continue
		}
		if i > 0 {
			c.version[s]++
		}
		a := Attempt{RunID: id, Seq: s, Task: "t", Sample: fmt.Sprintf("s%04d", s), Attempt: 1,
			Status: c.outcome(s, c.version[s], 1), Fingerprint: c.fingerprint(s, 1), Parts: c.parts(s),
			Answer: "the answer is 42", Log: "agent ran: 3 model calls, 2 tool calls", Started: at, Finished: at.Add(time.Minute),
			Duration: time.Minute, InputTokens: 1200, OutputTokens: 300, Requests: 3}
		own = append(own, a)
		c.src[s] = Ref{SrcRun: id, SrcSeq: s}
	}
	seq := c.samples
	for s := range changed {
		for e := 0; e < extra; e++ {
			a := Attempt{RunID: id, Seq: seq, Task: "t", Sample: fmt.Sprintf("s%04d", s), Attempt: 2 + e,
				Status: c.outcome(s, c.version[s], 2+e), Fingerprint: c.fingerprint(s, 2+e), Parts: c.parts(s),
				Started: at, Finished: at.Add(2 * time.Minute)}
			own = append(own, a)
			seq++
		}
	}
	if err := c.db.PublishAll(ctx, own); err != nil {
		tb.Fatal(err)
	}
	for _, a := range own {
		for j := range blob {
			blob[j] = byte(c.rng.Uint32())
		}
		if err := c.db.PutTranscript(ctx, id, a.Seq, TranscriptInfo{Calls: 3, RawBytes: 12 << 10}, blob); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.db.PublishCarried(ctx, refs); err != nil {
		tb.Fatal(err)
	}
	if st != status.Running {
		if err := c.db.FinishRun(ctx, id, st, at.Add(10*time.Minute), nil); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.db.Checkpoint(ctx); err != nil {
		tb.Fatal(err)
	}
	return id
}

// Prune keeps what carry, the baseline, `steward flaky` and the newest runs
// need, and the file shrinks (issue 23 item 12).
func TestPruneKeepsWhatCarryAndFlakyNeed(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sim := newCISim(db, 60, 3)
	var ids []string
	stuck := ""
	for i := 0; i < 30; i++ {
		st := status.Finished
		switch {
		case i == 3:
			st = status.Running // an old run still going (or never marked): kept whole
		case i >= 24:
			st = status.Cancelled // the newest finished run is r0023
		}
		extra := 0
		if i%4 == 0 {
			extra = 3 // nightly evidence at the changed samples' new definitions
		}
		id := sim.run(t, st, extra)
		ids = append(ids, id)
		if i == 3 {
			stuck = id
		}
	}
	// s0023 changed in the last run. An errored attempt of r0002 at its
	// first definition is no evidence of the newest one: dropped. A failed
	// attempt of r0004 at its newest definition is the ledger's evidence
	// (not carry's: r0029's row is the newest of its fingerprint): kept.
	sample := 23
	if (29*7)%sim.samples != sample {
		t.Fatal("the simulation's changed samples moved")
	}
	oldParts := `{"image":"img","inputs":"in-23-v0","model":"m","sample":"s0023","task":"t"}`
	extraRows := []Attempt{
		{RunID: "r0002", Seq: 900, Task: "t", Sample: "s0023", Attempt: 1, Status: status.Errored, Fingerprint: "fp-0023-v0-#1", Parts: oldParts, Finished: sim.t0.Add(2*time.Hour + time.Minute)},
		{RunID: "r0004", Seq: 900, Task: "t", Sample: "s0023", Attempt: 1, Status: status.Failed, Fingerprint: sim.fingerprint(sample, 1), Parts: sim.parts(sample), Finished: sim.t0.Add(4*time.Hour + time.Minute)},
	}
	if err := db.PublishAll(ctx, extraRows); err != nil {
		t.Fatal(err)
	}
	var fps []string
	for s := 0; s < sim.samples; s++ {
		for a := 1; a <= 4; a++ {
			fps = append(fps, sim.fingerprint(s, a))
		}
	}
	carry := func() Candidates {
		c, err := db.Carryable(ctx, fps, false, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	passedOnly := func() Candidates {
		c, err := db.Carryable(ctx, fps, true, false)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The ledger at each sample's newest identity.
	ledger := func() map[string]LedgerRow {
		rows, err := db.Ledger(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]LedgerRow{}
		for _, r := range rows {
			s := 0
			fmt.Sscanf(r.Sample, "s%d", &s)
			if r.Identity == Identity("t", r.Sample, sim.parts(s)) {
				out[r.Sample] = r
			}
		}
		return out
	}
	attemptsOf := func(ids ...string) map[string][]Attempt {
		out := map[string][]Attempt{}
		for _, id := range ids {
			as, err := db.Attempts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out[id] = as
		}
		return out
	}
	keepRuns, keepTranscripts := 5, 2
	newest := append(ids[len(ids)-keepRuns:], "r0023", stuck)
	beforeCarry, beforePassed, beforeLedger, beforeRuns := carry(), passedOnly(), ledger(), attemptsOf(newest...)
	transcripts := func() int {
		n := 0
		for _, id := range ids[len(ids)-keepTranscripts:] {
			for _, a := range beforeRuns[id] {
				if _, blob, err := db.TranscriptOf(ctx, a); err != nil {
					t.Fatal(err)
				} else if blob != nil {
					n++
				}
			}
		}
		return n
	}
	beforeTranscripts := transcripts()
	if len(beforeLedger) != sim.samples || beforeTranscripts == 0 {
		t.Fatalf("the simulation: %d ledger rows, %d transcripts", len(beforeLedger), beforeTranscripts)
	}

	dry, err := db.Prune(ctx, PruneOptions{KeepRuns: keepRuns, KeepTranscripts: keepTranscripts, Dry: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.Dropped() || dry.BytesAfter != dry.BytesBefore || db.Size() != dry.BytesBefore {
		t.Fatalf("dry run: %+v (size now %d)", dry, db.Size())
	}
	res, err := db.Prune(ctx, PruneOptions{KeepRuns: keepRuns, KeepTranscripts: keepTranscripts})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prune: %+v", res)
	if res.AttemptsDropped != dry.AttemptsDropped || res.CarriesDropped != dry.CarriesDropped || res.RunsDropped != dry.RunsDropped || res.TranscriptsDropped != dry.TranscriptsDropped {
		t.Errorf("the dry run said %+v, prune did %+v", dry, res)
	}
	if res.BytesAfter >= res.BytesBefore/2 {
		t.Errorf("the record went from %d to %d bytes: it did not shrink", res.BytesBefore, res.BytesAfter)
	}
	if res.RunsKeptWhole != keepRuns+2 || res.CarriesDropped == 0 || res.TranscriptsDropped == 0 {
		t.Errorf("result %+v", res)
	}
	if got := carry(); !reflect.DeepEqual(got, beforeCarry) {
		t.Errorf("carry's candidates changed:\n%+v\nwant\n%+v", got, beforeCarry)
	}
	if got := passedOnly(); !reflect.DeepEqual(got, beforePassed) {
		t.Errorf("--rerun's candidates changed")
	}
	if got := ledger(); !reflect.DeepEqual(got, beforeLedger) {
		t.Errorf("the flaky ledger at the newest identities changed:\n%+v\nwant\n%+v", got, beforeLedger)
	}
	if got := attemptsOf(newest...); !reflect.DeepEqual(got, beforeRuns) {
		t.Errorf("the kept runs' attempts changed")
	}
	if got := transcripts(); got != beforeTranscripts {
		t.Errorf("the newest %d runs show %d transcripts, want %d", keepTranscripts, got, beforeTranscripts)
	}
	// Every other run is thinned: its carried references are gone (every
	// fingerprint's newest judged row stays: a revert carries it again).
	if res.RunsThinned+res.RunsDropped != len(ids)-keepRuns-2 {
		t.Errorf("%d runs thinned and %d dropped, want %d", res.RunsThinned, res.RunsDropped, len(ids)-keepRuns-2)
	}
	var refs int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM carries WHERE run_id='r0010'`).Scan(&refs); err != nil || refs != 0 {
		t.Errorf("a pruned run still holds %d carried references (%v)", refs, err)
	}
	var left []string
	for _, r := range extraRows {
		var n int
		if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM attempts WHERE run_id=? AND seq=?`, r.RunID, r.Seq).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			left = append(left, string(r.Status))
		}
	}
	if !reflect.DeepEqual(left, []string{"failed"}) || res.AttemptsDropped != 1 {
		t.Errorf("of the old errored and the newest definition's failed attempt, %v are left (%d dropped): want the failed one", left, res.AttemptsDropped)
	}
	// A second prune finds nothing more to drop.
	again, err := db.Prune(ctx, PruneOptions{KeepRuns: keepRuns, KeepTranscripts: keepTranscripts})
	if err != nil || again.Dropped() {
		t.Errorf("second prune: %+v, %v", again, err)
	}
	// Another eval set's runs are out of scope: kept whole.
	scoped, err := db.Prune(ctx, PruneOptions{KeepRuns: 1, InScope: func(r Run) bool { return r.EvalSet == "/elsewhere.yaml" }})
	if err != nil || scoped.Dropped() {
		t.Errorf("prune of another eval set touched this one: %+v, %v", scoped, err)
	}
}

// The record's size after 100 simulated CI runs of a 2 000-attempt eval set
// with 5 changed samples each, without prune, with the action's defaults
// after every run, and keeping no transcripts (docs/benchmarks.md, "The record over time").
func BenchmarkRecordOver100Runs(b *testing.B) {
	for _, c := range []struct {
		name        string
		pruned      bool
		transcripts int
	}{{"no-prune", false, 0}, {"prune", true, DefaultKeepTranscripts}, {"prune-transcripts-0", true, 0}} {
		pruned := c.pruned
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ctx := context.Background()
				db, err := Open(ctx, b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				sim := newCISim(db, 2000, 5)
				var after10, after100 int64
				var took time.Duration
				for r := 0; r < 100; r++ {
					sim.run(b, status.Finished, 0)
					if pruned {
						start := time.Now()
						if _, err := db.Prune(ctx, PruneOptions{KeepRuns: DefaultKeepRuns, KeepTranscripts: c.transcripts}); err != nil {
							b.Fatal(err)
						}
						took = max(took, time.Since(start))
					}
					if r == 9 {
						after10 = db.Size()
					}
				}
				after100 = db.Size()
				b.ReportMetric(float64(after10)/1024, "KiB@10runs")
				b.ReportMetric(float64(after100)/1024, "KiB@100runs")
				if pruned {
					b.ReportMetric(took.Seconds(), "s/prune(max)")
				}
				db.Close()
			}
		})
	}
}
