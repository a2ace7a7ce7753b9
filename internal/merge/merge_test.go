package merge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

// shardRun is one shard job's record: its run and the attempts it
// published, as (seq, status) pairs.
type shardRun struct {
	id, shard string
	seqs      []int
	fail      map[int]bool // seqs published failed instead of passed
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// writeShard writes s into a fresh record directory under dir and returns it.
func writeShard(t *testing.T, dir string, s shardRun) string {
	t.Helper()
	ctx := context.Background()
	out := filepath.Join(dir, s.id)
	db, err := record.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.StartRun(ctx, record.Run{ID: s.id, EvalSet: "steward.yaml", Shard: s.shard, Started: t0}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range s.seqs {
		st := status.Passed
		if s.fail[seq] {
			st = status.Failed
		}
		a := record.Attempt{RunID: s.id, Seq: seq, Task: "t", Sample: fmt.Sprintf("s%d", seq), Attempt: 1, Status: st,
			Fingerprint: fmt.Sprintf("fp%d", seq), Finished: t0.Add(time.Minute)}
		if err := db.Publish(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := db.PutTranscript(ctx, s.id, seq, record.TranscriptInfo{Calls: seq + 1}, []byte(fmt.Sprintf("blob %d", seq))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(ctx, s.id, status.Finished, t0.Add(2*time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	return out
}

// warnings collects a merge's warnings.
func warnings(into *[]string) func(string) { return func(m string) { *into = append(*into, m) } }

// The shards' rows come out in seq order (the whole eval set's discovery
// order), once each, with their transcripts, in one finished run.
func TestMergeCombinesShardsInDiscoveryOrder(t *testing.T) {
	dir := t.TempDir()
	a := writeShard(t, dir, shardRun{id: "a", shard: "1/2", seqs: []int{0, 2, 4}, fail: map[int]bool{2: true}})
	b := writeShard(t, dir, shardRun{id: "b", shard: "2/2", seqs: []int{1, 3}})
	out := filepath.Join(dir, "merged")
	var warned []string
	rep, err := Merge(context.Background(), out, []string{b, filepath.Join(a, record.FileName)}, Options{Title: "nightly", Warn: warnings(&warned)})
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) > 0 {
		t.Errorf("warnings %q, want none", warned)
	}
	var got []string
	for _, r := range rep.Attempts {
		got = append(got, r.Sample+":"+string(r.Status))
	}
	want := []string{"s0:passed", "s1:passed", "s2:failed", "s3:passed", "s4:passed"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merged rows %v, want %v", got, want)
	}
	if rep.Counts.Failed != 1 || rep.Counts.Passed != 4 {
		t.Errorf("counts %+v, want 4 passed and 1 failed", rep.Counts)
	}

	ctx := context.Background()
	db, err := record.OpenReadOnly(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("merged record runs %v, %v: want one", runs, err)
	}
	r := runs[0]
	if !strings.HasPrefix(r.ID, "merge-") || r.Shard != "" || r.Title != "nightly" || r.Status != status.Finished ||
		r.Plan != "merged 2 shard records (2/2, 1/2)" || !r.Started.Equal(t0) || !r.Finished.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("merged run %+v", r)
	}
	as, err := db.Attempts(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range as {
		info, blob, err := db.TranscriptOf(ctx, x)
		if err != nil || string(blob) != fmt.Sprintf("blob %d", x.Seq) || info.Calls != x.Seq+1 {
			t.Errorf("seq %d: transcript %+v %q %v, want the shard's", x.Seq, info, blob, err)
		}
	}
}

// missingShards is ghaction.MissingShards, which the action reads the
// merge's error through.
type missingShards interface {
	MissingShards() ([]string, int, string)
}

func TestMergeNamesMissingShards(t *testing.T) {
	dir := t.TempDir()
	a := writeShard(t, dir, shardRun{id: "a", shard: "1/3", seqs: []int{0}})
	c := writeShard(t, dir, shardRun{id: "c", shard: "3/3", seqs: []int{2}})
	_, err := Merge(context.Background(), filepath.Join(dir, "m"), []string{a, c}, Options{})
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("err %v, want bad input", err)
	}
	var ms missingShards
	if !errors.As(err, &ms) {
		t.Fatalf("err %v does not name its missing shards", err)
	}
	if missing, n, held := ms.MissingShards(); !reflect.DeepEqual(missing, []string{"2/3"}) || n != 3 || held != "" {
		t.Errorf("missing %v of %d (held %q), want [2/3] of 3", missing, n, held)
	}
	if want := "3 shards expected (from the records' i/n), 1 missing: 2/3"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pass --eval-set") {
		t.Errorf("err %q, want %q and the --eval-set hint", err, want)
	}
	// --shards asks for more than the records' n.
	_, err = Merge(context.Background(), filepath.Join(dir, "m2"), []string{a, c}, Options{Shards: 4})
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "4 shards expected (--shards)") {
		t.Errorf("--shards 4: err %v", err)
	}
}

// Bad inputs are refused as such and write nothing.
func TestMergeRefusesBadInputs(t *testing.T) {
	dir := t.TempDir()
	a := writeShard(t, dir, shardRun{id: "a", shard: "1/2", seqs: []int{0, 1}})
	b3 := writeShard(t, dir, shardRun{id: "b3", shard: "2/3", seqs: []int{2}})
	other := writeShard(t, dir, shardRun{id: "other", shard: "2/2", seqs: []int{1}, fail: map[int]bool{1: true}})
	for _, tc := range []struct {
		name   string
		inputs []string
		want   string
	}{
		{"no record", []string{filepath.Join(dir, "nothing")}, "holds no record"},
		{"counts disagree", []string{a, b3}, "2 shards expected (the first record's), but " + b3 + " ran 2/3"},
		{"attempts disagree", []string{a, other}, "1 attempts disagree between records"},
	} {
		out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
		_, err := Merge(context.Background(), out, tc.inputs, Options{})
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want bad input saying %q", tc.name, err, tc.want)
		}
		if n := record.SizeOf(out); n != 0 {
			t.Errorf("%s: the refused merge wrote %d bytes at %s", tc.name, n, out)
		}
	}
}

// The same run given twice counts once; a record whose newest run is no
// shard run (a cache restored into a shard job that never ran) is left
// out; each says so in a warning.
func TestMergeWarnsAndGoesOn(t *testing.T) {
	dir := t.TempDir()
	a := writeShard(t, dir, shardRun{id: "a", shard: "1/2", seqs: []int{0}})
	b := writeShard(t, dir, shardRun{id: "b", shard: "2/2", seqs: []int{1}})
	whole := writeShard(t, dir, shardRun{id: "whole", seqs: []int{0, 1}, fail: map[int]bool{0: true}})
	var warned []string
	rep, err := Merge(context.Background(), filepath.Join(dir, "m"), []string{a, whole, b, a}, Options{Warn: warnings(&warned)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != 2 || rep.Counts.Passed != 2 {
		t.Errorf("merged %d attempts, counts %+v: want the two shards' passes", len(rep.Attempts), rep.Counts)
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "already read from "+a+": counted once") || !strings.Contains(warned[1], whole+" is left out") {
		t.Errorf("warnings %q", warned)
	}
	// Without Warn the warnings are dropped, not a panic.
	if _, err := Merge(context.Background(), filepath.Join(dir, "m2"), []string{a, b, b}, Options{}); err != nil {
		t.Fatal(err)
	}
}
