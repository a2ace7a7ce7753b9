package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

// The idle benchmark's workload (see docs/benchmarks.md, "Kubernetes sandboxes").
const (
	idleCallLatency = 2 * time.Second // the fake provider's time per call
	idleCallsPerRun = 6               // model calls per sample, one after another
	idleRPM         = 180             // 3 calls/s: about 6 calls in flight fill it
	idleWindow      = 120 * time.Second
)

// The fixed pool (also the ramp's ceiling) and the ramp's start:
// STEWARD_BENCH_IDLE_POOL and STEWARD_BENCH_IDLE_RAMP_START, default 72
// and 12 (what this node holds without being the bottleneck itself);
// 200 and 50 are the scale and Steward's default ramp.
var (
	idlePool      = benchEnvInt("STEWARD_BENCH_IDLE_POOL", 72)
	idleRampStart = benchEnvInt("STEWARD_BENCH_IDLE_RAMP_START", 12)
	idleSamples   = max(200, 2*idlePool) // more than either policy finishes in the window
)

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// podLife records when each sandbox pod appeared and went (its watch
// events); seconds integrates the live pods of one run over a window.
type podLife struct {
	mu   sync.Mutex
	born map[string]time.Time
	died map[string]time.Time
	run  map[string]string
}

func watchSandboxLife(b *testing.B, c *kubetest.Cluster) (*podLife, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sel := sandbox.LabelManaged + "=true,dev.steward.role=sandbox"
	l, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		b.Fatal(err)
	}
	// from the list's version (this cluster refuses a watch from "now")
	w, err := c.Client.CoreV1().Pods(c.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	pl := &podLife{born: map[string]time.Time{}, died: map[string]time.Time{}, run: map[string]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if st, isStatus := ev.Object.(*metav1.Status); isStatus && ctx.Err() == nil {
					b.Errorf("pod watch: %s", st.Message)
				}
				continue
			}
			now := time.Now()
			pl.mu.Lock()
			switch ev.Type {
			case watch.Added:
				pl.born[p.Name] = now
				pl.run[p.Name] = p.Labels[sandbox.LabelRun]
			case watch.Deleted:
				pl.died[p.Name] = now
			}
			pl.mu.Unlock()
		}
	}()
	return pl, func() { cancel(); w.Stop(); <-done }
}

func (pl *podLife) seconds(run string, from, to time.Time) (float64, int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	total, n := 0.0, 0
	for name, b := range pl.born {
		if pl.run[name] != run {
			continue // another run's (tests share the namespace)
		}
		e, ok := pl.died[name]
		if !ok || e.After(to) {
			e = to
		}
		if b.Before(from) {
			b = from
		}
		if e.After(b) {
			total += e.Sub(b).Seconds()
			n++
		}
	}
	return total, n
}

type idleResult struct {
	sandboxSec, usefulSec float64
	pods                  int
	served                int64
	limited               int64
	passed, attempts      int
	meanSetpoint          float64
}

func (r idleResult) idlePerUseful() float64 { return (r.sandboxSec - r.usefulSec) / r.usefulSec }

