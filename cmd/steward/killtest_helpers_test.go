package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scaffolding shared by the tests that kill a launch (crash_test.go) or its
// supervisor (orphan_test.go) at random points.

// killTrials is how many trials a kill test runs: def, or the whole number
// in the environment variable env.
func killTrials(t *testing.T, env string, def int) int {
	if s := os.Getenv(env); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q", env, s)
		}
		return v
	}
	return def
}

// killSeed is the seed of a kill test's kill points: the clock, or the
// environment variable env (logged, so a failure can be reproduced).
func killSeed(t *testing.T, env string) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(env); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (%s reproduces the kill points)", seed, env)
	return seed
}

// killImage builds the trials' docker image once (a warm-up launch), so
// that docker trials are killed while sandboxes live rather than during the
// build, and removes it when the test ends. It returns the build context.
func killImage(t *testing.T, what string) string {
	imageDir := builtBusybox(t, what)
	warm := t.TempDir()
	writeFile(t, filepath.Join(warm, "steward.yaml"), `
tasks:
  - name: warm
    sandbox: {provider: docker, build: `+imageDir+`, memory: 64m}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: w, input: "", target: ok}]
`)
	if out, code := steward(t, warm, "launch"); code != 0 {
		t.Fatalf("warm-up launch exit %d:\n%s", code, out)
	}
	return imageDir
}

// killSet is a kill trial's eval set: a local task "quick" (exclusive:
// false) of Samples samples, every SlowEvery-th (from the second) a "slow"
// one, every fifth (from the fourth) failing; and, with docker, a task
// "boxed" of DockerSamples samples.
type killSet struct {
	MaxSamples  int
	Agent       string // quick's agent
	Samples     int
	SlowEvery   int
	DockerAgent string
	Docker      int
}

// write writes the eval set to dir/steward.yaml and returns its number of samples.
func (k killSet) write(t *testing.T, dir, imageDir string, withDocker bool) (total int) {
	var b strings.Builder
	fmt.Fprintf(&b, `
tasks:
  - name: quick
    sandbox: {provider: local}
    exclusive: false
    max_samples: %d
    timeout: 2m
    agent: '%s'
    scorer: {match: exact}
    samples:
`, k.MaxSamples, k.Agent)
	for i := 0; i < k.Samples; i++ {
		id, target := fmt.Sprintf("s%02d", i), "ok"
		if i%5 == 3 {
			target = "no" // judged failed
		}
		if i%k.SlowEvery == 1 {
			id = fmt.Sprintf("slow%02d", i)
		}
		fmt.Fprintf(&b, "      - {id: %s, input: ok, target: %s}\n", id, target)
		total++
	}
	if withDocker {
		fmt.Fprintf(&b, `
  - name: boxed
    sandbox: {provider: docker, build: %s, memory: 64m}
    max_samples: 3
    timeout: 2m
    agent: '%s'
    scorer: {match: exact}
    samples:
`, imageDir, k.DockerAgent)
		for i := 0; i < k.Docker; i++ {
			fmt.Fprintf(&b, "      - {id: d%d, input: ok, target: ok}\n", i)
			total++
		}
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), b.String())
	return total
}
