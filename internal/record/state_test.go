package record

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func openNew(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The ramp history comes back per run, in time order (rows of one tend in
// the order stored), every field intact; another run's history is apart.
func TestRampHistory(t *testing.T) {
	ctx := context.Background()
	db := openNew(t)
	t0 := time.Unix(100, 0)
	first := []RampPoint{
		{At: t0, Task: "a", Setpoint: 2, Ceiling: 8, ConnLimit: 16, Decision: "climb", Reason: "saturated, no pushback", Saturated: true},
		{At: t0, Task: "b", Setpoint: 1, Ceiling: 8, ConnLimit: 16, Decision: "hold", Reason: "not saturated"},
	}
	second := []RampPoint{
		{At: t0.Add(10 * time.Second), Task: "a", Setpoint: 1, Ceiling: 4, ConnLimit: 8, Decision: "back off", Reason: "pushback", Pushback: true, Retries: 3, Errored: 1},
	}
	// Stored out of time order: read back in time order.
	if err := db.AddRamp(ctx, "r1", second); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRamp(ctx, "r1", first); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRamp(ctx, "r2", []RampPoint{{At: t0, Task: "z", Setpoint: 9}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Ramp(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]RampPoint{}, first...), second...)
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) {
			t.Errorf("point %d at %v, want %v", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("point %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if none, err := db.Ramp(ctx, "r-none"); err != nil || len(none) != 0 {
		t.Fatalf("ramp of an unknown run: %v %v", none, err)
	}
	// A tend's points are stored in one transaction: a failing one stores none.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.AddRamp(cctx, "r3", first); err == nil {
		t.Fatal("AddRamp with a cancelled context succeeded")
	}
	if pts, _ := db.Ramp(ctx, "r3"); len(pts) != 0 {
		t.Fatalf("a failed tend left %d points", len(pts))
	}
}

// Controls: unset reads "", set and overwritten reads the newest value,
// "" deletes; another invocation on the same record sees each change, and
// a read-only reader too.
func TestControls(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	read := func(db *DB) string {
		t.Helper()
		v, err := db.Control(ctx, "ramp.hold")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read(b); v != "" {
		t.Fatalf("unset control %q", v)
	}
	steps := []string{"provider unhappy", "still unhappy", "", "again", ""}
	for _, v := range steps {
		if err := a.SetControl(ctx, "ramp.hold", v, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := read(b); got != v {
			t.Fatalf("after setting %q the other invocation reads %q", v, got)
		}
	}
	if err := a.SetControl(ctx, "other", "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := read(ro); got != "" {
		t.Fatalf("reader sees %q", got)
	}
	if v, _ := ro.Control(ctx, "other"); v != "x" {
		t.Fatalf("reader sees other=%q", v)
	}
	if err := ro.SetControl(ctx, "ramp.hold", "x", time.Now()); err == nil {
		t.Fatal("a read-only record took a write")
	}
}

// Leases: one owner per key; release needs the owner's token; Holder
// never shows the token; Leases lists all in key order; a released key is
// free again.
func TestLeaseLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openNew(t)
	at := time.Unix(5000, 0)
	tokA, err := db.TryAcquire(ctx, "db", "r1", "migrate", 11, "h1", at)
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := db.TryAcquire(ctx, "cache", "r1", "warm", 11, "h1", at)
	if err != nil {
		t.Fatal(err)
	}
	if tokA == tokB || !strings.HasPrefix(tokA, "lt-") {
		t.Fatalf("tokens %q %q", tokA, tokB)
	}
	if _, err := db.TryAcquire(ctx, "db", "r2", "other", 22, "h2", at); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second owner: %v", err)
	}
	l, held, err := db.Holder(ctx, "db")
	if err != nil || !held || l.RunID != "r1" || l.Task != "migrate" || l.PID != 11 || l.Host != "h1" || !l.Acquired.Equal(at) || l.Token != "" {
		t.Fatalf("holder %+v %v %v", l, held, err)
	}
	all, err := db.Leases(ctx, "")
	if err != nil || len(all) != 2 || all[0].Key != "cache" || all[1].Key != "db" || all[1].Token != tokA {
		t.Fatalf("leases %+v %v", all, err)
	}
	if err := db.Release(ctx, "db", tokB); err == nil {
		t.Fatal("another key's token released the lease")
	}
	if err := db.Recover(ctx, "free-key", "x"); err == nil || !strings.Contains(err.Error(), "not held") {
		t.Fatalf("recover of a free key: %v", err)
	}
	if err := db.Release(ctx, "db", tokA); err != nil {
		t.Fatal(err)
	}
	if err := db.Release(ctx, "db", tokA); err == nil {
		t.Fatal("released twice")
	}
	if _, held, _ := db.Holder(ctx, "db"); held {
		t.Fatal("released key still held")
	}
	if _, err := db.TryAcquire(ctx, "db", "r2", "other", 22, "h2", at); err != nil {
		t.Fatalf("free key: %v", err)
	}
}

// Live state: one row per run, overwritten by each tend, read back by run id.
func TestLiveState(t *testing.T) {
	ctx := context.Background()
	db := openNew(t)
	if live, err := db.Live(ctx); err != nil || len(live) != 0 {
		t.Fatalf("empty record: %v %v", live, err)
	}
	for i, st := range []string{`{"n":1}`, `{"n":2}`} {
		if err := db.SetLive(ctx, "r1", st, time.Unix(int64(i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetLive(ctx, "r2", `{"n":9}`, time.Unix(3, 0)); err != nil {
		t.Fatal(err)
	}
	live, err := db.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"r1": `{"n":2}`, "r2": `{"n":9}`}; !reflect.DeepEqual(live, want) {
		t.Fatalf("live %v, want %v", live, want)
	}
}

// recordAt makes a record at schema version v the way that version's
// Steward left it, with one finished run and one attempt.
func recordAt(t *testing.T, v int) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	qs := append([]string{}, migrations[:v]...)
	qs = append(qs, fmt.Sprintf(`PRAGMA user_version = %d`, v),
		`INSERT INTO runs(id, evalset, status, started_at) VALUES('r1','e','finished',1)`,
		`INSERT INTO attempts(run_id, seq, task, sample, attempt, status, fingerprint, finished_at, log) VALUES('r1', 0, 't', 's', 1, 'passed', 'fp', 10, 'the log')`)
	for _, q := range qs {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dir
}

// columns describes the schema: every table with its columns and types.
func columns(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT m.name, p.name, p.type, p."notnull", p.pk FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type='table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'run_plans'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tbl, col, typ string
		var notnull, pk int
		if err := rows.Scan(&tbl, &col, &typ, &notnull, &pk); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s.%s %s notnull=%d pk=%d", tbl, col, typ, notnull, pk))
	}
	sort.Strings(out)
	return out
}

// A record of every older schema version migrates to the current one on
// the first writer's open: the schema equals a new record's, the rows are
// kept, every feature added since works, and a second open changes nothing.
// A record of a newer version is refused, and left as it was.
func TestMigrationsFromEveryVersion(t *testing.T) {
	ctx := context.Background()
	fresh := openNew(t)
	want := columns(t, fresh.SQL())
	if len(migrations) < 2 {
		t.Fatalf("only %d migrations", len(migrations))
	}
	for v := 1; v < len(migrations); v++ {
		t.Run(fmt.Sprint("from version ", v), func(t *testing.T) {
			dir := recordAt(t, v)
			db, err := Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got int
			if err := db.SQL().QueryRow(`PRAGMA user_version`).Scan(&got); err != nil || got != len(migrations) {
				t.Fatalf("user_version %d (%v), want %d", got, err, len(migrations))
			}
			if cols := columns(t, db.SQL()); !reflect.DeepEqual(cols, want) {
				t.Fatalf("migrated schema differs from a new record's:\n got %v\nwant %v", cols, want)
			}
			as, err := db.Attempts(ctx, "r1")
			if err != nil || len(as) != 1 || as[0].Log != "the log" || as[0].Status != "passed" {
				t.Fatalf("rows after migration: %+v %v", as, err)
			}
			// What later versions added works on the migrated record.
			if err := db.StartRun(ctx, Run{ID: "r2", EvalSet: "e", Started: time.Unix(2, 0)}); err != nil {
				t.Fatal(err)
			}
			if err := db.PublishCarried(ctx, []Ref{{RunID: "r2", Seq: 0, SrcRun: "r1", SrcSeq: 0}}); err != nil {
				t.Fatal(err)
			}
			if err := db.PutTranscript(ctx, "r1", 0, TranscriptInfo{Calls: 1, RawBytes: 3}, []byte("abc")); err != nil {
				t.Fatal(err)
			}
			if err := db.PutArtifacts(ctx, "r1", 0, []Artifact{{Path: "out.txt", Size: 2, Data: []byte("hi")}}); err != nil {
				t.Fatal(err)
			}
			carried, err := db.Attempts(ctx, "r2")
			if err != nil || len(carried) != 1 || carried[0].CarriedFrom != "r1" || carried[0].Log != "the log" {
				t.Fatalf("carried after migration: %+v %v", carried, err)
			}
			if arts, err := db.Artifacts(ctx, carried[0]); err != nil || len(arts) != 1 || string(arts[0].Data) != "hi" {
				t.Fatalf("artifacts through the carry: %+v %v", arts, err)
			}
			db.Close()
			again, err := Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if cols := columns(t, again.SQL()); !reflect.DeepEqual(cols, want) {
				t.Fatal("a second open changed the schema")
			}
		})
	}
	t.Run("newer version refused", func(t *testing.T) {
		dir := recordAt(t, len(migrations))
		raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations)+1)); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		_, err = Open(ctx, dir)
		if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), "newer Steward") {
			t.Fatalf("open of a newer record: %v", err)
		}
		ro, err := OpenReadOnly(ctx, dir)
		if err == nil {
			ro.Close()
			t.Fatal("a reader opened a newer record")
		}
	})
}
