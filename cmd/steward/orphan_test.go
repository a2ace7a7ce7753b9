package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
)

// orphanTrials is how many times TestSupervisorGoneWorkersCleanUp kills a
// supervisor (at least 25, the acceptance); STEWARD_ORPHAN_TRIALS overrides it.
func orphanTrials(t *testing.T) int { return killTrials(t, "STEWARD_ORPHAN_TRIALS", 25) }

// orphanEvalSet: a local task whose agents leave a grandchild that escapes
// their process group (setsid) and whose "slow" samples sleep while FLAG
// exists; with withDocker, a docker task too.
func orphanEvalSet(t *testing.T, dir, flag, imageDir string, withDocker bool) (total int) {
	return killSet{
		MaxSamples: 4, Samples: 16, SlowEvery: 4, Docker: 4,
		Agent:       `setsid sleep 300 </dev/null >/dev/null 2>&1 & case "$STEWARD_SAMPLE_ID" in slow*) if [ -f ` + flag + ` ]; then sleep 60; fi;; esac; sleep 0.05; echo "$STEWARD_INPUT"`,
		DockerAgent: `if [ "$STEWARD_SAMPLE_ID" = d0 ]; then sleep 8; fi; sleep 0.3; echo "$STEWARD_INPUT"`,
	}.write(t, dir, imageDir, withDocker)
}

// workersIn lists steward worker processes whose working directory is dir.
func workersIn(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !bytes.Contains(cmdline, []byte("__worker")) {
			continue
		}
		if cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); cwd == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// orphanLeftovers lists what a killed run still has: worker processes, sandbox
// processes (local agents and their escaped grandchildren), local sandbox
// directories, docker containers and networks.
func orphanLeftovers(dir, tmp, runID string, withDocker bool) []string {
	var left []string
	if w := workersIn(dir); len(w) > 0 {
		left = append(left, fmt.Sprintf("worker processes %v", w))
	}
	if runID != "" {
		if p := crashProcs(runID); len(p) > 0 {
			left = append(left, fmt.Sprintf("sandbox processes %v", p))
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		left = append(left, fmt.Sprintf("temp dirs %v", names))
	}
	if withDocker && runID != "" {
		for _, what := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
			args := append(append([]string{}, what...), "--filter", "label="+sandbox.LabelRun+"="+runID)
			out, err := exec.Command("docker", args...).Output()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				left = append(left, fmt.Sprintf("docker %s: %q %v", what[0], bytes.Fields(out), err))
			}
		}
	}
	return left
}

