// Package merge combines the records of a matrix's shard jobs into one
// record and one report (`steward merge`, the action's merge mode). It reads
// and writes records; it knows nothing of the command line.
package merge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/shard"
	"github.com/steward-evals/steward/internal/status"
)

// Options are a merge's settings.
type Options struct {
	Title   string              // the merged run's and the report's title
	Shards  int                 // expected shard count; 0: from the records
	EvalSet string              // to name what missing shards held; "" or unreadable: not named
	Getenv  func(string) string // for loading EvalSet
	// Warn takes the merge's warnings (a run given twice, a record left
	// out); nil drops them.
	Warn func(msg string)
}

func (o Options) warning(format string, args ...any) {
	if o.Warn != nil {
		o.Warn(fmt.Sprintf(format, args...))
	}
}

// ErrBadInput is matched (errors.Is) by every error that is the inputs'
// fault: a directory without a record, a record without a run, shard counts
// that disagree, attempts that conflict, shards missing. Other errors (the
// record could not be opened, read or written) are the machine's.
var ErrBadInput = errors.New("merge: bad input")

type badInputError struct{ err error }

func (e *badInputError) Error() string        { return e.err.Error() }
func (e *badInputError) Unwrap() error        { return e.err }
func (e *badInputError) Is(target error) bool { return target == ErrBadInput }

func badInput(err error) error { return &badInputError{err} }

// missingShardsError is a merge that lacks shard records: which ones, of
// how many, and what they held (it implements ghaction.MissingShards).
type missingShardsError struct {
	msg      string
	missing  []string
	expected int
	held     string
}

func (e *missingShardsError) Error() string { return e.msg }
func (e *missingShardsError) MissingShards() ([]string, int, string) {
	return e.missing, e.expected, e.held
}

// shardRecord is one input's newest run.
type shardRecord struct {
	dir      string
	run      record.Run
	i, n     int
	attempts []record.Attempt
	ramp     []record.RampPoint
	// transcripts by seq, copied into the merged record with their attempts.
	transcripts map[int]copiedTranscript
}

// copiedTranscript is a shard's transcript on its way into the merged record.
type copiedTranscript struct {
	info record.TranscriptInfo
	blob []byte
}

