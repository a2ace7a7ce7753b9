package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
)

// shardEvalSet has group lanes, two tasks sharing a lease key, attempts > 1
// and every kind of outcome (passed, failed, errored), on the local provider.
const shardEvalSet = `
name: shard-e2e
tasks:
  - name: grouped
    sandbox: {provider: local}
    exclusive: false
    sandbox_reuse: true
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: g1a, input: ok, target: ok}
      - {id: g1b, input: ok, target: ok}
      - {id: g1c, input: no, target: ok}
      - {id: g2a, input: ok, target: ok}
      - {id: g2b, input: ok, target: ok}
      - {id: free1, input: ok, target: ok}
      - {id: free2, input: no, target: ok}
      - {id: free3, input: ok, target: ok}
    groups:
      - {name: lane-one, samples: [g1a, g1b, g1c]}
      - {name: lane-two, samples: [g2a, g2b]}
  - name: db-writer
    sandbox: {provider: local}
    exclusive: false
    shared_state: {key: cohort-db}
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: w1, input: ok, target: ok}
      - {id: w2, input: no, target: ok}
  - name: db-reader
    sandbox: {provider: local}
    exclusive: false
    shared_state: {key: cohort-db}
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: r1, input: ok, target: ok}
  - name: epochs
    sandbox: {provider: local}
    exclusive: false
    attempts: 2
    agent: 'if [ "$STEWARD_INPUT" = boom ]; then exit 3; fi; echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: e1, input: ok, target: ok}
      - {id: e2, input: boom, target: ok}
      - {id: e3, input: ok, target: ok}
      - {id: e4, input: no, target: ok}
      - {id: e5, input: ok, target: ok}
      - {id: e6, input: ok, target: ok}
`

type shardRow struct {
	Task    string   `json:"task"`
	Sample  string   `json:"sample"`
	Attempt int      `json:"attempt"`
	Status  string   `json:"status"`
	Score   *float64 `json:"score"`
}

func (r shardRow) key() string { return fmt.Sprintf("%s/%s#%d", r.Task, r.Sample, r.Attempt) }

func (r shardRow) String() string {
	s := "nil"
	if r.Score != nil {
		s = fmt.Sprint(*r.Score)
	}
	return fmt.Sprintf("%s %s score=%s", r.key(), r.Status, s)
}

