package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
)

// diskFullRecord mounts a small tmpfs for a record (what a full disk is
// made of here) and returns its path and a function that fills it up to
// leave `room` bytes free.
func diskFullRecord(t *testing.T, dir string) (string, func(room int64), func()) {
	return diskFullRecordOf(t, dir, "6m")
}

// diskFullRecordOf is diskFullRecord on a file system of the given size.
func diskFullRecordOf(t *testing.T, dir, size string) (string, func(room int64), func()) {
	t.Helper()
	rec := filepath.Join(dir, "rec")
	if err := os.Mkdir(rec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", rec).Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: mounting a tmpfs for the record is required: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (not root?): %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", rec).Run() })
	filler := filepath.Join(rec, "filler")
	fill := func(room int64) {
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for n := 64 << 10; n >= 1; n /= 2 {
			buf := make([]byte, n)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
		}
		if room > 0 {
			st, _ := f.Stat()
			if err := f.Truncate(max(0, st.Size()-room)); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	free := func() {
		if err := os.Remove(filler); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return rec, fill, free
}

func diskFullEvalSet(t *testing.T, dir string, n int, agent string) {
	var samples []string
	for i := 0; i < n; i++ {
		samples = append(samples, fmt.Sprintf(`      - {id: s%03d, input: "%s", target: ok}`, i, strings.Repeat("x", 2000)))
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    max_samples: 4
    agent: '`+agent+`; echo ok; head -c 3000 /dev/zero | tr "\0" y >&2'
    scorer: {match: exact}
    samples:
`+strings.Join(samples, "\n")+"\n")
}

// diskFullRuns is the record's runs and how many of each status their attempts have.
func diskFullRuns(t *testing.T, rec string) ([]record.Run, []map[string]int) {
	t.Helper()
	ctx := context.Background()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatalf("reopen the record: %v", err)
	}
	defer db.Close()
	runs, err := db.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var counts []map[string]int
	for _, r := range runs {
		as, err := db.Attempts(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		c := map[string]int{}
		for _, a := range as {
			c[string(a.Status)]++
		}
		counts = append(counts, c)
	}
	return runs, counts
}

// oneClearMessage: exit 3, the record's disk named as full exactly once, and
// no raw SQLite error on its own.
func oneClearMessage(t *testing.T, what, out string, code int, rec string) {
	t.Helper()
	if code != 3 || strings.Count(out, "the record's disk is full") != 1 || !strings.Contains(out, rec) || !strings.Contains(out, "free some space") {
		t.Errorf("%s: want exit 3 and one clear message naming the full record disk; exit %d:\n%s", what, code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "disk is full") && !strings.Contains(line, "the record's disk is full") && !strings.Contains(line, "not started") {
			t.Errorf("%s: a raw disk-full error is printed apart from the clear message: %q", what, line)
		}
	}
}

// Disk full, on every path: one clear message; the run's status is final
// (never left running); queued attempts are recorded as skipped.
func TestDiskFullEveryPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, fill, free := diskFullRecord(t, dir)

	// 1. Ten attempts published with room to spare.
	diskFullEvalSet(t, dir, 10, "true")
	if out, code := faultLaunch(t, dir, nil, 2*time.Minute, "launch", "--record", rec); code != 0 {
		t.Fatalf("first run exit %d:\n%s", code, out)
	}

	// 2. Little room: enough for a run's first rows, not for its carried ones.
	diskFullEvalSet(t, dir, 60, "true")
	fill(80 << 10)
	out, code := faultLaunch(t, dir, nil, 2*time.Minute, "launch", "--record", rec)
	oneClearMessage(t, "little room", out, code, rec)
	free()

	// 3. The carry path: room for the run's start and its reserve, not for its carried rows.
	fill(1<<20 + 80<<10)
	out, code = faultLaunch(t, dir, nil, 2*time.Minute, "launch", "--record", rec)
	oneClearMessage(t, "full while carrying", out, code, rec)
	free()
	runs, counts := diskFullRuns(t, rec)
	for i, r := range runs {
		if r.Status == "running" {
			t.Errorf("full while carrying: run %s is left running (%v)", r.ID, counts[i])
		}
	}
	if len(runs) == 2 && counts[0]["skipped"] == 0 {
		t.Errorf("full while carrying: no queued attempt was recorded as skipped: %v", counts[0])
	}

	// 4. The disk fills in the middle of a launch.
	diskFullEvalSet(t, dir, 80, "sleep 0.2")
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--record", rec, "--events", ev.path)
	cmd.Dir = dir
	var buf syncBuf
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "12 attempts published", 2*time.Minute, func(e *launchEvents) bool { return len(e.attempts) >= 12 })
	fill(0)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the run hung on a full disk:\n%s", buf.String())
	}
	oneClearMessage(t, "full during launch", buf.String(), cmd.ProcessState.ExitCode(), rec)
	free()
	runs, counts = diskFullRuns(t, rec)
	if runs[0].Status != "stopped" || counts[0]["skipped"] == 0 {
		t.Errorf("full during launch: run status %q, attempts %v: want stopped, with the queued attempts skipped", runs[0].Status, counts[0])
	}
	if got, _ := steward(t, dir, "report", "--record", rec); strings.Contains(got, "CRASHED") {
		t.Errorf("a run stopped by a full disk reads as crashed:\n%s", got)
	}
}

// The whole story on a 2 MiB file system holding the record: the disk fills
// in the middle of a launch (exit 3, one clear message); the run ends
// stopped (never running, never crashed), its queued attempts skipped; once
// the space is freed, the relaunch exits 0 and carries every attempt the
// stopped run published. (The write-ahead log used to eat the 1 MiB reserve:
// the stopped status failed unsaid, the run read as crashed, and every
// relaunch exited 3 because the log held the room.)
func TestDiskFullStopFreeRelaunch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec, fill, free := diskFullRecordOf(t, dir, "2m")
	diskFullEvalSet(t, dir, 80, "sleep 0.1")
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--record", rec, "--events", ev.path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEWARD_IN_CONTAINER=0")
	var buf syncBuf
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "12 attempts published", 2*time.Minute, func(e *launchEvents) bool { return len(e.attempts) >= 12 })
	fill(0)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the run hung on a full disk:\n%s", buf.String())
	}
	oneClearMessage(t, "full during launch", buf.String(), cmd.ProcessState.ExitCode(), rec)

	// Stopped, still on the full disk: the status was written before the
	// skipped rows, and read-only commands read it there.
	out, code := steward(t, dir, "runs", "--record", rec)
	if code != 0 || !strings.Contains(out, "stopped") || strings.Contains(out, "crashed") || strings.Contains(out, "running") {
		t.Errorf("steward runs on the full disk: exit %d, want the run stopped:\n%s", code, out)
	}
	free()
	runs, counts := diskFullRuns(t, rec)
	if len(runs) != 1 || runs[0].Status != "stopped" || counts[0]["skipped"] == 0 {
		t.Fatalf("after the full disk: runs %+v, attempts %v: want one run, stopped, with the queued attempts skipped", runs, counts)
	}
	published := counts[0]["passed"]
	if published < 12 || published+counts[0]["skipped"] > 80 {
		t.Fatalf("the stopped run holds %v", counts[0])
	}

	// Room again: the relaunch carries every published attempt and runs the rest.
	out, code = faultLaunch(t, dir, nil, 3*time.Minute, "launch", "--record", rec)
	c := crashCounts(out)
	if code != 0 || c == nil || c[0] != 80 || c[1] != published || c[4] != 80 {
		t.Fatalf("relaunch after the space was freed (%d published before): exit %d, counts %v, want exit 0, 80 total, %d reused, 80 passed:\n%s", published, code, c, published, out)
	}
}
