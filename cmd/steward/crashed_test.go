package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
)

// A SIGKILLed launch: `steward report` says the run crashed and lists the
// attempts it planned but never published; `steward runs` marks it crashed
// in the record, shows who ran it where, and removes its stale lock file.
func TestKilledLaunchIsCrashed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var samples []string
	for i := 0; i < 8; i++ {
		samples = append(samples, fmt.Sprintf(`      - {id: s%d, input: "", target: ok}`, i))
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    max_samples: 2
    agent: 'case "$STEWARD_SAMPLE_ID" in s0|s1) echo ok;; *) sleep 60; echo ok;; esac'
    scorer: {match: exact}
    samples:
`+strings.Join(samples, "\n")+"\n")
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--tend-interval", "200ms", "--events", ev.path)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	rec := filepath.Join(dir, ".steward")
	ctx := context.Background()
	// s0 and s1 are published, the others sleep; and the live state
	// `steward tend` reads has been written since.
	ev.wait(t, "two attempts, then the live state", 2*time.Minute, func(e *launchEvents) bool {
		return len(e.attempts) == 2 && len(e.lives) > 0 && e.lives[len(e.lives)-1].Counts.Passed == 2
	})
	runID := ev.runID()
	if got, _ := steward(t, dir, "tend"); !strings.Contains(got, "run "+runID) {
		t.Fatalf("steward tend does not show the live run %s:\n%s", runID, got)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	lock := filepath.Join(rec, "runs", runID+".lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed run left no lock file to clean up: %v", err)
	}

	// Its last live state is not a live run.
	if got, _ := steward(t, dir, "tend"); strings.Contains(got, runID) {
		t.Fatalf("tend shows the killed run as live:\n%s", got)
	}
	// The report, before anything marked the record, says crashed and lists
	// what was never published.
	got, code := steward(t, dir, "report", "--format", "json")
	var rep struct {
		Crashed     string   `json:"crashed"`
		Unpublished []string `json:"unpublished"`
		Partial     bool     `json:"partial"`
	}
	if err := json.Unmarshal([]byte(got), &rep); err != nil || code != 0 {
		t.Fatalf("report exit %d: %v\n%s", code, err, got)
	}
	want := []string{"t/s2#1", "t/s3#1", "t/s4#1", "t/s5#1", "t/s6#1", "t/s7#1"}
	if !rep.Partial || !strings.Contains(rep.Crashed, "crashed") || strings.Join(rep.Unpublished, " ") != strings.Join(want, " ") {
		t.Fatalf("report of a killed run: %+v", rep)
	}
	if got, _ := steward(t, dir, "report"); !strings.Contains(got, "CRASHED: the run crashed") || !strings.Contains(got, "6 planned attempts never published: t/s2#1") {
		t.Fatalf("terminal report:\n%s", got)
	}

	// `steward runs` marks it crashed and removes its lock.
	got, code = steward(t, dir, "runs")
	if code != 0 || !strings.Contains(got, runID) || !strings.Contains(got, "crashed") || !strings.Contains(got, fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Fatalf("runs exit %d:\n%s", code, got)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("the crashed run's lock file is still there: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(rec, "runs", "*")); len(left) > 0 {
		t.Fatalf("the crashed run left files next to the record: %v", left)
	}
	got, _ = steward(t, dir, "runs", "--json")
	var rows []struct {
		ID, Status  string
		Unpublished int
		PID         int
		Host        string
	}
	if err := json.Unmarshal([]byte(got), &rows); err != nil || len(rows) != 1 || rows[0].Status != "crashed" || rows[0].Unpublished != 6 || rows[0].PID != cmd.Process.Pid || rows[0].Host == "" {
		t.Fatalf("runs --json: %v\n%s", err, got)
	}
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := db.Runs(ctx)
	live, _ := db.Live(ctx)
	db.Close()
	if runs[0].Status != "crashed" || runs[0].Finished.IsZero() || live[runID] != "" {
		t.Fatalf("record after steward runs: %+v live %q", runs[0], live[runID])
	}
	if got, _ := steward(t, dir, "report", "--format", "markdown"); !strings.Contains(got, "Planned but never published (6)") {
		t.Fatalf("markdown report:\n%s", got)
	}
}
