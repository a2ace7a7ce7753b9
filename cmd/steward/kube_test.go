package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

// kubeEvalSet writes an eval set of n samples run by agent in pods of the
// test cluster (provider: kubernetes), against the fake provider at url.
func kubeEvalSet(t *testing.T, c *kubetest.Cluster, dir, url, image, agent string, n int) {
	t.Helper()
	kubeEvalSetIn(t, c, c.Namespace, dir, url, image, agent, n)
}

// kubeEvalSetIn is kubeEvalSet with the pods in namespace (per-run: a namespace per run).
func kubeEvalSetIn(t *testing.T, c *kubetest.Cluster, namespace, dir, url, image, agent string, n int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "model:\n  upstream: openai\n  name: gpt-fake\n  base_url: %s/v1\n  api_key_env: RAMP_FAKE_KEY\n", url)
	fmt.Fprintf(&b, "tasks:\n  - name: arith\n    sandbox: {provider: kubernetes, image: %q, cpus: 0.1, memory: 96m}\n    agent: '%s'\n    scorer: {match: numeric}\n    timeout: 5m\n    samples:\n", image, agent)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "      - {id: s%04d, input: \"What is %d+%d?\", target: \"%d\"}\n", i, i, 17, i+17)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), b.String())
	writeFile(t, filepath.Join(dir, "_steward.yaml"), fmt.Sprintf(
		"samples_ramp: [2, 8]\ntend_interval: 1s\nkubernetes:\n  kubeconfig: %s\n  namespace: %s\n  node_name: %s\n  image_pull_policy: Never\n  relay_image: %q\n",
		c.Kubeconfig, namespace, c.Node, image))
}

// kubeLaunchSetup is what a kubernetes launch test starts from: the cluster
// (held alone: kubetest.Get), the steward binary as the image name:<pid>
// (relay and sandboxes), a fake provider holding rampKey with cfg's limits
// (closed when the test ends), a directory and a record path in it.
func kubeLaunchSetup(t *testing.T, name string, cfg fakeprovider.Config) (c *kubetest.Cluster, image string, fp *fakeprovider.Server, url, dir, rec string) {
	t.Helper()
	c = kubetest.Get(t)
	image = "steward.local/" + name + ":" + fmt.Sprint(os.Getpid())
	c.BinaryImage(t, exe, image, true)
	cfg.APIKey = rampKey
	fp = fakeprovider.New(cfg)
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	dir = t.TempDir()
	return c, image, fp, url, dir, filepath.Join(dir, "rec")
}

// runPods lists the pods a run left in the namespace.
func runPods(t *testing.T, c *kubetest.Cluster) map[string]string {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(c.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Labels[sandbox.LabelRun]
		}
	}
	return out
}

// An eval set with provider: kubernetes runs end to end against the real
// test cluster: agents in pods reach the fake provider only through the
// relay pod and the gateway, the budget is elastic (the ramp governs, the
// PLAN line says so), and the run leaves no pod.
func TestKubernetesLaunchEndToEnd(t *testing.T) {
	t.Parallel()
	// alone on the cluster (kubeLaunchSetup): any pod that appears during the run and stays fails the test
	c, image, fp, url, dir, rec := kubeLaunchSetup(t, "steward-e2e", fakeprovider.Config{RPM: 6000, TPM: 10_000_000})
	const n = 10
	kubeEvalSet(t, c, dir, url, image, "/steward agent chat", n)
	before := runPods(t, c)
	l := startLaunch(t, dir, rec)
	if code := l.wait(t, 10*time.Minute); code != 0 {
		t.Fatalf("launch exit %d:\n%s", code, l.out.String())
	}
	out := l.out.String()
	if !strings.Contains(out, "concurrency unbounded (from kubernetes: unlimited, the ramp governs)") {
		t.Fatalf("PLAN line does not show the elastic budget:\n%s", out)
	}
	pts, as, run := history(t, rec)
	if len(pts) == 0 {
		t.Fatalf("no ramp history: the ramp must govern the elastic budget:\n%s", out)
	}
	for _, p := range pts {
		if p.Setpoint < 2 || p.Setpoint > 8 {
			t.Fatalf("setpoint %d outside samples_ramp [2, 8]:\n%s", p.Setpoint, fmtHistory(pts))
		}
	}
	passed := 0
	for _, a := range as {
		if a.Status == "passed" {
			passed++
		}
	}
	if len(as) != n || passed != n {
		t.Fatalf("%d attempts, %d passed, want %d:\n%s", len(as), passed, n, out)
	}
	if st := fp.Stats(); len(st.APIKeys) != 1 || st.APIKeys[0] != rampKey || st.Succeeded < n {
		t.Fatalf("upstream keys %v succeeded %d", st.APIKeys, st.Succeeded)
	}
	if strings.Contains(out, rampKey) {
		t.Fatal("the real key is in the launch output")
	}
	for name, r := range runPods(t, c) {
		if r == run.ID {
			t.Fatalf("the run left pod %s", name)
		}
		if _, ok := before[name]; !ok {
			t.Fatalf("pod %s appeared during the run and stayed", name)
		}
	}
}

