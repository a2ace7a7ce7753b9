package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/record"
)

// confirmSet: a model-only task on the mock model (two attempts a sample)
// and a tool task whose agent fails every even attempt (a flaky sample by
// design), both on local sandboxes, run with workers (W1).
const confirmSet = `
name: confirm
model:
  upstream: mock
  name: mock-1
tasks:
  - name: arithmetic
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    attempts: 2
    samples:
      - {id: add, input: "What is 17+25?", target: "42"}
      - {id: mul, input: "What is 12*(3+4)?", target: "84"}
  - name: files
    sandbox: {provider: local}
    exclusive: false
    agent: 'if [ $((STEWARD_ATTEMPT % 2)) = 0 ]; then echo no; else echo "$STEWARD_INPUT"; fi'
    scorer: {match: exact}
    samples:
      - {id: shout-1, input: "HELLO", target: "HELLO"}
      - {id: shout-2, input: "CI", target: "CI"}
`

// attemptsOf lists the newest run's attempts as "task/sample#n ran|carried".
func attemptsOf(t *testing.T, rec string) []string {
	t.Helper()
	ctx := context.Background()
	db, err := record.OpenReadOnly(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	as, err := db.Attempts(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		how := "ran"
		if a.CarriedFrom != "" {
			how = "carried"
		}
		out = append(out, fmt.Sprintf("%s/%s#%d %s", a.Task, a.Sample, a.Attempt, how))
	}
	return out
}

// A nightly `launch --confirm 2` adds two new attempts of each selected
// sample every night, numbered after the highest the record holds at the
// sample's identity: the second night runs #5 and #6 of add (not #3 and #4
// again, which would carry), carries the planned attempts, and `steward
// flaky` then counts every own attempt of the flaky sample.
func TestLaunchConfirmAddsNewAttemptsEachNight(t *testing.T) {
	t.Parallel()
	dir, rec := t.TempDir(), t.TempDir()
	set := filepath.Join(dir, "steward.yaml")
	writeFile(t, set, confirmSet)
	out, code := steward(t, dir, "launch", "--record", rec, set)
	if code != 0 || !strings.Contains(out, "6 total · 0 reused") {
		t.Fatalf("first launch exit %d:\n%s", code, out)
	}
	planned := []string{"arithmetic/add#1 carried", "arithmetic/add#2 carried", "arithmetic/mul#1 carried", "arithmetic/mul#2 carried", "files/shout-1#1 carried", "files/shout-2#1 carried"}
	nights := [][]string{
		{"arithmetic/add#3 ran", "arithmetic/add#4 ran", "files/shout-1#2 ran", "files/shout-1#3 ran"},
		{"arithmetic/add#5 ran", "arithmetic/add#6 ran", "files/shout-1#4 ran", "files/shout-1#5 ran"},
	}
	for night, extras := range nights {
		out, code := steward(t, dir, "launch", "--record", rec, "--confirm", "2", "--confirm-samples", "arithmetic/add", "--confirm-samples", "files/shout-1", set)
		if code != 1 || !strings.Contains(out, "4 confirming") || !strings.Contains(out, "10 total · 6 reused") {
			t.Fatalf("night %d: exit %d:\n%s", night+1, code, out)
		}
		want := append(append([]string{}, planned...), extras...)
		sort.Strings(want)
		got := attemptsOf(t, rec)
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("night %d's attempts:\n%s\nwant\n%s", night+1, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// Every own attempt counts once, carried copies never: shout-1 ran
	// #1..#5 (odd ones pass), add ran #1..#6 (all pass).
	out, code = stewardJSON(t, dir, "flaky", "--record", rec, "--all", "--json")
	if code != 0 {
		t.Fatalf("flaky exit %d:\n%s", code, out)
	}
	var rep struct {
		Samples []struct {
			Task, Sample         string
			Flaky                bool
			Passed, Failed, Runs int
			MaxAttempt           int `json:"max_attempt"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("flaky --json: %v\n%s", err, out)
	}
	var rows []string
	for _, r := range rep.Samples {
		rows = append(rows, fmt.Sprintf("%s/%s flaky=%v %d/%d runs %d max #%d", r.Task, r.Sample, r.Flaky, r.Passed, r.Passed+r.Failed, r.Runs, r.MaxAttempt))
	}
	want := []string{
		"arithmetic/add flaky=false 6/6 runs 3 max #6",
		"arithmetic/mul flaky=false 2/2 runs 1 max #2",
		"files/shout-1 flaky=true 3/5 runs 3 max #5",
		"files/shout-2 flaky=false 1/1 runs 1 max #1",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("flaky --all:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}

	// Bad input: exit 2 naming the flag, nothing run.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--confirm", "2", "--confirm-samples", "files/nope"}, "--confirm-samples files/nope: the plan holds no sample nope of task files"},
		{[]string{"--confirm", "2", "--confirm-samples", "add"}, `--confirm-samples "add": want task/sample`},
		{[]string{"--confirm", "-1"}, "--confirm must not be negative"},
		{[]string{"--confirm-samples", "files/shout-1"}, "say how many more attempts with --confirm N"},
		{[]string{"--confirm", "1", "--early-exit"}, "--confirm 1 with --early-exit"},
	} {
		args := append(append([]string{"launch", "--record", rec}, c.args...), set)
		out, code := steward(t, dir, args...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("steward %v: exit %d, want 2 and %q:\n%s", c.args, code, c.want, out)
		}
	}
}
