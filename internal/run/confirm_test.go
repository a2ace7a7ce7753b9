package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
)

const confirmRunSet = `
tasks:
  - name: t
    sandbox: {provider: local}
    agent: echo a
    attempts: 2
    samples:
      - {id: a, input: "", target: ""}
      - {id: b, input: "", target: ""}
  - name: fast
    sandbox: {provider: local}
    agent: echo b
    early_exit: true
    samples:
      - {id: x, input: "", target: ""}
`

// confirmLoaded is the load stage's value, built by hand: the plan of
// confirmRunSet and the record db.
func confirmLoaded(t *testing.T, o Options, db *record.DB) *loaded {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(p, []byte(confirmRunSet), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := evalset.Load(p, evalset.LoadOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(es, plan.Options{TaskGlobs: o.TaskGlobs})
	if err != nil {
		t.Fatal(err)
	}
	return &loaded{launch: &launch{opts: o, es: es}, p: pl, db: db}
}

// confirm numbers after the record's highest attempt at the sample's
// identity (another definition's rows do not count), keeps the plan's
// seqs in step, and refuses what cannot work with a bad-input error.
func TestChooseConfirm(t *testing.T) {
	ctx := context.Background()
	db, err := record.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := confirmLoaded(t, Options{ConfirmAttempts: 2, ConfirmSamples: []string{"t/a", "t/b"}, TaskGlobs: []string{"t"}}, db)
	if err := db.StartRun(ctx, record.Run{ID: "r1", EvalSet: "e"}); err != nil {
		t.Fatal(err)
	}
	a := l.p.Attempts[0] // t/a#1
	for i, row := range []record.Attempt{
		{Task: "t", Sample: "a", Attempt: 7, Parts: a.PartsJSON()},
		{Task: "t", Sample: "b", Attempt: 9, Parts: `{"sample":"another definition"}`},
	} {
		row.RunID, row.Seq, row.Status, row.Fingerprint = "r1", i, status.Passed, "fp"+row.Sample
		if err := db.Publish(ctx, row); err != nil {
			t.Fatal(err)
		}
	}
	extras, err := l.confirm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range l.p.Attempts {
		got = append(got, a.ID(l.p))
		if l.p.BySeq(a.Seq) != a {
			t.Errorf("seq index: %d is not %s", a.Seq, a.ID(l.p))
		}
	}
	want := []string{"t/a#1", "t/a#2", "t/a#8", "t/a#9", "t/b#1", "t/b#2", "t/b#3", "t/b#4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attempts %v\nwant %v", got, want)
	}
	if len(extras) != 4 {
		t.Errorf("extras %v", extras)
	}

	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ConfirmAttempts: -1}, "--confirm must not be negative"},
		{Options{ConfirmSamples: []string{"t/a"}}, "--confirm-samples t/a: say how many more attempts with --confirm N"},
		{Options{ConfirmAttempts: 1, EarlyExit: true}, "--confirm 1 with --early-exit"},
		{Options{ConfirmAttempts: 1}, "task fast has early_exit: true"},
		{Options{ConfirmAttempts: 1, ConfirmSamples: []string{"t/nope"}}, "--confirm-samples t/nope: the plan holds no sample nope of task t"},
		{Options{ConfirmAttempts: 1, ConfirmSamples: []string{"t"}}, `--confirm-samples "t": want task/sample`},
		{Options{ConfirmAttempts: 1, ConfirmSamples: []string{"fast/x"}, TaskGlobs: []string{"t"}}, "--confirm-samples fast/x: the plan holds no sample x"},
	} {
		l := confirmLoaded(t, c.o, nil)
		_, err := l.confirm(ctx)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("confirm(%+v) = %v, want bad input %q", c.o, err, c.want)
		}
	}
	// Selected samples of the other task only: fast's early exit does not matter.
	l = confirmLoaded(t, Options{ConfirmAttempts: 1, ConfirmSamples: []string{"t/b"}}, nil)
	if extras, err := l.confirm(ctx); err != nil || len(extras) != 1 || extras[0] != (plan.Extra{Task: "t", Sample: "b", Number: 3}) {
		t.Errorf("confirm t/b without a record: %v %v", extras, err)
	}
}