// A launch killed with SIGKILL leaves its pods; the next launch sweeps them
// before it starts (its run lock is free), and leaves nothing itself.
func TestKubernetesKilledLaunchIsSwept(t *testing.T) {
	t.Parallel()
	// alone on the cluster (kubeLaunchSetup): no other test's sweep takes the killed run's pods first
	c, image, _, url, dir, rec := kubeLaunchSetup(t, "steward-e2e-kill", fakeprovider.Config{})
	kubeEvalSet(t, c, dir, url, image, "sleep 1000", 3)
	pw := watchPods(t, c)
	// The launch and its workers all killed at once (a runner that dies):
	// nobody gets to clean up (killGroup).
	l := startKillableLaunch(t, dir, rec)
	// The relay and at least two sandboxes, as the pod watch reports them.
	runID := pw.waitRun(t, 3, 3*time.Minute, l.out)
	l.killGroup(t)
	if _, _, run := history(t, rec); run.ID != runID {
		t.Fatalf("pods of run %s, the record's run is %q", runID, run.ID)
	}
	killed := pw.live(runID)
	for name, ns := range killed {
		if _, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatalf("pod %s of the killed run already gone (%v): the test would prove nothing", name, err)
		}
	}
	// The next launch (quick samples) sweeps the dead run first.
	kubeEvalSet(t, c, dir, url, image, "/steward agent chat", 1)
	l2 := startLaunch(t, dir, rec)
	if code := l2.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("second launch exit %d:\n%s", code, l2.out.String())
	}
	for name, ns := range killed {
		c.WaitPodDeleted(t, ns, name, time.Minute)
	}
	_, _, run2 := history(t, rec)
	for name, r := range runPods(t, c) {
		if r == run2.ID {
			t.Fatalf("the second run left pod %s", name)
		}
	}
}

// `steward doctor` reports the configured cluster: API server and version,
// namespace, the budget, and whether a pod reaches the gateway through the relay.
func TestKubernetesDoctor(t *testing.T) {
	t.Parallel()
	c := kubetest.Get(t)
	image := "steward.local/steward-doctor:" + fmt.Sprint(os.Getpid())
	c.BinaryImage(t, exe, image, false)
	cmd := exec.Command(exe, "doctor")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "STEWARD_KUBE_NAMESPACE="+c.Namespace, "STEWARD_KUBE_NODE="+c.Node,
		"STEWARD_KUBE_RELAY_IMAGE="+image, "STEWARD_KUBE_IMAGE_PULL_POLICY=Never")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	for _, want := range []string{
		"kubernetes: API server https://127.0.0.1:", "(v1.34.3), namespace " + c.Namespace,
		"kubernetes: budget unbounded (kubernetes: unlimited, the ramp governs)",
		"kubernetes: relay: a pod reached the gateway through the relay", ", named by the relay as ",
	} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("doctor output lacks %q:\n%s", want, out)
		}
	}
	for name := range runPods(t, c) {
		if strings.Contains(name, "doctor") {
			t.Fatalf("doctor left pod %s", name)
		}
	}
}

