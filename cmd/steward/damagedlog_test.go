package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyDir copies the regular files of a record directory (one level of
// subdirectories: runs/, the published counts) as they are.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(dst, 0o755)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A launch is SIGKILLed with 36 attempts published and its write-ahead log
// unfolded; then one byte of that log is flipped, frame by frame (a copy of
// the record each time, with and without the shared-memory index the kill left).
// SQLite drops the damaged frame and every commit after it without a word,
// and `steward report` used to exit 0 with 0 attempts where the intact copy
// has 36. Now each damaged copy is either read whole or refused with exit 3,
// naming the damaged log; never reported short.
func TestDamagedLogIsNeverSilent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var samples []string
	for i := 0; i < 37; i++ {
		samples = append(samples, fmt.Sprintf(`      - {id: s%03d, input: "x", target: ok}`, i))
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    max_samples: 4
    agent: 'if [ "$STEWARD_SAMPLE_ID" = s036 ]; then exec sleep 300; fi; echo ok'
    scorer: {match: exact}
    samples:
`+strings.Join(samples, "\n")+"\n")
	rec := filepath.Join(dir, "rec")
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--record", rec, "--events", ev.path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STEWARD_IN_CONTAINER=0")
	var buf syncBuf
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "36 attempts published", 2*time.Minute, func(e *launchEvents) bool { return len(e.attempts) >= 36 })
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	report := func(rec string) (faultReport, string, int) {
		out, code := steward(t, dir, "report", "--record", rec, "--format", "json")
		var r faultReport
		if code == 0 {
			if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
				t.Fatalf("report json: %v\n%s", err, out)
			}
		}
		return r, out, code
	}
	intact := filepath.Join(t.TempDir(), "rec")
	copyDir(t, rec, intact)
	if r, out, code := report(intact); code != 0 || r.Counts.Total != 36 {
		t.Fatalf("the intact copy: exit %d, %d attempts, want 36:\n%s", code, r.Counts.Total, out)
	}
	wal, err := os.ReadFile(filepath.Join(rec, "record.sqlite-wal"))
	if err != nil {
		t.Fatal(err)
	}
	const header, frame = 32, 24 + 4096
	frames := (len(wal) - header) / frame
	if frames < 1 {
		t.Fatalf("the killed run left no log to damage (%d bytes)", len(wal))
	}
	refused, malformed := 0, 0
	for f := 0; f < frames; f++ {
		off := header + f*frame + 24 + 2048 // in the frame's page
		// With the shared-memory index the kill left, SQLite may trust it
		// and read the damaged page (malformed: refused as damaged); without
		// it, SQLite rebuilds the index from the log and drops what follows
		// the damage. Either way the record is refused or read whole.
		for _, shm := range []bool{true, false} {
			dmg := filepath.Join(t.TempDir(), "rec")
			copyDir(t, intact, dmg)
			if !shm {
				if err := os.Remove(filepath.Join(dmg, "record.sqlite-shm")); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			b := append([]byte(nil), wal...)
			b[off] ^= 0x01
			if err := os.WriteFile(filepath.Join(dmg, "record.sqlite-wal"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			r, out, code := report(dmg)
			switch {
			case code == 3 && strings.Contains(out, "write-ahead log") && strings.Contains(out, "damaged"):
				refused++
			case code == 3 && strings.Contains(out, "unusable record") && (strings.Contains(out, "is damaged") || strings.Contains(out, "integrity check")):
				// The database file already holds pages folded from
				// frames after the damage: what SQLite reads is malformed.
				malformed++
			case code == 0 && r.Counts.Total == 36:
			default:
				t.Fatalf("frame %d of %d damaged (index kept %v): exit %d, %d attempts; want exit 3 naming the damage, or all 36:\n%s", f, frames, shm, code, r.Counts.Total, out)
			}
		}
	}
	if refused == 0 {
		t.Fatalf("no damaged frame of %d was refused", frames)
	}
	t.Logf("%d frames of the killed run's log damaged one at a time, with and without its index: %d refused as a damaged log, %d as malformed (exit 3), the rest read whole", frames, refused, malformed)
}
