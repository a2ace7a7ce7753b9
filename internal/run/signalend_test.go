package run

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
)

// A signal that lands as the run ends, once every attempt has been
// published, cuts nothing short: the run is finished (not cancelled), its
// report has no PARTIAL line and its results give the exit code. A signal
// that leaves an attempt not started cancels the run (exit 130). The signal
// is sent from the moment the record takes the chosen attempt, so where it
// lands is certain.
func TestSignalAsTheRunEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		at        int  // the published attempt the signal follows
		hard      bool // the second signal (abort) rather than the first
		exclusive bool // one attempt at a time: the rest are still queued
		cancelled bool
	}{
		{name: "first signal after the last attempt", at: 6},
		{name: "second signal after the last attempt", at: 6, hard: true},
		{name: "first signal with attempts queued", at: 1, exclusive: true, cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "helper.txt", "ok")
			set := basicSet
			if tc.exclusive {
				set = strings.Replace(set, "    exclusive: false\n", "", 1)
			}
			es, err := evalset.Load(write(t, dir, "steward.yaml", set), evalset.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hard, abort := context.WithCancel(context.Background())
			defer abort()
			var n atomic.Int32
			prov := &counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}
			opts := Options{EvalSet: es, Providers: factory{prov}, Hard: hard, Observe: func(e Event) {
				if e.Attempt != nil && int(n.Add(1)) == tc.at {
					if tc.hard {
						abort()
					}
					cancel()
				}
			}}
			res, err := Launch(ctx, opts)
			if err != nil {
				t.Fatalf("launch: %v", err)
			}
			if res.Cancelled != tc.cancelled || res.Report.Partial != tc.cancelled {
				t.Fatalf("cancelled %v partial %v, want %v (attempts: %s)", res.Cancelled, res.Report.Partial, tc.cancelled, statuses(res.Report))
			}
			db, err := record.OpenReadOnly(context.Background(), es.Fleet.Record)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			runs, err := db.Runs(context.Background())
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs %v: %v", runs, err)
			}
			want := status.Finished
			if tc.cancelled {
				want = status.Cancelled
			}
			if runs[0].Status != want {
				t.Fatalf("the run is %s, want %s", runs[0].Status, want)
			}
		})
	}
}