// provider: kubernetes without a relay image, or without any cluster
// configuration, is bad input (exit 2) naming what to set; nothing runs.
func TestKubernetesConfigErrors(t *testing.T) {
	// Not parallel: t.Setenv.
	// The environment wins over the file: a KUBECONFIG (or namespace, node,
	// relay image) of the test run's own would hide the files' errors and
	// send the launch to a real cluster.
	for _, k := range []string{"KUBECONFIG", "STEWARD_KUBE_NAMESPACE", "STEWARD_KUBE_CONTEXT", "STEWARD_KUBE_NODE", "STEWARD_KUBE_RELAY_IMAGE", "STEWARD_KUBE_RUNTIME_CLASS", "STEWARD_KUBE_IMAGE_PULL_POLICY"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), "tasks:\n  - name: t\n    sandbox: {provider: kubernetes, image: busybox}\n    agent: 'echo 1'\n    scorer: {match: exact}\n    samples: [{input: x, target: \"1\"}]\n")
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "kubernetes:\n  namespace: evals\n")
	out, code := steward(t, dir, "launch")
	if code != 2 || !strings.Contains(out, "kubernetes.relay_image") {
		t.Fatalf("no relay image: exit %d\n%s", code, out)
	}
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "kubernetes:\n  relay_image: r\n  kubeconfig: absent.yaml\n")
	out, code = steward(t, dir, "launch")
	if code != 2 || !strings.Contains(out, "kubeconfig") {
		t.Fatalf("no kubeconfig: exit %d\n%s", code, out)
	}
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "kubernetes:\n  image_pull_policy: Sometimes\n")
	out, code = steward(t, dir, "launch")
	if code != 2 || !strings.Contains(out, "_steward.yaml:2") || !strings.Contains(out, "image_pull_policy") {
		t.Fatalf("bad pull policy: exit %d\n%s", code, out)
	}
}

// podWatch records every Steward pod the cluster makes, in any namespace,
// from now until stop: name → namespace and run.
type podWatch struct {
	mu      sync.Mutex
	pods    map[string][2]string
	ending  map[string]bool // pods being deleted or gone
	running map[string]bool // pods seen in phase Running
	changed chan struct{}   // closed (and replaced) on each pod recorded or ending
	stop    func()
}

func watchPods(t *testing.T, c *kubetest.Cluster) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sel := sandbox.LabelManaged + "=true"
	// from a list's version: this cluster's API server refuses a watch from "now"
	// (its etcd cannot report progress: "Too large resource version")
	l, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatch{pods: map[string][2]string{}, ending: map[string]bool{}, running: map[string]bool{}, changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if st, ok := ev.Object.(*metav1.Status); ok && ctx.Err() == nil {
				t.Errorf("pod watch: %s", st.Message)
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pw.mu.Lock()
				if ev.Type == watch.Added {
					pw.pods[p.Name] = [2]string{p.Namespace, p.Labels[sandbox.LabelRun]}
				}
				if p.Status.Phase == corev1.PodRunning {
					pw.running[p.Name] = true
				}
				if ev.Type == watch.Deleted || p.DeletionTimestamp != nil {
					pw.ending[p.Name] = true
				}
				close(pw.changed)
				pw.changed = make(chan struct{})
				pw.mu.Unlock()
			}
		}
	}()
	pw.stop = func() { cancel(); w.Stop(); <-done }
	t.Cleanup(pw.stop)
	return pw
}

// waitRun returns the run that has at least n pods made since the watch
// began running and not being deleted, woken by each pod event; it fails
// the test after bound.
func (pw *podWatch) waitRun(t *testing.T, n int, bound time.Duration, out fmt.Stringer) string {
	t.Helper()
	deadline := time.After(bound)
	for {
		pw.mu.Lock()
		per := map[string]int{}
		for name, nr := range pw.pods {
			if pw.running[name] && !pw.ending[name] {
				per[nr[1]]++
			}
		}
		ch := pw.changed
		pw.mu.Unlock()
		for run, k := range per {
			if run != "" && k >= n {
				return run
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no run made %d pods within %s:\n%s", n, bound, out)
		}
	}
}

// live returns the recorded pods of run not being deleted: name → namespace.
func (pw *podWatch) live(run string) map[string]string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := map[string]string{}
	for name, nr := range pw.pods {
		if nr[1] == run && !pw.ending[name] {
			out[name] = nr[0]
		}
	}
	return out
}

// of returns the recorded pods of run: name → namespace.
func (pw *podWatch) of(run string) map[string]string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := map[string]string{}
	for name, nr := range pw.pods {
		if nr[1] == run {
			out[name] = nr[0]
		}
	}
	return out
}

