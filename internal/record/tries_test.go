package record

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// An attempt's tries, their reasons and the agent's exit beside a verdict
// are kept, read through a carry too; a row without them reads as one try.
func TestTriesKept(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1000, 0)
	for _, id := range []string{"r1", "r2"} {
		if err := db.StartRun(ctx, Run{ID: id, EvalSet: "e", Started: now}); err != nil {
			t.Fatal(err)
		}
	}
	want := Attempt{RunID: "r1", Seq: 0, Task: "t", Sample: "s", Attempt: 1, Status: status.Failed, Fingerprint: "fp", Finished: now,
		Tries: 3, RetryReasons: []string{"create sandbox: daemon hung", "copy sample files: EOF"}, AgentExit: 1, AgentOutput: "stderr: 2 tests failed"}
	if err := db.Publish(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := db.Publish(ctx, Attempt{RunID: "r1", Seq: 1, Task: "t", Sample: "u", Attempt: 1, Status: status.Passed, Fingerprint: "fp2", Finished: now}); err != nil {
		t.Fatal(err)
	}
	if err := db.PublishCarried(ctx, []Ref{{RunID: "r2", Seq: 0, SrcRun: "r1", SrcSeq: 0}}); err != nil {
		t.Fatal(err)
	}
	as, err := db.Attempts(ctx, "r1")
	if err != nil || len(as) != 2 {
		t.Fatalf("%+v %v", as, err)
	}
	if got := as[0]; got.Tries != 3 || !reflect.DeepEqual(got.RetryReasons, want.RetryReasons) || got.AgentExit != 1 || got.AgentOutput != want.AgentOutput {
		t.Fatalf("read back %+v", got)
	}
	if as[1].Tries != 1 || as[1].RetryReasons != nil || as[1].AgentExit != 0 {
		t.Fatalf("a row published without tries reads %+v, want one try", as[1])
	}
	cs, err := db.Attempts(ctx, "r2")
	if err != nil || len(cs) != 1 || cs[0].Tries != 3 || cs[0].AgentExit != 1 || cs[0].CarriedFrom != "r1" {
		t.Fatalf("carried %+v %v", cs, err)
	}
}

// A record from before the tries columns is read by a reader (one try
// each) and migrated by a writer.
func TestTriesOlderRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	v := 0
	for i, m := range migrations {
		if m == migrationTries {
			v = i
		}
	}
	qs := append(append([]string{}, migrations[:v]...),
		`PRAGMA user_version = `+strconv.Itoa(v),
		`INSERT INTO runs(id, evalset, status, started_at) VALUES('r1','e','finished',1)`,
		`INSERT INTO attempts(run_id, seq, task, sample, attempt, status, fingerprint, finished_at) VALUES('r1', 0, 't', 's', 1, 'passed', 'fp', 10)`)
	for _, q := range qs {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	ro, err := OpenReadOnly(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	as, err := ro.Attempts(ctx, "r1")
	ro.Close()
	if err != nil || len(as) != 1 || as[0].Tries != 1 {
		t.Fatalf("an older record read: %+v %v", as, err)
	}
	w, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	as, err = w.Attempts(ctx, "r1")
	if err != nil || len(as) != 1 || as[0].Tries != 1 {
		t.Fatalf("a migrated record read: %+v %v", as, err)
	}
}