// Supervisor gone, however (SIGKILL of the supervisor alone, of its whole
// process group, or a SIGHUP it does not handle): within 10 s and without
// another launch, every worker has removed its sandboxes, temp dirs, docker
// containers and networks and the whole agent process tree (grandchildren
// that left their process group included); the next launch loses and
// duplicates nothing.
func TestSupervisorGoneWorkersCleanUp(t *testing.T) {
	t.Parallel()
	seed := killSeed(t, "STEWARD_ORPHAN_SEED")
	rng := rand.New(rand.NewPCG(seed, 11))
	withDocker := crashDockerReady(t)
	var imageDir string
	if withDocker {
		imageDir = killImage(t, "cmd/steward orphan tests")
	}
	modes := []string{"SIGKILL supervisor", "SIGKILL process group", "SIGHUP supervisor"}
	var worst time.Duration
	var clean, withRun, dockerTrials int
	trials := orphanTrials(t)
	for trial := 0; trial < trials; trial++ {
		useDocker := withDocker && trial%6 == 5
		mode := modes[(trial+trial/6)%len(modes)]                 // docker trials (every sixth) get every mode too
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond // from before the run is recorded to all slots busy
		if useDocker {
			delay = time.Duration(2500+rng.IntN(3000)) * time.Millisecond
			dockerTrials++
		}
		t.Run(fmt.Sprintf("trial%02d", trial), func(t *testing.T) {
			dir := t.TempDir()
			tmp := filepath.Join(t.TempDir(), "tmp")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			flag := filepath.Join(dir, "slow.flag")
			writeFile(t, flag, "")
			total := orphanEvalSet(t, dir, flag, imageDir, useDocker)
			cmd := exec.Command(exe, "launch")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "STEWARD_IN_CONTAINER=0", "TMPDIR="+tmp)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var first bytes.Buffer
			cmd.Stdout, cmd.Stderr = &first, &first
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay) // a random kill point, not synchronisation
			switch mode {
			case "SIGKILL supervisor":
				_ = cmd.Process.Signal(syscall.SIGKILL)
			case "SIGKILL process group":
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			case "SIGHUP supervisor":
				_ = cmd.Process.Signal(syscall.SIGHUP)
			}
			_ = cmd.Wait()
			killed := time.Now()

			ctx := context.Background()
			rec := filepath.Join(dir, ".steward")
			var runID string
			judged := 0
			if _, err := os.Stat(filepath.Join(rec, record.FileName)); err == nil {
				db, err := record.Open(ctx, rec)
				if err != nil {
					t.Fatalf("reopen the record: %v\n%s", err, first.String())
				}
				runs, _ := db.Runs(ctx)
				if len(runs) == 1 {
					runID = runs[0].ID
					as, _ := db.Attempts(ctx, runID)
					for _, a := range as {
						if a.Status != "passed" && a.Status != "failed" {
							t.Fatalf("the killed run published %s/%s as %s", a.Task, a.Sample, a.Status)
						}
					}
					judged = len(as)
				}
				db.Close()
			}
			// Nothing is left within 10 s: the workers clean up on their own
			// and exit; then what they killed exits too. Both exits are
			// waited on (pidfds), and then nothing may be left.
			deadline := killed.Add(10 * time.Second)
			waitGone(workersIn(dir), deadline)
			if runID != "" {
				waitGone(crashProcs(runID), deadline)
			}
			left := orphanLeftovers(dir, tmp, runID, useDocker)
			took := time.Since(killed)
			if len(left) > 0 {
				for _, p := range append(workersIn(dir), crashProcs(runID)...) {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Fatalf("%s after %v: 10 s later still %v\n%s", mode, delay, left, first.String())
			}
			if runID != "" {
				withRun++
			}
			clean++
			worst = max(worst, took)
			t.Logf("%s after %v (docker %v): %d attempts published, clean %v after the kill", mode, delay, useDocker, judged, took.Round(10*time.Millisecond))

			// The next launch completes the set: nothing lost, nothing twice.
			_ = os.Remove(flag)
			out, code := steward(t, dir, "launch")
			c := crashCounts(out)
			if c == nil || c[0] != total || c[4]+c[5] != total || c[6] != 0 {
				t.Fatalf("re-run (exit %d) after %d attempts were published:\n%s", code, judged, out)
			}
			if c[1] != judged {
				t.Fatalf("the re-run carried %d attempts, %d judged ones were published before the kill (lost or duplicated):\n%s", c[1], judged, out)
			}
			if runID == "" {
				return
			}
			// The next launch marked the killed run crashed and removed its lock.
			db, err := record.Open(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			runs, _ := db.Runs(ctx)
			db.Close()
			for _, r := range runs {
				if r.ID == runID && r.Status != "crashed" {
					t.Fatalf("the killed run is %q after the next launch", r.Status)
				}
			}
			for _, f := range []string{runID + ".lock", runID + ".reserve"} {
				if _, err := os.Stat(filepath.Join(rec, "runs", f)); !os.IsNotExist(err) {
					t.Fatalf("the killed run's %s is left after the next launch: %v", f, err)
				}
			}
		})
	}
	t.Logf("%d trials (%d docker): %d clean within 10 s (%d killed after the run was recorded), slowest cleanup %v", trials, dockerTrials, clean, withRun, worst.Round(10*time.Millisecond))
}
