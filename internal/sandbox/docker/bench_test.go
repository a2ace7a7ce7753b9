package docker

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

const benchConcurrency = 4

// parallel runs n jobs on benchConcurrency workers and returns jobs per second.
func parallel(b *testing.B, n int, job func(i int) error) float64 {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for w := 0; w < benchConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := job(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return float64(n) / time.Since(start).Seconds()
}

// cliRun is the baseline: `docker run --rm` with the same image, limits and network.
func cliRun(s sandbox.Spec, netName string) error {
	cmd := exec.Command("docker", "run", "--rm", "--network", netName, "--init",
		"--cpus", fmt.Sprint(s.CPUs), "--memory", fmt.Sprint(s.Memory), "--pids-limit", fmt.Sprint(s.PIDs),
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--label", "dev.steward.managed=true",
		s.Image, "/bin/sh", "-c", "echo hi")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "hi\n" {
		return fmt.Errorf("docker run: %v: %s", err, out)
	}
	return nil
}

func benchSetup(b *testing.B) (*testRun, sandbox.Spec) {
	r := newRun(b, nil)
	s := spec(b, "bench")
	prepare(b, r, &s)
	return r, s
}

// BenchmarkDockerSandbox: create → exec → remove per second at concurrency 4,
// against a `docker run --rm` command-line loop at the same concurrency.
func BenchmarkDockerSandbox(b *testing.B) {
	r, s := benchSetup(b)
	ctx := context.Background()
	b.ResetTimer()
	provider := parallel(b, b.N, func(int) error {
		sb, err := r.P.Create(ctx, s)
		if err != nil {
			return err
		}
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo hi"})
		if err == nil && string(res.Stdout) != "hi\n" {
			err = fmt.Errorf("exec said %q", res.Stdout)
		}
		if cerr := sb.Close(ctx); err == nil {
			err = cerr
		}
		return err
	})
	b.StopTimer()
	cli := parallel(b, b.N, func(int) error { return cliRun(s, r.P.netGW.Name) })
	b.ReportMetric(provider, "sandboxes/s")
	b.ReportMetric(cli, "cli_runs/s")
	b.ReportMetric(provider/cli, "ratio")
}

// BenchmarkDockerSandboxReuse: one attempt = exec + Reset in one of 4 reused
// sandboxes (D2), against the same `docker run --rm` loop.
func BenchmarkDockerSandboxReuse(b *testing.B) {
	r, s := benchSetup(b)
	ctx := context.Background()
	pool := make(chan sandbox.Sandbox, benchConcurrency)
	for i := 0; i < benchConcurrency; i++ {
		pool <- mustCreate(b, r, s)
	}
	b.ResetTimer()
	provider := parallel(b, b.N, func(int) error {
		sb := <-pool
		defer func() { pool <- sb }()
		if err := sb.CopyIn(ctx, []sandbox.File{{Path: "in.txt", Data: []byte("hi\n")}}); err != nil {
			return err
		}
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "cat in.txt"})
		if err == nil && string(res.Stdout) != "hi\n" {
			err = fmt.Errorf("exec said %q", res.Stdout)
		}
		if err != nil {
			return err
		}
		return sb.Reset(ctx)
	})
	b.StopTimer()
	cli := parallel(b, b.N, func(int) error { return cliRun(s, r.P.netGW.Name) })
	b.ReportMetric(provider, "attempts/s")
	b.ReportMetric(cli, "cli_runs/s")
	b.ReportMetric(provider/cli, "ratio")
}

// BenchmarkDockerGrading: one scored attempt in one of 4 reused sandboxes,
// graded as Steward does (settle, a fresh grading container holding a copy
// of the workdir, scorer there, Reset), against the same attempt scored in
// the agent's own sandbox (what Steward did before grading containers).
func BenchmarkDockerGrading(b *testing.B) {
	r, s := benchSetup(b)
	ctx := context.Background()
	pool := make(chan sandbox.Sandbox, benchConcurrency)
	for i := 0; i < benchConcurrency; i++ {
		pool <- mustCreate(b, r, s)
	}
	attempt := func(graded bool) error {
		sb := <-pool
		defer func() { pool <- sb }()
		if _, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo 42 > answer.txt"}); err != nil {
			return err
		}
		judge := sb
		if graded {
			if err := sb.Settle(ctx); err != nil {
				return err
			}
			g, dir, err := sb.Grader(ctx, []sandbox.File{{Path: "check.sh", Data: []byte(`test "$(cat answer.txt)" = 42`)}})
			if err != nil {
				return err
			}
			defer g.Close(ctx)
			judge = g
			_ = dir
		} else if err := sb.CopyIn(ctx, []sandbox.File{{Path: "/opt/steward/scorer/check.sh", Data: []byte(`test "$(cat answer.txt)" = 42`)}}); err != nil {
			return err
		}
		res, err := judge.Exec(ctx, sandbox.ExecSpec{Shell: "sh /opt/steward/scorer/check.sh"})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("scorer exit %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return err
		}
		return sb.Reset(ctx)
	}
	b.ResetTimer()
	graded := parallel(b, b.N, func(int) error { return attempt(true) })
	b.StopTimer()
	inPlace := parallel(b, b.N, func(int) error { return attempt(false) })
	b.ReportMetric(graded, "graded/s")
	b.ReportMetric(inPlace, "in_place/s")
	b.ReportMetric(graded/inPlace, "ratio")
}