// With namespace: per-run a launch makes steward-<run>, runs the relay and
// every sandbox pod there, says on the PLAN line that no quota bounds the
// budget, and deletes the namespace at the end (the cluster's namespace
// controller confirms with the namespace's deletion event).
func TestKubernetesNamespacePerRun(t *testing.T) {
	c, image, _, url, dir, rec := kubeLaunchSetup(t, "steward-e2e-ns", fakeprovider.Config{RPM: 6000, TPM: 10_000_000})
	const n = 4
	kubeEvalSetIn(t, c, "per-run", dir, url, image, "/steward agent chat", n)
	pw := watchPods(t, c)
	l := startLaunch(t, dir, rec)
	if code := l.wait(t, 10*time.Minute); code != 0 {
		t.Fatalf("launch exit %d:\n%s", code, l.out.String())
	}
	out := l.out.String()
	if !strings.Contains(out, "concurrency unbounded (from kubernetes: unlimited, the ramp governs (a per-run namespace has no ResourceQuota") {
		t.Fatalf("PLAN line does not say the per-run namespace has no quota:\n%s", out)
	}
	_, as, run := history(t, rec)
	passed := 0
	for _, a := range as {
		if a.Status == "passed" {
			passed++
		}
	}
	if len(as) != n || passed != n {
		t.Fatalf("%d attempts, %d passed, want %d:\n%s", len(as), passed, n, out)
	}
	ns := "steward-" + run.ID
	c.WaitNamespaceDeleted(t, ns, 2*time.Minute)
	pw.stop()
	pods := pw.of(run.ID)
	relays, sandboxes := 0, 0
	for name, pns := range pods {
		if pns != ns {
			t.Fatalf("pod %s of the run in namespace %s, want %s", name, pns, ns)
		}
		if strings.Contains(name, "-relay-") {
			relays++
		} else {
			sandboxes++
		}
	}
	if relays != 1 || sandboxes < 1 {
		t.Fatalf("run's pods %v: want the relay and sandboxes in %s", pods, ns)
	}
}

