package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

// kubeEvalSet writes an eval set of n samples run by agent in pods of the
// test cluster (provider: kubernetes), against the fake provider at url.
func kubeEvalSet(t *testing.T, c *kubetest.Cluster, dir, url, image, agent string, n int) {
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
		c.Kubeconfig, c.Namespace, c.Node, image))
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
	c := kubetest.Get(t) // alone on the cluster: any pod that appears during the run and stays fails the test
	image := "steward.local/steward-e2e:" + fmt.Sprint(os.Getpid())
	c.BinaryImage(t, exe, image, true)
	fp := fakeprovider.New(fakeprovider.Config{APIKey: rampKey, RPM: 6000, TPM: 10_000_000})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
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
	c := kubetest.Get(t) // alone on the cluster: no other test's sweep takes the killed run's pods first
	image := "steward.local/steward-e2e-kill:" + fmt.Sprint(os.Getpid())
	c.BinaryImage(t, exe, image, true)
	fp := fakeprovider.New(fakeprovider.Config{APIKey: rampKey})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	kubeEvalSet(t, c, dir, url, image, "sleep 1000", 3)
	// The launch and its workers in a process group of their own, all
	// killed at once (a runner that dies): nobody gets to clean up.
	cmd := exec.Command(exe, "launch", "--record", rec)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RAMP_FAKE_KEY="+rampKey, "CI=true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	l := &launched{cmd: cmd, out: &syncBuf{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = l.out, l.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-l.done
		}
	})
	var killed map[string]string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, _, run := history(t, rec)
		killed = map[string]string{}
		for name, r := range runPods(t, c) {
			if run.ID != "" && r == run.ID {
				killed[name] = r
			}
		}
		if len(killed) >= 3 { // the relay and at least two sandboxes
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launch made no pods:\n%s", l.out.String())
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.done
	for name := range killed {
		if _, err := c.Client.CoreV1().Pods(c.Namespace).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatalf("pod %s of the killed run already gone (%v): the test would prove nothing", name, err)
		}
	}
	// The next launch (quick samples) sweeps the dead run first.
	kubeEvalSet(t, c, dir, url, image, "/steward agent chat", 1)
	l2 := startLaunch(t, dir, rec)
	if code := l2.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("second launch exit %d:\n%s", code, l2.out.String())
	}
	for name := range killed {
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := c.Client.CoreV1().Pods(c.Namespace).Get(context.Background(), name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s of the killed run survived the next launch: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
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
		"kubernetes: relay: a pod reached the gateway through the relay",
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
	t.Parallel()
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
