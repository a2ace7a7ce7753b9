package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

const benchConcurrency = 4

// attempts runs n create → exec → close attempts on benchConcurrency workers
// and returns attempts per second.
func attempts(b *testing.B, p sandbox.Provider, s sandbox.Spec, n int) float64 {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for w := 0; w < benchConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)) <= n {
				sb, err := p.Create(ctx, s)
				if err == nil {
					var res sandbox.ExecResult
					res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo hi"})
					if err == nil && string(res.Stdout) != "hi\n" {
						err = fmt.Errorf("exec said %q", res.Stdout)
					}
					if cerr := sb.Close(ctx); err == nil {
						err = cerr
					}
				}
				if err != nil {
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

// BenchmarkKubernetesAttempts: pod attempts (create → exec → delete) per
// second on the test cluster, against the Docker provider's container
// attempts at the same concurrency (4) and limits, side by side.
func BenchmarkKubernetesAttempts(b *testing.B) {
	c := kubetest.Get(b)
	ctx := context.Background()
	n := 8 * b.N
	kp := newProvider(b, c, "bench-"+randomID(3), heldLock(b))
	ks := sandbox.Spec{Task: "bench", Image: c.Busybox, CPUs: 0.5, Memory: 64 << 20}
	dockertest.Client(b)
	dp, err := docker.New(ctx, docker.Options{RunID: "bench-" + randomID(3), LockPath: heldLock(b)})
	if err != nil {
		b.Fatal(err)
	}
	ds := sandbox.Spec{Task: "bench", Build: dockertest.BusyboxContext(b, "kubernetes-bench"), CPUs: 0.5, Memory: 64 << 20, PIDs: 256}
	if err := dp.Prepare(ctx, []*sandbox.Spec{&ds}); err != nil {
		b.Fatal(err)
	}
	defer dp.Finalize(ctx)
	defer kp.Finalize(ctx)
	b.ResetTimer()
	kube := attempts(b, kp, ks, n)
	b.StopTimer()
	dock := attempts(b, dp, ds, n)
	b.ReportMetric(kube, "pod_attempts/s")
	b.ReportMetric(dock, "docker_attempts/s")
	b.ReportMetric(kube/dock, "ratio")
}