// A per-run launch killed with SIGKILL leaves its namespace; the next launch
// sweeps it (the run's lock is free): the namespace's deletion event comes.
func TestKubernetesKilledPerRunNamespaceIsSwept(t *testing.T) {
	c, image, _, url, dir, rec := kubeLaunchSetup(t, "steward-e2e-nskill", fakeprovider.Config{})
	kubeEvalSetIn(t, c, "per-run", dir, url, image, "sleep 1000", 2)
	pw := watchPods(t, c)
	l := startKillableLaunch(t, dir, rec)
	runID := pw.waitRun(t, 3, 3*time.Minute, l.out) // the relay and both sandboxes
	l.killGroup(t)
	_, _, run := history(t, rec)
	if run.ID != runID {
		t.Fatalf("pods of run %s, the record's run is %q", runID, run.ID)
	}
	ns := "steward-" + run.ID
	t.Cleanup(func() { _ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if cur, err := c.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil || cur.DeletionTimestamp != nil {
		t.Fatalf("namespace %s of the killed run already going (%v): the test would prove nothing", ns, err)
	}
	kubeEvalSetIn(t, c, "per-run", dir, url, image, "/steward agent chat", 1)
	l2 := startLaunch(t, dir, rec)
	if code := l2.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("second launch exit %d:\n%s", code, l2.out.String())
	}
	c.WaitNamespaceDeleted(t, ns, 2*time.Minute)
	_, _, run2 := history(t, rec)
	c.WaitNamespaceDeleted(t, "steward-"+run2.ID, 2*time.Minute)
}

// Groups and sandbox_reuse on the cluster, through a whole launch: one pod
// per group lane and one for the serial reuse pool, reused by every attempt
// there; between reused attempts the workdir is emptied while the task's
// files are back in every attempt, and what the sandbox's setup (run once
// per pod) and the earlier members wrote outside the workdir (/tmp) stays,
// as with Docker (docs/docker.md, reuse). The scorer runs in a fresh pod
// (none of the lane's /tmp there, a copy of the workdir) and, as a
// model-graded scorer would, reaches the gateway with its attempt's token
// (bound to the grader pod too). The run leaves no pod.
func TestKubernetesGroupsAndReuse(t *testing.T) {
	c, image, fp, url, dir, rec := kubeLaunchSetup(t, "steward-e2e-lanes", fakeprovider.Config{})
	lanesEvalSet(t, c, dir, url, image)
	l := startLaunch(t, dir, rec)
	if code := l.wait(t, 10*time.Minute); code != 0 {
		_, as, _ := history(t, rec)
		for _, a := range as {
			t.Logf("%s/%s: %s %s\n%s", a.Task, a.Sample, a.Status, a.Reason, a.Log)
		}
		t.Fatalf("launch exit %d:\n%s", code, l.out.String())
	}
	_, as, run := history(t, rec)
	pods := map[string]map[string]bool{}
	for _, a := range as {
		if a.Status != "passed" {
			t.Fatalf("%s/%s: %s %s\n%s", a.Task, a.Sample, a.Status, a.Reason, a.Log)
		}
		lane := a.Task
		if a.Task == "lanes" {
			lane += "/" + a.Sample[:1]
		}
		if pods[lane] == nil {
			pods[lane] = map[string]bool{}
		}
		pods[lane][a.Sandbox] = true
	}
	if len(as) != 8 {
		t.Fatalf("%d attempts, want 8", len(as))
	}
	seen := map[string]string{}
	for lane, ps := range pods {
		if len(ps) != 1 {
			t.Fatalf("lane %s ran in %d pods %v, want one (reused)", lane, len(ps), ps)
		}
		for p := range ps {
			if other, ok := seen[p]; ok || !strings.HasPrefix(p, "steward-") {
				t.Fatalf("pod %q of lane %s (also lane %q)", p, lane, other)
			}
			seen[p] = lane
		}
	}
	if len(pods) != 3 {
		t.Fatalf("lanes %v, want lanes/l, lanes/m and pool", pods)
	}
	if st := fp.Stats(); len(st.APIKeys) != 1 || st.APIKeys[0] != rampKey {
		t.Fatalf("upstream keys %v", st.APIKeys)
	}
	for name, r := range runPods(t, c) {
		if r == run.ID {
			t.Fatalf("the run left pod %s", name)
		}
	}
}

// lanesEvalSet writes TestKubernetesGroupsAndReuse's eval set: a task of two
// group lanes and a serial sandbox_reuse task, whose agents report what they
// find in their pod and whose scorer checks it is in a fresh pod.
func lanesEvalSet(t *testing.T, c *kubetest.Cluster, dir, url, image string) {
	t.Helper()
	// The agent reports what it finds: leftovers in the workdir (anything
	// but the task's file and this attempt's sample files), the setup's
	// mark, the lane's log in /tmp, and whether its own token reaches the gateway.
	writeFile(t, filepath.Join(dir, "run.sh"), `left=$(ls -A | grep -v -x -e run.sh -e "mine-$STEWARD_SAMPLE_ID.txt" | tr '\n' ,)
echo "$STEWARD_SAMPLE_ID" >> /tmp/lane.log
touch "left-by-$STEWARD_SAMPLE_ID"
model=no; wget -q -O /tmp/m.json --header "Authorization: Bearer $OPENAI_API_KEY" "$OPENAI_BASE_URL/models" && grep -q '"data"' /tmp/m.json && model=yes
echo "ran $STEWARD_SAMPLE_ID left=[$left] setup=$(cat /tmp/setup.txt) lane=$(tr '\n' , < /tmp/lane.log) model=$model"
`)
	// The scorer, in the grader pod: a fresh pod (no /tmp of the lane), the
	// attempt's workdir copied (its mark is there), the gateway reachable
	// with the attempt's token, and the answer matching the target.
	scorer := `test ! -e /tmp/lane.log && test ! -e /tmp/setup.txt && test -f "left-by-$STEWARD_SAMPLE_ID" && wget -q -O /tmp/g.json --header "Authorization: Bearer $OPENAI_API_KEY" "$OPENAI_BASE_URL/models" && grep -q "\"data\"" /tmp/g.json && echo "$STEWARD_ANSWER" | grep -Eq "$STEWARD_TARGET"`
	var b strings.Builder
	fmt.Fprintf(&b, "model:\n  upstream: openai\n  name: gpt-fake\n  base_url: %s/v1\n  api_key_env: RAMP_FAKE_KEY\ntasks:\n", url)
	for _, task := range []struct{ name, extra, samples string }{
		{"lanes", "    groups: [{name: g1, samples: [l1, l2, l3]}, {name: g2, samples: [m1, m2]}]\n", `      - {id: l1, input: x, target: '^ran l1 left=\[\] setup=ok lane=l1, model=yes$', files: {mine-l1.txt: "data:,1"}}
      - {id: l2, input: x, target: '^ran l2 left=\[\] setup=ok lane=l1,l2, model=yes$', files: {mine-l2.txt: "data:,2"}}
      - {id: l3, input: x, target: '^ran l3 left=\[\] setup=ok lane=l1,l2,l3, model=yes$'}
      - {id: m1, input: x, target: '^ran m1 left=\[\] setup=ok lane=m1, model=yes$'}
      - {id: m2, input: x, target: '^ran m2 left=\[\] setup=ok lane=m1,m2, model=yes$'}
`},
		{"pool", "    sandbox_reuse: true\n    max_samples: 1\n", `      - {id: p1, input: x, target: '^ran p1 left=\[\] setup=ok lane=(p[0-9],)*p1,(p[0-9],)* model=yes$'}
      - {id: p2, input: x, target: '^ran p2 left=\[\] setup=ok lane=(p[0-9],)*p2,(p[0-9],)* model=yes$'}
      - {id: p3, input: x, target: '^ran p3 left=\[\] setup=ok lane=(p[0-9],)*p3,(p[0-9],)* model=yes$'}
`},
	} {
		fmt.Fprintf(&b, "  - name: %s\n    sandbox: {provider: kubernetes, image: %q, cpus: 0.1, memory: 64m}\n    setup: 'echo ok > /tmp/setup.txt'\n    files: {run.sh: run.sh}\n    agent: 'sh run.sh'\n    scorer: {command: '%s'}\n    timeout: 5m\n%s    samples:\n%s",
			task.name, image, scorer, task.extra, task.samples)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), b.String())
	writeFile(t, filepath.Join(dir, "_steward.yaml"), fmt.Sprintf(
		"kubernetes:\n  kubeconfig: %s\n  namespace: %s\n  node_name: %s\n  image_pull_policy: Never\n  relay_image: %q\n",
		c.Kubeconfig, c.Namespace, c.Node, image))
}

