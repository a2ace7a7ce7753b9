package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

func TestCapacityAndDoctorLive(t *testing.T) {
	r := newRun(t, nil)
	ctx := context.Background()
	if !Available(ctx) {
		t.Fatal("Available says no daemon, but one answers")
	}
	info, err := r.P.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.P.Capacity(ctx, []sandbox.Spec{{Task: "a"}, {Task: "b", Memory: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	want := ComputeCapacity(info.NCPU, info.MemTotal, DefaultMemory, -1)
	if c != want || c.Limit < 1 {
		t.Fatalf("capacity %+v, want %+v", c, want)
	}
	// A huge per-sandbox memory makes memory win.
	c, err = r.P.Capacity(ctx, []sandbox.Spec{{Task: "big", Memory: info.MemTotal / 2}})
	if err != nil {
		t.Fatal(err)
	}
	if info.NCPU >= 2 && (c.Limit != 2 || !strings.Contains(c.Source, "memory")) {
		t.Fatalf("memory-bound capacity %+v", c)
	}
	// Isolated networks bound it by the free networks (less the run network).
	rep, err := r.P.Preflight(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err = r.P.Capacity(ctx, []sandbox.Spec{{Task: "iso", Network: NetworkIsolated, Memory: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	wantIso := ComputeCapacity(info.NCPU, info.MemTotal, 1<<20, rep.Free-1)
	if c != wantIso {
		t.Fatalf("isolated capacity %+v, want %+v", c, wantIso)
	}

	// A daemon.json with pools is read from the overridden path.
	dj := filepath.Join(t.TempDir(), "daemon.json")
	os.WriteFile(dj, []byte(`{"default-address-pools":[{"base":"10.99.0.0/16","size":24}]}`), 0o644)
	r2 := newRun(t, func(o *Options) { o.DaemonJSONPath = dj })
	rep2, err := r2.P.Preflight(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Total != 256 || rep2.Enough || !strings.Contains(rep2.PoolsSource, dj) {
		t.Fatalf("preflight from %s: %+v", dj, rep2)
	}

	var b strings.Builder
	if err := r.P.Doctor(ctx, &b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("doctor:\n%s", out)
	for _, w := range []string{"docker daemon " + info.ServerVersion, fmt.Sprintf("CPUs %d", info.NCPU), "networks ", "free", "images ", "steward resources:", "bridge"} {
		if !strings.Contains(out, w) {
			t.Errorf("doctor lacks %q:\n%s", w, out)
		}
	}
}
