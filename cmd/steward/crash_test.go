package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
	"github.com/steward-evals/steward/internal/testlock"
)

// crashTrials is how many times TestCrashSafety kills a launch (at least 20
// in CI, the acceptance); STEWARD_CRASH_TRIALS overrides it.
func crashTrials(t *testing.T) int { return killTrials(t, "STEWARD_CRASH_TRIALS", 20) }

// crashDockerReady reports whether the docker trials can run: under CI=true a
// missing daemon fails the test; otherwise the docker trials are left out.
func crashDockerReady(t *testing.T) bool {
	testlock.Shared(t, testlock.Docker) // packages run side by side (internal/testlock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if sbdocker.Available(ctx) {
		if _, err := os.Stat(dockertest.BusyboxPath); err == nil {
			return true
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true: a Docker daemon and /bin/busybox (busybox-static) are required")
	}
	t.Log("no Docker daemon or busybox: the docker trials are left out")
	return false
}

// crashEvalSet writes a trial's eval set: a local task (exclusive: false)
// whose "slow" samples sleep for 30 s while FLAG exists, with samples that
// pass and samples that fail; and, when withDocker, a docker task.
func crashEvalSet(t *testing.T, dir, flag, imageDir string, withDocker bool) (total int) {
	return killSet{
		MaxSamples: 6, Samples: 24, SlowEvery: 8, Docker: 5,
		Agent:       `case "$STEWARD_SAMPLE_ID" in slow*) if [ -f ` + flag + ` ]; then sleep 30; fi;; esac; sleep 0.05; echo "$STEWARD_INPUT"`,
		DockerAgent: `sleep 0.4; echo "$STEWARD_INPUT"`,
	}.write(t, dir, imageDir, withDocker)
}

// crashProcs lists host processes whose environment names the run: the
// local sandboxes' process groups (every sandbox command gets STEWARD_RUN_ID).
func crashProcs(runID string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	needle := []byte("\x00STEWARD_RUN_ID=" + runID + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append([]byte{0}, env...), needle) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// crashLiveSandboxes counts the running docker sandboxes of the trial in
// dir (their lock lives in dir: other tests run docker tasks named boxed
// meanwhile).
func crashLiveSandboxes(dir string) (int, error) {
	locks, err := exec.Command("docker", "ps", "--filter", "label="+sandbox.LabelTask+"=boxed",
		"--format", `{{.Label "`+sbdocker.LabelLock+`"}}`).Output()
	live := 0
	for _, l := range strings.Fields(string(locks)) {
		if strings.HasPrefix(l, dir+"/") {
			live++
		}
	}
	return live, err
}

// crashAwaitSandbox waits until the launch cmd in dir has started a docker
// sandbox (the daemon's start events since the launch; at most four
// minutes, the bound of a slow, busy machine), failing the trial if the
// launch ends first or none starts.
func crashAwaitSandbox(t *testing.T, since time.Time, dir string, cmd *exec.Cmd, out *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, errs := containerEventsCtx(ctx, t, since, events.ActionStart, filters.Arg("label", sandbox.LabelTask+"=boxed"))
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for alive(cmd.Process.Pid) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond): // the launch's liveness, polled: it is not ours to wait on
			}
		}
	}()
	bound := time.After(4 * time.Minute)
	for {
		select {
		case m := <-msgs:
			if strings.HasPrefix(m.Actor.Attributes[sbdocker.LabelLock], dir+"/") {
				return
			}
			continue
		case err := <-errs:
			t.Logf("docker events: %v", err)
		case <-exited:
		case <-bound:
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		t.Fatalf("the launch never had a live docker sandbox:\n%s", out.String())
	}
}