// A Harbor dataset on the kubernetes provider: each sample in a pod of its
// own image (docker_image: one the node holds) with a writable root; the
// oracle passes a file task, a task whose shared-mode verifier reads /etc
// as the solution left it and one whose verifier connects to the server
// the solution left running in the background, and the do-nothing agent
// fails all three. (A
// task with environment/Dockerfile is refused at load there: the provider
// builds nothing.)
func TestKubernetesHarborOracleAndDoNothing(t *testing.T) {
	t.Parallel()
	c, image, _, _, dir, rec := kubeLaunchSetup(t, "steward-harbor", fakeprovider.Config{})
	toml := "[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 60\n[environment]\ndocker_image = \"" + image + "\"\ncpus = 0.1\nmemory_mb = 96\nworkdir = \"/app\"\nnetwork_mode = \"no-network\"\n"
	for _, task := range []string{"write-file", "system-state", "background-server"} {
		src := filepath.Join("..", "..", "testdata", "harbor", task)
		td := filepath.Join(dir, "dataset", task)
		for _, f := range []string{"instruction.md", "tests/test.sh", "solution/solve.sh"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(td, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(td, f), string(b))
		}
		extra := ""
		if task == "system-state" {
			extra = "[verifier.env]\nEXPECTED_MODE = \"enabled\"\n"
		}
		writeFile(t, filepath.Join(td, "task.toml"), toml+extra)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), "model: {upstream: mock, name: m}\ntasks:\n  - name: harbor\n    sandbox: {provider: kubernetes}\n    agent: 'true'\n    tasks_from: {harbor: dataset}\n")
	writeFile(t, filepath.Join(dir, "_steward.yaml"), fmt.Sprintf(
		"kubernetes:\n  kubeconfig: %s\n  namespace: %s\n  node_name: %s\n  image_pull_policy: Never\n  relay_image: %q\n", c.Kubeconfig, c.Namespace, c.Node, image))
	out, code := steward(t, dir, "launch", "--record", rec, "--agent", "oracle", "steward.yaml")
	if code != 0 || !strings.Contains(out, "3 passed · 0 failed · 0 errored") {
		t.Fatalf("--agent oracle on kubernetes: exit %d\n%s", code, out)
	}
	out, code = steward(t, dir, "launch", "--record", rec, "steward.yaml")
	if code != 1 || !strings.Contains(out, "0 passed · 3 failed · 0 errored") {
		t.Fatalf("the do-nothing agent on kubernetes: exit %d\n%s", code, out)
	}
}