// idleRun launches the workload on the test cluster under one sample
// policy for idleWindow and measures its sandbox-seconds against the
// seconds of model calls the provider served.
func idleRun(b *testing.B, c *kubetest.Cluster, image, fleetExtra, taskExtra string) idleResult {
	b.Helper()
	fp := fakeprovider.New(fakeprovider.Config{APIKey: rampKey, RPM: idleRPM, Interval: 5 * time.Second, BaseLatency: idleCallLatency})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer fp.Close()
	dir := b.TempDir()
	rec := filepath.Join(dir, "rec")
	var sb strings.Builder
	fmt.Fprintf(&sb, "model:\n  upstream: openai\n  name: gpt-fake\n  base_url: %s/v1\n  api_key_env: RAMP_FAKE_KEY\n", url)
	agent := strings.Repeat("/steward agent chat >/dev/null || exit 1; ", idleCallsPerRun-1) + "/steward agent chat"
	fmt.Fprintf(&sb, "tasks:\n  - name: idle\n    sandbox: {provider: kubernetes, image: %q, cpus: 0.01, memory: 64m}\n    agent: '%s'\n    scorer: {match: numeric}\n    timeout: 5m\n%s    samples:\n", image, agent, taskExtra)
	for i := 0; i < idleSamples; i++ {
		fmt.Fprintf(&sb, "      - {id: s%04d, input: \"What is %d+%d?\", target: \"%d\"}\n", i, i, 17, i+17)
	}
	writeFile(b, filepath.Join(dir, "steward.yaml"), sb.String())
	writeFile(b, filepath.Join(dir, "_steward.yaml"), fmt.Sprintf(
		"tend_interval: 2s\n%skubernetes:\n  kubeconfig: %s\n  namespace: %s\n  node_name: %s\n  image_pull_policy: Never\n  relay_image: %q\n",
		fleetExtra, c.Kubeconfig, c.Namespace, c.Node, image))
	pl, stop := watchSandboxLife(b, c)
	defer stop()
	start := time.Now()
	l := startLaunch(b, dir, rec)
	select {
	case err := <-l.done:
		b.Fatalf("launch ended before the window: %v\n%s", err, l.out.String())
	case <-time.After(idleWindow):
	}
	end := time.Now()
	st := fp.Stats()
	_ = l.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-l.done:
	case <-time.After(3 * time.Minute):
		_ = l.cmd.Process.Kill()
		<-l.done
		b.Fatalf("launch did not stop after SIGINT:\n%s", l.out.String())
	}
	r := idleResult{served: st.Succeeded, limited: st.RateLimited}

	// Calls still in flight at the window's end are not counted: at most a
	// few seconds of the useful total.
	r.usefulSec = float64(st.Succeeded) * idleCallLatency.Seconds()
	pts, as, run := history(b, rec)
	r.sandboxSec, r.pods = pl.seconds(run.ID, start, end)
	for _, a := range as {
		r.attempts++
		if a.Status == "passed" {
			r.passed++
		}
	}
	for _, p := range pts {
		r.meanSetpoint += float64(p.Setpoint) / float64(len(pts))
		if p.Decision != "hold" && p.Decision != "fixed" {
			fmt.Fprintf(os.Stderr, "ramp +%3.0fs: %s → %d (connection limit %d, saturated %v): %s\n", p.At.Sub(start).Seconds(), p.Decision, p.Setpoint, p.ConnLimit, p.Saturated, p.Reason)
		}
	}
	if r.usefulSec == 0 {
		b.Fatalf("no model call was served in the window:\n%s", l.out.String())
	}
	return r
}

// BenchmarkKubernetesIdleSandboxSeconds measures, on the real test cluster
// against the fake provider with a rate limit, the sandbox-seconds idle per
// useful sandbox-second of the elastic budget with the ramp (samples_ramp
// [12, 72]) and of a fixed pool of 72 (max_samples: 72), side by side, and
// their ratio. Useful = seconds of model calls the provider served; idle =
// every other second a sandbox pod existed in the window (starting,
// waiting at the gateway, in backoff, the agent's own time).
func BenchmarkKubernetesIdleSandboxSeconds(b *testing.B) {
	c := kubetest.Get(b)
	image := "steward.local/steward-idle:" + fmt.Sprint(os.Getpid())
	c.BinaryImage(b, exe, image, true)
	for i := 0; i < b.N; i++ {
		el := idleRun(b, c, image, fmt.Sprintf("samples_ramp: [%d, %d]\n", idleRampStart, idlePool), "")
		fx := idleRun(b, c, image, "", fmt.Sprintf("    max_samples: %d\n", idlePool))
		limit := float64(idleRPM) / 60 * idleWindow.Seconds()
		b.ReportMetric(el.idlePerUseful(), "elastic_idle/useful")
		b.ReportMetric(fx.idlePerUseful(), "fixed_idle/useful")
		b.ReportMetric(fx.idlePerUseful()/el.idlePerUseful(), "fixed÷elastic")
		b.ReportMetric(float64(el.served)/limit, "elastic_goodput")
		b.ReportMetric(float64(fx.served)/limit, "fixed_goodput")
		for _, x := range []struct {
			name string
			r    idleResult
		}{{fmt.Sprintf("elastic + ramp [%d, %d]", idleRampStart, idlePool), el}, {fmt.Sprintf("fixed %d", idlePool), fx}} {
			fmt.Fprintf(os.Stderr, "| %s | %.0f | %.0f | %.0f | **%.2f** | %d | %.1f | %.0f%% | %d | %d/%d |\n", x.name, x.r.sandboxSec, x.r.usefulSec,
				x.r.sandboxSec-x.r.usefulSec, x.r.idlePerUseful(), x.r.pods, x.r.meanSetpoint, 100*float64(x.r.served)/limit, x.r.limited, x.r.passed, x.r.attempts)
		}
	}
}