// integrity runs SQLite's own check on the record file.
func crashIntegrity(t *testing.T, recDir string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(recDir, "record.sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
}

var crashCountsRe = regexp.MustCompile(`│ (\d+) total · (\d+) reused · (\d+) running · (\d+) queued · (\d+) passed · (\d+) failed · (\d+) errored`)

// crashCounts is the last counts line a launch printed.
func crashCounts(out string) []int {
	m := crashCountsRe.FindAllStringSubmatch(out, -1)
	if m == nil {
		return nil
	}
	var n []int
	for _, s := range m[len(m)-1][1:] {
		v, _ := strconv.Atoi(s)
		n = append(n, v)
	}
	return n
}

// A launch SIGKILLed at random points: each time the next command opens the
// record, every published attempt is intact, nothing of the killed run is
// left running (local process groups; docker containers after the next
// launch), and re-running completes the set carrying what was judged.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	seed := killSeed(t, "STEWARD_CRASH_SEED")
	rng := rand.New(rand.NewPCG(seed, 7))
	withDocker := crashDockerReady(t)
	var imageDir string
	if withDocker {
		imageDir = killImage(t, "cmd/steward crash tests")
	}
	// The leftover check must be able to see a sandbox process.
	probeID := fmt.Sprintf("selfcheck-%d", seed)
	// It says "up" once it runs (its environment is readable only once its
	// exec has finished, which exec.Cmd.Start does not wait for), then waits
	// on its stdin, starting nothing.
	probe := exec.Command("/bin/sh", "-c", "echo up; read _")
	probe.Env = []string{"STEWARD_RUN_ID=" + probeID}
	probeIn, err := probe.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer probeIn.Close()
	probeOut, err := probe.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(probeOut).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("the leftover check's probe: %q %v", line, err)
	}
	found := crashProcs(probeID)
	_ = probe.Process.Kill()
	_ = probe.Wait()
	if len(found) != 1 || found[0] != probe.Process.Pid {
		t.Fatalf("the leftover check cannot see a process with STEWARD_RUN_ID set: %v", found)
	}
	liveAtKill := 0
	dockerTrials := 0
	defer func() {
		if dockerTrials >= 2 && liveAtKill == 0 && !t.Failed() {
			t.Errorf("no docker trial was killed while its sandboxes lived: the docker kill points miss the interesting moment")
		}
	}()
	trials := crashTrials(t)
	for trial := 0; trial < trials; trial++ {
		useDocker := withDocker && trial%5 == 4
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		// Docker trials alternate: a random moment from the launch (the
		// first, third: often before any sandbox, on a slow machine while
		// the network is made), and a random moment within 0.4 s of the
		// trial's first live sandbox (the second, fourth), so a slow daemon
		// cannot make every kill miss the sandboxes.
		afterLive := false
		if useDocker {
			delay = time.Duration(1000+rng.IntN(4000)) * time.Millisecond
			afterLive = (trial/5)%2 == 1
			if afterLive {
				delay = time.Duration(rng.IntN(400)) * time.Millisecond
			}
		}
		t.Run(fmt.Sprintf("trial%02d", trial), func(t *testing.T) {
			dir := t.TempDir()
			flag := filepath.Join(dir, "slow.flag")
			writeFile(t, flag, "")
			total := crashEvalSet(t, dir, flag, imageDir, useDocker)
			cmd := exec.Command(exe, "launch")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "STEWARD_IN_CONTAINER=0")
			var first bytes.Buffer
			cmd.Stdout, cmd.Stderr = &first, &first
			started := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if afterLive {
				crashAwaitSandbox(t, started, dir, cmd, &first)
			}
			time.Sleep(delay) // a random kill point, not synchronisation
			if useDocker {
				dockerTrials++
				live, err := crashLiveSandboxes(dir)
				if err == nil && live > 0 {
					liveAtKill++
					t.Logf("%d docker sandboxes were live at the kill", live)
				}
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			t.Logf("killed after %v (docker %v)", delay, useDocker)

			// The next command opens the record; published attempts are whole.
			ctx := context.Background()
			rec := filepath.Join(dir, ".steward")
			db, err := record.Open(ctx, rec)
			if err != nil {
				t.Fatalf("reopen the record: %v\n%s", err, first.String())
			}
			runs, err := db.Runs(ctx)
			if err != nil || len(runs) > 1 {
				t.Fatalf("runs %+v %v", runs, err)
			}
			judged := 0
			var killedRun string
			if len(runs) == 1 {
				killedRun = runs[0].ID
				as, err := db.Attempts(ctx, killedRun)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					if (a.Status != "passed" && a.Status != "failed") || a.Fingerprint == "" || a.Finished.IsZero() || a.Finished.Before(a.Started) {
						t.Fatalf("half-written attempt %+v", a)
					}
					if want := "ok"; strings.HasPrefix(a.Sample, "d") || a.Status == "passed" {
						if a.Answer != want {
							t.Fatalf("attempt %s/%s answer %q", a.Task, a.Sample, a.Answer)
						}
					}
					judged++
				}
			}
			db.Close()
			crashIntegrity(t, rec)

			t.Logf("%d of %d attempts were published before the kill", judged, total)

			// Re-run: completes the set, carrying exactly what was judged.
			_ = os.Remove(flag)
			out, code := steward(t, dir, "launch")
			c := crashCounts(out)
			if c == nil || c[0] != total || c[1] != judged || c[4]+c[5] != total || c[6] != 0 {
				t.Fatalf("re-run (exit %d) after %d judged attempts were published:\n%s", code, judged, out)
			}
			if code != 1 { // some samples fail by design
				t.Fatalf("re-run exit %d:\n%s", code, out)
			}
			if killedRun == "" {
				return
			}
			// Exactly the attempts judged before the kill were carried from it.
			db, err = record.Open(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			runs, _ = db.Runs(ctx)
			carried := 0
			for _, r := range runs {
				if r.ID == killedRun {
					continue
				}
				as, err := db.Attempts(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range as {
					if a.CarriedFrom == killedRun {
						carried++
					}
				}
			}
			db.Close()
			if carried != judged {
				t.Fatalf("the re-run carried %d attempts from the killed run, %d were judged", carried, judged)
			}
			// Nothing of the killed run is left running.
			if pids := crashProcs(killedRun); len(pids) > 0 {
				for _, p := range pids {
					_ = syscall.Kill(-p, syscall.SIGKILL)
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Errorf("processes of the killed run's local sandboxes still run after the next launch: %v "+
					"(the local provider does not tie a sandbox's process group to the supervisor's life)", pids)
			}
			if useDocker {
				for _, what := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
					args := append(what, "--filter", "label="+sandbox.LabelRun+"="+killedRun)
					left, err := exec.Command("docker", args...).Output()
					if err != nil || len(bytes.TrimSpace(left)) > 0 {
						t.Fatalf("docker %v of the killed run left after the next launch: %q %v", what, left, err)
					}
				}
			}
		})
	}
}