func readShardRecord(ctx context.Context, in string) (*shardRecord, error) {
	dir := in
	if filepath.Base(in) == record.FileName {
		dir = filepath.Dir(in)
	}
	if _, err := os.Stat(filepath.Join(dir, record.FileName)); err != nil {
		return nil, badInput(fmt.Errorf("merge: %s holds no record (%s): %w", in, record.FileName, err))
	}
	src, err := record.OpenReadOnly(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	runs, err := src.Runs(ctx)
	if err != nil || len(runs) == 0 {
		return nil, badInput(fmt.Errorf("merge: the record %s holds no run", dir))
	}
	sr := &shardRecord{dir: dir, run: runs[0]}
	if sr.run.Shard != "" {
		if sr.i, sr.n, err = shard.Parse(sr.run.Shard); err != nil {
			return nil, badInput(fmt.Errorf("merge: %s: run %s has shard %q: %w", dir, sr.run.ID, sr.run.Shard, err))
		}
	}
	if sr.attempts, err = src.Attempts(ctx, sr.run.ID); err != nil {
		return nil, err
	}
	sr.transcripts = map[int]copiedTranscript{}
	for _, a := range sr.attempts {
		info, blob, err := src.TranscriptOf(ctx, a)
		if err != nil {
			return nil, err
		}
		if blob != nil {
			sr.transcripts[a.Seq] = copiedTranscript{info, blob}
		}
	}
	if sr.ramp, err = src.Ramp(ctx, sr.run.ID); err != nil {
		return nil, err
	}
	return sr, nil
}

func sameOutcome(a, b record.Attempt) bool {
	return a.Status == b.Status && a.Fingerprint == b.Fingerprint && a.Answer == b.Answer
}

// Merge combines the newest run of each shard record in inputs (record
// directories or their record.sqlite) into one run in the record at out and
// returns its report. Rows come out in the whole eval set's discovery order
// (by seq). The same run given twice counts once; a record whose newest run
// is not a shard run, among shard runs, is left out with a warning; two
// runs that disagree on an attempt, shard counts that disagree and missing
// shards are errors (ErrBadInput; a missing shard's error also implements
// ghaction.MissingShards).
func Merge(ctx context.Context, out string, inputs []string, o Options) (*report.Report, error) {
	var recs []*shardRecord
	seenRun := map[string]string{}
	for _, in := range inputs {
		sr, err := readShardRecord(ctx, in)
		if err != nil {
			return nil, err
		}
		if prev, dup := seenRun[sr.run.ID]; dup {
			// The same run twice (an artifact downloaded twice): it counts once.
			o.warning("%s holds run %s, already read from %s: counted once", sr.dir, sr.run.ID, prev)
			continue
		}
		seenRun[sr.run.ID] = sr.dir
		recs = append(recs, sr)
	}
	sharded := false
	for _, sr := range recs {
		sharded = sharded || sr.n > 0
	}
	// Shard count: the flag, else the records' n, which must agree.
	n := o.Shards
	var nFrom []string
	for _, sr := range recs {
		if sr.n == 0 {
			continue
		}
		if n == 0 {
			n = sr.n
		}
		if sr.n != n {
			nFrom = append(nFrom, fmt.Sprintf("%s ran %s", sr.dir, sr.run.Shard))
		}
	}
	if len(nFrom) > 0 {
		how := "the first record's"
		if o.Shards > 0 {
			how = "--shards"
		}
		return nil, badInput(fmt.Errorf("merge: %d shards expected (%s), but %s", n, how, strings.Join(nFrom, "; ")))
	}
	var kept []*shardRecord
	for _, sr := range recs {
		if sr.n == 0 && (sharded || o.Shards > 0) {
			// A whole (unsharded) run among shard runs: a record restored
			// from the cache into a shard job that failed before it ran.
			o.warning("%s is left out: its newest run %s (%s) is not a shard run (a record restored from the cache into a shard job that never ran?)",
				sr.dir, sr.run.ID, sr.run.Started.UTC().Format(time.RFC3339))
			continue
		}
		kept = append(kept, sr)
	}
	recs = kept
	if len(recs) == 0 {
		return nil, badInput(errors.New("merge: no shard run in the records given"))
	}

	// Attempts by seq: the same attempt from two runs collapses when they
	// agree and is a conflict when they do not.
	bySeq := map[int]record.Attempt{}
	transcripts := map[int]copiedTranscript{}
	from := map[int]string{}
	var conflicts []string
	for _, sr := range recs {
		for _, a := range sr.attempts {
			prev, dup := bySeq[a.Seq]
			if !dup {
				bySeq[a.Seq] = a
				from[a.Seq] = sr.dir
				if t, ok := sr.transcripts[a.Seq]; ok {
					transcripts[a.Seq] = t
				}
				continue
			}
			if !sameOutcome(prev, a) {
				conflicts = append(conflicts, fmt.Sprintf("%s/%s#%d: %s in %s, %s in %s", a.Task, a.Sample, a.Attempt, prev.Status, from[a.Seq], a.Status, sr.dir))
			}
		}
	}
	if total := len(conflicts); total > 0 {
		sort.Strings(conflicts)
		more := ""
		if total > 20 {
			more = fmt.Sprintf("\n… and %d more", total-20)
			conflicts = conflicts[:20]
		}
		return nil, badInput(fmt.Errorf("merge: %d attempts disagree between records (were they run from the same eval set?):\n%s%s",
			total, strings.Join(conflicts, "\n"), more))
	}
	if n > 0 {
		have := map[int]bool{}
		for _, sr := range recs {
			have[sr.i] = true
		}
		var missing []string
		for i := 1; i <= n; i++ {
			if !have[i] {
				missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			}
		}
		if len(missing) > 0 {
			how := "from the records' i/n"
			if o.Shards > 0 {
				how = "from --shards"
			}
			msg := fmt.Sprintf("merge: %d shards expected (%s), %d missing: %s (did their jobs fail before uploading a record?)",
				n, how, len(missing), strings.Join(missing, ", "))
			held := unmergedAttempts(o, bySeq)
			if held != "" {
				msg += "\nthey held: " + held
			} else if o.EvalSet == "" {
				msg += "\n(pass --eval-set to name the tasks they held)"
			}
			return nil, badInput(&missingShardsError{msg: msg, missing: missing, expected: n, held: held})
		}
	}

	dst, err := record.Open(ctx, out)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	id := "merge-" + time.Now().UTC().Format("20060102-150405-") + record.NewID("")[:6]
	merged := recs[0].run
	var shards []string
	var ramp []record.RampPoint
	for _, sr := range recs {
		r := sr.run
		if r.Shard != "" {
			shards = append(shards, r.Shard)
		}
		if r.Started.Before(merged.Started) {
			merged.Started = r.Started
		}
		if r.Finished.After(merged.Finished) {
			merged.Finished = r.Finished
		}
		if r.Status != status.Finished {
			merged.Status = r.Status
		}
		ramp = append(ramp, sr.ramp...)
	}
	var rows []record.Attempt
	for _, a := range bySeq {
		rows = append(rows, a)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	merged.ID = id
	merged.Shard = ""
	merged.Title = o.Title
	merged.Plan = fmt.Sprintf("merged %d shard records (%s)", len(recs), strings.Join(shards, ", "))
	if err := dst.StartRun(ctx, merged); err != nil {
		return nil, err
	}
	for _, a := range rows {
		a.RunID = id
		if err := dst.Publish(ctx, a); err != nil {
			return nil, err
		}
		if t, ok := transcripts[a.Seq]; ok {
			if err := dst.PutTranscript(ctx, id, a.Seq, t.info, t.blob); err != nil {
				return nil, err
			}
		}
	}
	if err := dst.AddRamp(ctx, id, ramp); err != nil {
		return nil, err
	}
	st := merged.Status
	if st == "" || st == status.Running {
		st = status.Finished
	}
	if err := dst.FinishRun(ctx, id, st, merged.Finished, nil); err != nil {
		return nil, err
	}
	rep, err := report.FromRecord(ctx, dst, []string{id}, o.Title)
	if err != nil {
		return nil, err
	}
	if err := report.LoadTranscripts(ctx, dst, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// unmergedAttempts names, from the eval set's plan, the attempts no record
// holds: "arithmetic: add, mul (4 attempts); files: shout-1 (1 attempt)".
// "" when the eval set is not given or does not load.
func unmergedAttempts(o Options, have map[int]record.Attempt) string {
	if o.EvalSet == "" {
		return ""
	}
	if _, err := os.Stat(o.EvalSet); err != nil {
		return ""
	}
	es, err := evalset.Load(o.EvalSet, evalset.LoadOptions{Getenv: o.Getenv})
	if err != nil {
		return ""
	}
	p, err := plan.Build(es, plan.Options{})
	if err != nil {
		return ""
	}
	type agg struct {
		samples  []string
		attempts int
	}
	var order []string
	per := map[string]*agg{}
	for _, a := range p.Attempts {
		if _, ok := have[a.Seq]; ok {
			continue
		}
		task := p.Tasks[a.Task].Task.Name
		g := per[task]
		if g == nil {
			g = &agg{}
			per[task] = g
			order = append(order, task)
		}
		g.attempts++
		if len(g.samples) == 0 || g.samples[len(g.samples)-1] != a.Sample.ID {
			g.samples = append(g.samples, a.Sample.ID)
		}
	}
	var parts []string
	for _, task := range order {
		g := per[task]
		names := g.samples
		if len(names) > 10 {
			names = append(names[:10:10], fmt.Sprintf("… %d more", len(g.samples)-10))
		}
		unit := "attempts"
		if g.attempts == 1 {
			unit = "attempt"
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%d %s)", task, strings.Join(names, ", "), g.attempts, unit))
	}
	return strings.Join(parts, "; ")
}