func reportRows(t *testing.T, out string) []shardRow {
	t.Helper()
	var rep struct {
		Attempts []shardRow `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out)
	}
	return rep.Attempts
}

// binding names what must never be split: a group lane or a lease key.
func binding(r shardRow) string {
	switch {
	case r.Task == "db-writer" || r.Task == "db-reader":
		return "lease:cohort-db"
	case r.Task == "grouped" && strings.HasPrefix(r.Sample, "g1"):
		return "lane-one"
	case r.Task == "grouped" && strings.HasPrefix(r.Sample, "g2"):
		return "lane-two"
	}
	return ""
}

// --shard i/n over n = 1..8: every attempt lands in exactly one shard, group
// lanes and tasks sharing a lease key never split, a sample's attempts stay
// together, and merging the shard records gives one unsharded run's results
// row for row, in the same order.
func TestShardAndMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	es := filepath.Join(dir, "steward.yaml")
	writeFile(t, es, shardEvalSet)

	out, code := stewardJSON(t, dir, "launch", "--record", filepath.Join(dir, "whole"), "--json", es)
	if code != 1 {
		t.Fatalf("unsharded run exit %d (want 1: some fail):\n%s", code, out)
	}
	whole := reportRows(t, out)
	if len(whole) != 8+2+1+12 {
		t.Fatalf("unsharded run has %d rows, want 23:\n%v", len(whole), whole)
	}
	statuses := map[string]int{}
	for _, r := range whole {
		statuses[r.Status]++
	}
	if statuses["passed"] == 0 || statuses["failed"] == 0 || statuses["errored"] == 0 {
		t.Fatalf("the eval set should pass, fail and error: %v", statuses)
	}

	for n := 1; n <= 8; n++ {
		where := map[string]int{}    // attempt key -> shard
		bound := map[string]int{}    // binding -> shard
		sampleAt := map[string]int{} // task/sample -> shard
		var recs []string
		nonEmpty := 0
		for i := 1; i <= n; i++ {
			rec := filepath.Join(dir, fmt.Sprintf("n%d", n), fmt.Sprintf("shard-%d", i))
			recs = append(recs, rec)
			out, code := stewardJSON(t, dir, "launch", "--shard", fmt.Sprintf("%d/%d", i, n), "--record", rec, "--json", es)
			if code != 0 && code != 1 {
				t.Fatalf("shard %d/%d exit %d:\n%s", i, n, code, out)
			}
			rows := reportRows(t, out)
			if len(rows) > 0 {
				nonEmpty++
			}
			for _, r := range rows {
				if prev, dup := where[r.key()]; dup {
					t.Fatalf("n=%d: %s is in shards %d and %d", n, r.key(), prev, i)
				}
				where[r.key()] = i
				sk := r.Task + "/" + r.Sample
				if prev, ok := sampleAt[sk]; ok && prev != i {
					t.Fatalf("n=%d: sample %s split across shards %d and %d", n, sk, prev, i)
				}
				sampleAt[sk] = i
				if b := binding(r); b != "" {
					if prev, ok := bound[b]; ok && prev != i {
						t.Fatalf("n=%d: %s split across shards %d and %d", n, b, prev, i)
					}
					bound[b] = i
				}
			}
		}
		if len(where) != len(whole) {
			t.Fatalf("n=%d: the shards hold %d attempts, the eval set %d", n, len(where), len(whole))
		}
		for _, r := range whole {
			if _, ok := where[r.key()]; !ok {
				t.Fatalf("n=%d: %s is in no shard", n, r.key())
			}
		}
		// 13 units of work (3 bound): with n ≤ 8 shards every shard gets some.
		if nonEmpty != n {
			t.Errorf("n=%d: only %d shards got work", n, nonEmpty)
		}

		merged := filepath.Join(dir, fmt.Sprintf("n%d", n), "merged")
		out, code := stewardJSON(t, dir, append([]string{"merge", "--out", merged, "--format", "json"}, recs...)...)
		if code != 1 {
			t.Fatalf("n=%d: merge exit %d:\n%s", n, code, out)
		}
		got := reportRows(t, out)
		if !reflect.DeepEqual(rowStrings(got), rowStrings(whole)) {
			t.Fatalf("n=%d: merged rows differ from the unsharded run:\nmerged:\n%s\nunsharded:\n%s",
				n, strings.Join(rowStrings(got), "\n"), strings.Join(rowStrings(whole), "\n"))
		}
	}

	// The action's merge mode (the matrix's final job) merges the shard
	// records named by a glob and posts the one sticky comment.
	gh := fakegithub.New(t)
	gh.AddToken("ghs_writeToken1234", "github-actions[bot]", true)
	gh.AddPullRequest("octo", "evals", 17)
	g := newGHEnv(t, dir, gh.URL, 17)
	g.vars["INPUT_GITHUB-TOKEN"] = "ghs_writeToken1234"
	g.vars["INPUT_MODE"] = "merge"
	g.vars["INPUT_RECORDS"] = "n4/shard-*"
	g.vars["INPUT_RECORD"] = "action-merged"
	out, code = g.run(t)
	if code != 1 {
		t.Fatalf("action merge exit %d:\n%s", code, out)
	}
	outs := readOutputs(t, g.output)
	if outs["total"] != "23" || outs["comment-url"] == "" {
		t.Fatalf("action merge outputs %v\n%s", outs, out)
	}
	if cs := stickyComments(t, gh); len(cs) != 1 || !strings.Contains(cs[0].Body, "free2") {
		t.Fatalf("action merge: comments %+v", cs)
	}
	merged, _ := stewardJSON(t, dir, "report", "--record", filepath.Join(dir, "action-merged"), "--format", "json")
	if got := reportRows(t, merged); !reflect.DeepEqual(rowStrings(got), rowStrings(whole)) {
		t.Fatalf("action merge rows differ from the unsharded run:\n%s", strings.Join(rowStrings(got), "\n"))
	}

	// The same shard given twice counts once: its slice is still the only
	// one, so the merge names the other as missing.
	rec := filepath.Join(dir, "n2", "shard-1")
	if out, code := steward(t, dir, "merge", "--out", filepath.Join(dir, "dup"), rec, rec); code != 2 || !strings.Contains(out, "counted once") || !strings.Contains(out, "missing: 2/2") {
		t.Fatalf("merging a shard twice: exit %d\n%s", code, out)
	}
}

// A matrix cannot silently lose a shard: the merge knows how many to expect
// (the records' i/n, or --shards), names the missing slices and, given the
// eval set, the tasks and samples they held; a record restored from the
// cache into a shard job that never ran is left out, not merged as a shard;
// the same run twice counts once; two runs that disagree are reported by
// task and sample.
func TestMergeKnowsItsShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	es := filepath.Join(dir, "steward.yaml")
	writeFile(t, es, shardEvalSet)
	recs := map[int]string{}
	held := map[int][]shardRow{}
	for i := 1; i <= 3; i++ {
		recs[i] = filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		out, code := stewardJSON(t, dir, "launch", "--shard", fmt.Sprintf("%d/3", i), "--record", recs[i], "--json", es)
		if code > 1 {
			t.Fatalf("shard %d: exit %d\n%s", i, code, out)
		}
		held[i] = reportRows(t, out)
	}
	merge := func(args ...string) (string, int) {
		return steward(t, dir, append([]string{"merge", "--out", filepath.Join(dir, "m-"+randHex(3)), "--format", "json"}, args...)...)
	}

	// Shard 2 lost: named, with what it held.
	out, code := merge("--eval-set", es, recs[1], recs[3])
	if code != 2 || !strings.Contains(out, "3 shards expected (from the records' i/n), 1 missing: 2/3") {
		t.Fatalf("a lost shard: exit %d\n%s", code, out)
	}
	for _, r := range held[2] {
		if !strings.Contains(out, r.Task+":") || !strings.Contains(out, r.Sample) {
			t.Errorf("the message does not name %s/%s, which shard 2 held:\n%s", r.Task, r.Sample, out)
		}
	}
	// Without the eval set it still names the slice; --shards overrides.
	if out, code := merge(recs[1], recs[2], recs[3], "--shards", "3"); code > 1 {
		t.Fatalf("all three with --shards 3: exit %d\n%s", code, out)
	}
	if out, code := merge(recs[1], recs[2], recs[3], "--shards", "4"); code != 2 || !strings.Contains(out, "4 shards expected (--shards)") {
		t.Fatalf("--shards 4 with 3/3 records: exit %d\n%s", code, out)
	}

	// A record restored from the cache (its newest run is the last merge,
	// not a shard run) into shard 2's job, which failed before running.
	whole := filepath.Join(dir, "merged")
	if out, code := steward(t, dir, "merge", "--out", whole, recs[1], recs[2], recs[3]); code > 1 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}
	out, code = merge(recs[1], whole, recs[3])
	if code != 2 || !strings.Contains(out, "is left out") || !strings.Contains(out, "missing: 2/3") {
		t.Fatalf("a restored cache among shards: exit %d\n%s", code, out)
	}

	// The same run twice collapses; the result equals the plain merge.
	out, code = merge(recs[1], recs[2], recs[2], recs[3])
	if code > 1 || !strings.Contains(out, "counted once") {
		t.Fatalf("a shard twice: exit %d\n%s", code, out)
	}
	var n int
	for _, rows := range held {
		n += len(rows)
	}
	// The report's JSON (after any warnings): its attempt rows, not every
	// "sample" key (an attempt's details name its sample too).
	var merged struct {
		Attempts []json.RawMessage `json:"attempts"`
	}
	if i := strings.Index(out, "{\n"); i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&merged) != nil {
		t.Fatalf("merge printed no JSON report:\n%s", out)
	}
	if got := len(merged.Attempts); got != n {
		t.Errorf("merged %d attempts, the shards ran %d", got, n)
	}

	// Two runs of one slice that disagree (the second ran after a sample of
	// that slice changed): reported by task and sample.
	victim := held[2][0]
	other := filepath.Join(dir, "shard-2-again")
	var changed []string
	for _, line := range strings.Split(shardEvalSet, "\n") {
		if strings.Contains(line, "{id: "+victim.Sample+",") {
			line = strings.Replace(line, "target: ok", "target: nope", 1)
		}
		changed = append(changed, line)
	}
	writeFile(t, es, strings.Join(changed, "\n"))
	if out, code := stewardJSON(t, dir, "launch", "--shard", "2/3", "--record", other, "--json", es); code > 1 {
		t.Fatalf("shard 2 again: exit %d\n%s", code, out)
	}
	writeFile(t, es, shardEvalSet)
	out, code = merge(recs[1], recs[2], other, recs[3])
	want := fmt.Sprintf("%s/%s#1: %s in %s", victim.Task, victim.Sample, victim.Status, recs[2])
	if code != 2 || !strings.Contains(out, "disagree") || !strings.Contains(out, want) {
		t.Fatalf("disagreeing runs: exit %d, want %q\n%s", code, want, out)
	}
	for _, r := range held[2] {
		if r.Sample != victim.Sample && strings.Contains(out, "/"+r.Sample+"#") {
			t.Errorf("%s agrees in both runs but is reported:\n%s", r.Sample, out)
		}
	}
}

func rowStrings(rows []shardRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.String())
	}
	return out
}

// stewardJSON runs the binary with stdout (the results) apart from stderr
// (progress); the output it returns is stdout, or both on a failed exit.
func stewardJSON(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code > 1 {
		return stdout.String() + stderr.String(), code
	}
	return stdout.String(), code
}
