package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// The address-pool policy lives in the provider: a run that wants more
// networks than the pools can give is stopped with an infrastructure error
// after the fix is shown; the fix is written (with a backup) only when the
// user confirms or passes --write-daemon-json, and the run stops either way.
func TestPreflightRunPolicy(t *testing.T) {
	daemonJSON := filepath.Join(t.TempDir(), "daemon.json")
	r := newRun(t, func(o *Options) { o.DaemonJSONPath = daemonJSON })
	ctx := context.Background()
	// One network per live sandbox of an isolated task: a million at once
	// is more than any pool gives.
	specs := []*sandbox.Spec{{Task: "t", Network: "isolated"}}
	const many = 1 << 20

	var out strings.Builder
	var asked []string
	decline := func(q string) bool { asked = append(asked, q); return false }
	err := r.P.PreflightRun(ctx, specs, many, &out, decline, false)
	if !errors.Is(err, sandbox.ErrInfra) || !strings.Contains(err.Error(), "docker networks but the daemon's address pools can give only") {
		t.Fatalf("err = %v", err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "daemon configuration") {
		t.Fatalf("asked %q", asked)
	}
	if !strings.Contains(out.String(), "this run wants") || !strings.Contains(out.String(), "default-address-pools") {
		t.Fatalf("the fix is not shown:\n%s", out.String())
	}
	if _, err := os.Stat(daemonJSON); !os.IsNotExist(err) {
		t.Fatalf("declined, yet %s was written (%v)", daemonJSON, err)
	}

	out.Reset()
	asked = nil
	err = r.P.PreflightRun(ctx, specs, many, &out, decline, true)
	if !errors.Is(err, sandbox.ErrInfra) {
		t.Fatalf("with --write-daemon-json the run still stops (the daemon is not restarted): %v", err)
	}
	if len(asked) != 0 {
		t.Fatalf("asked although --write-daemon-json was given: %q", asked)
	}
	data, err := os.ReadFile(daemonJSON)
	if err != nil || !strings.Contains(string(data), "default-address-pools") {
		t.Fatalf("daemon.json: %q %v", data, err)
	}
	if !strings.Contains(out.String(), "wrote "+daemonJSON) || !strings.Contains(out.String(), "restart the daemon") {
		t.Fatalf("output:\n%s", out.String())
	}

}
