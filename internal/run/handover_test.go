package run

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
)

// editSet's agent answers with its version and a sample file's content; its
// scorer (a file of its own) passes only the answer of its own version.
const editSet = `
tasks:
  - name: edited
    sandbox: {provider: local}
    exclusive: false
    agent: 'printf "%s-%s" v1 "$(cat data.txt)"'
    scorer: {command: 'sh "$STEWARD_SCORER_DIR/grade.sh"', files: {grade.sh: grade.sh}}
    attempts: 2
    samples:
      - {id: a, input: x, files: {data.txt: data.txt}}
      - {id: b, input: y, files: {data.txt: data.txt}}
`

// The eval set is read once per launch and workers are handed their slice
// of the plan (issue 26 item 3): an edit made once the launch has read the
// eval set (its agent, a scorer's file, a sample's file) never reaches what
// runs, so every result in the record was produced by the definition its
// fingerprint names; launching the edit runs it anew, and reverting carries
// the first launch's results, which are the reverted definition's. On the
// old code each worker read the eval set again and, finding it changed,
// refused to run (the launch failed); before that check, it ran the edit
// under the first definition's fingerprints.
func TestEditDuringLaunchKeepsTheRecordTrue(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", editSet)
	v1 := map[string]string{"steward.yaml": editSet, "grade.sh": `[ "$STEWARD_ANSWER" = v1-d1 ]`, "data.txt": "d1"}
	v2 := map[string]string{"steward.yaml": strings.Replace(editSet, "v1", "v2", 1), "grade.sh": `[ "$STEWARD_ANSWER" = v2-d2 ]`, "data.txt": "d2"}
	put := func(files map[string]string) {
		for name, body := range files {
			write(t, dir, name, body)
		}
	}
	exe := buildSteward(t)
	launch := func(es *evalset.EvalSet) []record.Attempt {
		t.Helper()
		prov := &counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}
		var mu sync.Mutex // Observe runs on the launch's goroutines
		var rows []record.Attempt
		_, err := Launch(context.Background(), Options{EvalSet: es, Providers: factory{prov}, Workers: true, Exe: exe,
			Observe: func(e Event) {
				if e.Attempt != nil {
					mu.Lock()
					rows = append(rows, *e.Attempt)
					mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatalf("launch: %v", err)
		}
		return rows
	}
	load := func() (*evalset.EvalSet, map[int]string) {
		t.Helper()
		es, err := evalset.Load(path, evalset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(es, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		fps := map[int]string{}
		for _, a := range p.Attempts {
			fps[a.Seq] = a.Fingerprint
		}
		return es, fps
	}
	check := func(rows []record.Attempt, fps map[int]string, answer string, carried bool) {
		t.Helper()
		if len(rows) != 4 {
			t.Fatalf("%d rows, want 4", len(rows))
		}
		for _, r := range rows {
			if r.Status != status.Passed || r.Answer != answer || r.Fingerprint != fps[r.Seq] || (r.CarriedFrom != "") != carried {
				t.Errorf("%s#%d: %s %q (%s), fingerprint %s carried from %q; want passed %q, fingerprint %s, carried %v",
					r.Sample, r.Attempt, r.Status, r.Answer, r.Reason, r.Fingerprint, r.CarriedFrom, answer, fps[r.Seq], carried)
			}
		}
	}

	put(v1)
	es1, fps1 := load()
	put(v2) // edited once the launch has read the eval set, before its workers start
	check(launch(es1), fps1, "v1-d1", false)

	es2, fps2 := load()
	for seq, fp := range fps2 {
		if fp == fps1[seq] {
			t.Fatalf("attempt %d: the edit left its fingerprint as it was", seq)
		}
	}
	check(launch(es2), fps2, "v2-d2", false)

	put(v1) // reverted: the first launch's results are carried, and they are v1's
	es3, fps3 := load()
	check(launch(es3), fps1, "v1-d1", true)
	for seq, fp := range fps3 {
		if fp != fps1[seq] {
			t.Fatalf("attempt %d: the revert's fingerprint %s is not the first launch's %s", seq, fp, fps1[seq])
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
