package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBE_HELPER") == "1" {
		os.Exit(helperMain())
	}
	os.Exit(kubetest.Main(m))
}

// newProvider is a provider on the test cluster for run runID holding lock.
func newProvider(t testing.TB, c *kubetest.Cluster, runID, lock string) *Provider {
	t.Helper()
	p, err := New(context.Background(), Options{
		RunID: runID, LockPath: lock, Kubeconfig: c.Kubeconfig, Namespace: c.Namespace, NodeName: c.Node,
		ImagePullPolicy: corev1.PullNever, Labels: map[string]string{"dev.steward.test": "true"}, Liveness: runlock.Liveness{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func heldLock(t testing.TB) string {
	t.Helper()
	l, err := runlock.Acquire(filepath.Join(t.TempDir(), "run.lock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release() })
	return l.Path()
}

// podGone waits until the API server no longer has the pod (the kubelet confirmed its end).
func podGone(t testing.TB, c *kubetest.Cluster, name string) {
	t.Helper()
	c.WaitPodDeleted(t, c.Namespace, name, 60*time.Second)
}

func TestClusterLifecycleExecCopy(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	p := newProvider(t, c, "life-"+randomID(3), heldLock(t))
	spec := sandbox.Spec{Task: "life", Image: c.Busybox, CPUs: 0.5, Memory: 64 << 20, Env: map[string]string{"TASK_ENV": "from-spec"}}
	if err := p.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[sandbox.LabelRun] != p.opts.RunID || pod.Labels["dev.steward.test"] != "true" || pod.Spec.NodeName != c.Node {
		t.Fatalf("pod labels %v node %q", pod.Labels, pod.Spec.NodeName)
	}

	// exec: stdin, env (spec and per-exec), exit code, stderr apart.
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `read line; echo "got $line $ATT_ENV $TASK_ENV $(pwd)"; echo oops >&2; exit 3`,
		Env: map[string]string{"ATT_ENV": "per-exec"}, Stdin: []byte("input-line\n")})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "got input-line per-exec from-spec /work\n" || string(res.Stderr) != "oops\n" || res.TimedOut || res.OOMKilled {
		t.Fatalf("exec: %+v stdout=%q stderr=%q", res, res.Stdout, res.Stderr)
	}
	// hardening as seen from inside: no capabilities, read-only root, no privilege escalation.
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; touch /rootfile 2>/dev/null && echo root-writable; touch /tmp/ok && echo tmp-writable`})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); !strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") || strings.Contains(out, "root-writable") || !strings.Contains(out, "tmp-writable") {
		t.Fatalf("hardening: %q", out)
	}
	// output cap
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done`, MaxOutput: 100})
	if err != nil || len(res.Stdout) != 100 || !res.Truncated {
		t.Fatalf("cap: %v len=%d %+v", err, len(res.Stdout), res.Truncated)
	}
	// copy in (relative, nested, absolute, mode) and out
	bin := make([]byte, 300<<10)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	// The steward directory (an agent's instruction files) takes files under the read-only root.
	if err := sb.CopyIn(ctx, []sandbox.File{{Path: "a/b/c.txt", Data: []byte("hello\n")}, {Path: "/tmp/x.bin", Data: bin, Mode: 0o700},
		{Path: sb.StewardDir() + "/input.txt", Data: []byte("instruction\n")}}); err != nil {
		t.Fatal(err)
	}
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `cat a/b/c.txt; stat -c %a /tmp/x.bin; cat /opt/steward/input.txt`})
	if string(res.Stdout) != "hello\n700\ninstruction\n" {
		t.Fatalf("after copy in: %q %q", res.Stdout, res.Stderr)
	}
	got, err := sb.CopyOut(ctx, "/tmp/x.bin")
	if err != nil || string(got) != string(bin) {
		t.Fatalf("copy out: %v (%d bytes)", err, len(got))
	}
	if _, err := sb.CopyOut(ctx, "a"); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("copy out of a directory: %v", err)
	}
	if _, err := sb.CopyOut(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("copy out of a missing file: %v", err)
	}
	// reset empties the workdir and kills what was left running; what the
	// sandbox holds outside the workdir (/tmp: a setup's state) stays, as with Docker
	if _, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo state > /tmp/setup-state; touch .hidden; sleep 1000 >/dev/null 2>&1 &`}); err != nil {
		t.Fatal(err)
	}
	if err := sb.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `ls -A; ps -o comm | grep -c sleep; cat /tmp/setup-state`})
	if strings.TrimSpace(string(res.Stdout)) != "0\nstate" {
		t.Fatalf("after reset: %q, want an empty workdir, no process left, /tmp kept", res.Stdout)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
	podGone(t, c, sb.ID())
	if err := p.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClusterLimits(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	p := newProvider(t, c, "lim-"+randomID(3), heldLock(t))
	sb, err := p.Create(ctx, sandbox.Spec{Task: "limits", Image: c.Busybox, CPUs: 0.5, Memory: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	// timeout kills the command and its children; the sandbox carries on
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo started; sleep 1000 & sleep 1000; echo never`, Timeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 137 || string(res.Stdout) != "started\n" {
		t.Fatalf("timeout: %+v %q", res, res.Stdout)
	}
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `ps -o comm | grep -c sleep`})
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("children of a timed-out command survive: %q", res.Stdout)
	}
	// memory limit: OOM kill reported as such
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `x=a; while true; do x="$x$x"; done`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OOMKilled || res.ExitCode != 137 || res.TimedOut {
		t.Fatalf("oom: %+v", res)
	}
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo fine`})
	if err != nil || string(res.Stdout) != "fine\n" || res.OOMKilled {
		t.Fatalf("after oom: %v %+v", err, res)
	}
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `kill -KILL $$`})
	if res.ExitCode != 137 || res.OOMKilled {
		t.Fatalf("plain kill taken for oom: %+v", res)
	}
	// a missing image is the task's error, said plainly
	_, err = p.Create(ctx, sandbox.Spec{Task: "limits", Image: "steward.local/absent:1", CPUs: 0.1, Memory: 32 << 20})
	if err == nil || errors.Is(err, sandbox.ErrInfra) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("missing image: %v", err)
	}
	if err := p.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
}

// An agent in a pod reaches the model only through the relay pod and the
// port-forward the supervisor opened; the real key stays with the gateway.
func TestClusterRelayOfficialSDK(t *testing.T) {
	c := kubetest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const realKey = "sk-real-key-never-in-a-pod-0123456789"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: realKey, RPM: 1000, TPM: 1_000_000})
	upURL, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	gw, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: upURL + "/v1", APIKey: realKey})
	if err != nil {
		t.Fatal(err)
	}
	relayImg, agentImg := "steward.local/relay-test:"+randomID(3), "steward.local/agent-test:"+randomID(3)
	c.BinaryImage(t, kubetest.GoBinary(t, "build", "./internal/sandbox/kubernetes/testdata/relay"), relayImg, false)
	// The agent drives the official SDK, which lives in the sdkcheck module.
	c.BinaryImage(t, kubetest.GoBinary(t, "test", "-C", "sdkcheck", "-tags", "kubeagent", "-c", "./kubeagent"), agentImg, true)

	p := newProvider(t, c, "relay-"+randomID(3), heldLock(t))
	p.opts.RelayImage = relayImg
	ga, err := p.Gateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ga.Listen, "127.0.0.1:") || !ga.Proxied {
		t.Fatalf("the gateway must listen on loopback only, for relayed connections naming their pod: got %+v", ga)
	}
	ln, err := net.Listen("tcp", ga.Listen)
	if err != nil {
		t.Fatal(err)
	}
	go gw.ServeProxied(ctx, ln)
	_, port, _ := net.SplitHostPort(ga.Listen)
	base := "http://" + net.JoinHostPort(ga.Host, port)
	token := gw.Issue("attempt-1", nil)
	env := map[string]string{}
	for _, kv := range gateway.Env(base, token) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	sb, err := p.Create(ctx, sandbox.Spec{Task: "agent", Image: agentImg, Memory: 256 << 20, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	ip, ok := sb.(*Sandbox).GatewayPeer()
	if !ok {
		t.Fatal("the sandbox pod has no address to bind its token to")
	}
	if err := gw.Bind(token, ip); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `/steward -test.run TestAgent -test.v`, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "--- PASS: TestAgent") {
		t.Fatalf("agent in the pod: exit %d\n%s\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if u, _ := gw.Usage(token); u.Requests == 0 {
		t.Fatalf("the gateway saw no request of the attempt: %+v", u)
	}
	if st := fp.Stats(); len(st.APIKeys) != 1 || st.APIKeys[0] != realKey {
		t.Fatalf("upstream saw keys %v, want only the real key (from the gateway)", st.APIKeys)
	}
	// the per-attempt token is the only credential: a revoked one is refused through the relay
	gw.Revoke(token)
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `/steward -test.run TestAgent`, Timeout: time.Minute})
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout)+string(res.Stderr), "401") {
		t.Fatalf("a revoked token still works through the relay: %d %s", res.ExitCode, res.Stdout)
	}
	// nothing of the real key in the pod: environment or files
	res, _ = sb.Exec(ctx, sandbox.ExecSpec{Shell: `env; cat /proc/1/environ`})
	if strings.Contains(string(res.Stdout), realKey) {
		t.Fatal("the real key reached the sandbox pod")
	}
	relayPod := p.relay.pod
	rp, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, relayPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := rp.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || len(rp.Spec.Containers[0].Env) != 0 {
		t.Fatalf("relay pod not hardened or carries env: %+v", rp.Spec)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	podGone(t, c, relayPod)
}

// helperMain is a "run" in a subprocess: it holds a run lock, makes two
// sandbox pods, says READY and waits to be killed.
func helperMain() int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Println("ERR", err); return 1 }
	lock, err := runlock.Acquire(os.Getenv("HELPER_LOCK"))
	if err != nil {
		return fail(err)
	}
	defer lock.Release() // keeps the lock reachable: a collected *os.File would close and unlock it
	p, err := New(ctx, Options{RunID: os.Getenv("HELPER_RUN"), LockPath: lock.Path(), Kubeconfig: os.Getenv("HELPER_KUBECONFIG"), Liveness: runlock.Liveness{},
		Namespace: os.Getenv("HELPER_NS"), NamespacePerRun: os.Getenv("HELPER_PER_RUN") == "1", NodeName: os.Getenv("HELPER_NODE"), ImagePullPolicy: corev1.PullNever})
	if err != nil {
		return fail(err)
	}
	for i := 0; i < 2; i++ {
		sb, err := p.Create(ctx, sandbox.Spec{Task: "leaky", Image: os.Getenv("HELPER_IMAGE"), Memory: 32 << 20, CPUs: 0.1})
		if err != nil {
			return fail(err)
		}
		if _, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "sleep 1000 >/dev/null 2>&1 &"}); err != nil {
			return fail(err)
		}
	}
	fmt.Println("READY")
	time.Sleep(10 * time.Minute) // the behaviour under test: a live run that the test SIGKILLs
	return 0
}

func TestClusterSweepAfterSIGKILL(t *testing.T) {
	c := kubetest.Get(t) // alone on the cluster: no other sweep takes this one's pods
	ctx := context.Background()
	// A live run in this process, alive throughout: the sweep must keep its pod.
	live := newProvider(t, c, "live-"+randomID(3), heldLock(t))
	liveSB, err := live.Create(ctx, sandbox.Spec{Task: "live", Image: c.Busybox, CPUs: 0.1, Memory: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer liveSB.Close(ctx)

	deadRunID := "dead-" + randomID(3)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "KUBE_HELPER=1", "HELPER_RUN="+deadRunID, "HELPER_LOCK="+filepath.Join(t.TempDir(), "dead.lock"),
		"HELPER_KUBECONFIG="+c.Kubeconfig, "HELPER_NS="+c.Namespace, "HELPER_NODE="+c.Node, "HELPER_IMAGE="+c.Busybox)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "READY" {
			ready = true
			break
		}
		t.Log(sc.Text())
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("helper run did not get ready")
	}
	sel := sandbox.LabelRun + "=" + deadRunID
	pods, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("helper pods: %v %d", err, len(pods.Items))
	}
	// Sweeping while the run lives removes nothing of it.
	sweeper := newProvider(t, c, "sweeper-"+randomID(3), heldLock(t))
	res, err := sweeper.Sweep(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r == deadRunID || r == live.opts.RunID {
			t.Fatalf("swept a live run: %+v", res)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	res, err = sweeper.Sweep(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pods < 2 {
		t.Fatalf("sweep after SIGKILL removed %d pods: %+v", res.Pods, res)
	}
	for _, p := range pods.Items {
		podGone(t, c, p.Name)
	}
	if _, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, liveSB.ID(), metav1.GetOptions{}); err != nil {
		t.Fatalf("the live run's pod was removed: %v", err)
	}
}

// The budget comes from the namespace's ResourceQuota when one bounds it, and
// the PLAN source names it. (The test cluster has no quota controller: the
// test writes the quota's status as the controller would.)
func TestClusterQuotaCapacity(t *testing.T) {
	c := kubetest.Get(t) // alone on the cluster: the quota bounds every pod in the namespace
	ctx := context.Background()
	p := newProvider(t, c, "quota-"+randomID(3), heldLock(t))
	spec := []sandbox.Spec{{Task: "q", Image: c.Busybox, CPUs: 0.5, Memory: 64 << 20}}
	before, err := p.Capacity(ctx, spec)
	if err != nil || before.Limit != 0 || before.Source != SourceUnlimited {
		t.Fatalf("without a quota: %+v %v", before, err)
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "steward-test-" + randomID(3)},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": quantityCPU(2), "pods": quantityCPU(10)}},
	}
	q, err = c.Client.CoreV1().ResourceQuotas(c.Namespace).Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Client.CoreV1().ResourceQuotas(c.Namespace).Delete(context.Background(), q.Name, metav1.DeleteOptions{})
	q.Status.Hard = q.Spec.Hard
	q.Status.Used = corev1.ResourceList{"requests.cpu": quantityCPU(0.5), "pods": quantityCPU(1)}
	if _, err := c.Client.CoreV1().ResourceQuotas(c.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Capacity(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// (2 - 0.5 used - 0.2 relay) / 0.5 = 2.6 → 2
	if got.Limit != 2 || !strings.Contains(got.Source, "quota "+c.Namespace+"/"+q.Name+": requests.cpu 2 (used 500m)") {
		t.Fatalf("with a quota: %+v", got)
	}
}

// Bad configuration gets a clear error, not an infrastructure retry.
func TestClusterNewErrors(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	_, err := New(ctx, Options{Kubeconfig: c.Kubeconfig, Namespace: "absent-" + randomID(3)})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, sandbox.ErrInfra) {
		t.Fatalf("missing namespace: %v", err)
	}
	bad := rest.CopyConfig(c.Config)
	bad.BearerToken = "not-the-token"
	_, err = New(ctx, Options{Config: bad, Namespace: c.Namespace})
	if err == nil || !strings.Contains(err.Error(), "refuses this kubeconfig's user") || errors.Is(err, sandbox.ErrInfra) {
		t.Fatalf("bad credentials: %v", err)
	}
	_, err = New(ctx, Options{Kubeconfig: filepath.Join(t.TempDir(), "none.yaml")})
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("missing kubeconfig: %v", err)
	}
}

// Finalize removes what its own provider instance left (a pod never closed),
// and never the pods of another instance of the same run (a worker still running).
func TestClusterFinalizeOwnPodsOnly(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	run, lock := "fin-"+randomID(3), heldLock(t)
	a, b := newProvider(t, c, run, lock), newProvider(t, c, run, lock)
	spec := sandbox.Spec{Task: "fin", Image: c.Busybox, CPUs: 0.1, Memory: 32 << 20}
	left, err := a.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if err := a.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	podGone(t, c, left.ID())
	res, err := other.Exec(ctx, sandbox.ExecSpec{Shell: "echo alive"})
	if err != nil || string(res.Stdout) != "alive\n" {
		t.Fatalf("the other instance's pod was removed: %v %q", err, res.Stdout)
	}
}

// runtimeClassName, nodeSelector and tolerations reach the pod and it runs
// under them; an unknown runtime class is refused with a clear error.
func TestClusterRuntimeClassAndPlacement(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	rcName := "steward-test-" + randomID(3)
	if _, err := c.Client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: rcName}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer c.Client.NodeV1().RuntimeClasses().Delete(context.Background(), rcName, metav1.DeleteOptions{})
	p := newProvider(t, c, "place-"+randomID(3), heldLock(t))
	p.opts.RuntimeClassName = rcName
	p.opts.NodeSelector = map[string]string{"kubernetes.io/hostname": c.Node}
	p.opts.Tolerations = []corev1.Toleration{{Key: "steward.dev/evals", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	sb, err := p.Create(ctx, sandbox.Spec{Task: "place", Image: c.Busybox, CPUs: 0.1, Memory: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	pod, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, sb.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != rcName || pod.Spec.NodeSelector["kubernetes.io/hostname"] != c.Node || len(pod.Spec.Tolerations) == 0 {
		t.Fatalf("pod spec: %+v", pod.Spec)
	}
	if res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo ok"}); err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("exec: %v %q", err, res.Stdout)
	}
	p.opts.RuntimeClassName = "absent-" + randomID(3)
	_, err = p.Create(ctx, sandbox.Spec{Task: "place", Image: c.Busybox})
	if err == nil || !strings.Contains(err.Error(), "RuntimeClass") || errors.Is(err, sandbox.ErrInfra) {
		t.Fatalf("unknown runtime class: %v", err)
	}
	if err := p.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
}

// The agent cannot influence its verdict on a cluster either: Settle leaves
// no process of the agent running (a background job rewriting the answer
// after the agent ended), and the grader is a fresh pod holding a copy of
// the workdir with the scorer's files where the agent never was, and
// without the links the agent planted to reach them or anything else
// outside its workdir.
func TestClusterSettleAndGrader(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	p := newProvider(t, c, "grade-"+randomID(3), heldLock(t))
	spec := sandbox.Spec{Task: "grade", Image: c.Busybox, CPUs: 0.5, Memory: 64 << 20}
	if err := p.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo wrong > answer.txt
(setsid sh -c 'while true; do echo tampered > answer.txt; sleep 0.2; done' >/dev/null 2>&1 &)
ln -s /tmp/steward-scorer/expected peek; ln -s /etc/hostname host; ln -s answer.txt inside; echo started`})
	if err != nil || string(res.Stdout) != "started\n" {
		t.Fatalf("agent: %v %+v", err, res)
	}
	if err := sb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, dir, err := sb.Grader(ctx, []sandbox.File{{Path: "expected", Data: []byte("42\n")}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	if g.ID() == sb.ID() || dir == "" {
		t.Fatalf("grader %s dir %q: want a pod of its own", g.ID(), dir)
	}
	res, err = g.Exec(ctx, sandbox.ExecSpec{Shell: `cat "$D/expected"; for f in peek host inside; do [ -L $f ] && echo "link $f"; done; cat answer.txt`, Env: map[string]string{"D": dir}})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); out != "42\nlink inside\nwrong\n" && out != "42\nlink inside\ntampered\n" {
		t.Fatalf("grader sees %q: want the scorer's file, only the link inside the workdir, the answer", out)
	}
	// Nothing of the agent runs on in its pod: the answer stays as settled.
	before, err := sb.CopyOut(ctx, "answer.txt")
	if err != nil {
		t.Fatal(err)
	}
	res, err = sb.Exec(ctx, sandbox.ExecSpec{Shell: `echo settled > answer.txt; sleep 1; cat answer.txt`})
	if err == nil && string(res.Stdout) != "settled\n" {
		t.Fatalf("a process of the agent ran on after Settle (answer was %q, now %q)", before, res.Stdout)
	}
}

// Each attempt's token works only from its own pod: the relay pod writes a
// PROXY line naming the source pod's IP before any byte of the pod, the
// supervisor passes it on, and the gateway (a proxied listener) binds tokens
// to pod addresses. A pod using another pod's token is refused (401), its
// own works, the grader pod (bound too, for model-graded scorers) can use
// its attempt's token, and a pod that sends a PROXY line of its own naming
// another pod gains nothing (the gateway reads it as a bad request, 400).
// relayedGateway is a run's provider with the test relay image (also the
// sandboxes' gateway client, with busybox) and a real gateway behind its
// relay, against the fake provider: the pod side of every relay test.
type relayedGateway struct {
	p    *Provider
	gw   *gateway.Gateway
	img  string
	addr string // the gateway's address as pods dial it (the relay's)
}

func newRelayedGateway(t *testing.T, ctx context.Context, c *kubetest.Cluster, name string, relayCommand []string) *relayedGateway {
	t.Helper()
	const realKey = "sk-real-key-behind-the-relay-0123456789"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: realKey})
	upURL, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	gw, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: upURL + "/v1", APIKey: realKey})
	if err != nil {
		t.Fatal(err)
	}
	img := "steward.local/relay-" + name + ":" + randomID(3)
	c.BinaryImage(t, kubetest.GoBinary(t, "build", "./internal/sandbox/kubernetes/testdata/relay"), img, true)
	p := newProvider(t, c, name+"-"+randomID(3), heldLock(t))
	p.opts.RelayImage = img
	p.opts.RelayCommand = relayCommand
	t.Cleanup(func() { p.Finalize(context.Background()) })
	ga, err := p.Gateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ga.Proxied {
		t.Fatalf("the kubernetes gateway address is not proxied: %+v", ga)
	}
	ln, err := net.Listen("tcp", ga.Listen)
	if err != nil {
		t.Fatal(err)
	}
	go gw.ServeProxied(ctx, ln)
	_, port, _ := net.SplitHostPort(ga.Listen)
	return &relayedGateway{p: p, gw: gw, img: img, addr: net.JoinHostPort(ga.Host, port)}
}

// A relay that listens seconds after its pod runs (a loaded node) still
// carries every call: the supervisor waits for the pod's startup probe (the
// control port accepts) before its port-forward reaches the port. Before,
// the forward's first connections were refused and client-go's forward
// stayed wedged: every later stream timed out, and every attempt errored
// (seen in CI: TestKubernetesNamespacePerRun, all four attempts).
func TestClusterRelayListensLate(t *testing.T) {
	c := kubetest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRelayedGateway(t, ctx, c, "late", []string{"/steward", "__late", "4s", kuberelay.Arg})
	sb, err := r.p.Create(ctx, sandbox.Spec{Task: "late", Image: r.img, CPUs: 0.1, Memory: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	ip, _ := sb.(*Sandbox).GatewayPeer()
	tok := r.gw.Issue("attempt-late", nil)
	if err := r.gw.Bind(tok, ip); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `/steward __client "$ADDR" "$TOKEN"`,
			Env: map[string]string{"ADDR": r.addr, "TOKEN": tok}, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "status 200") {
			t.Fatalf("call %d through a relay that listened late: %v exit %d %s %s", i+1, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	rp, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, r.p.relay.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pr := rp.Spec.Containers[0].StartupProbe; pr == nil || pr.Exec == nil || len(pr.Exec.Command) < 2 || pr.Exec.Command[1] != kuberelay.ReadyArg {
		t.Fatalf("the relay pod has no startup probe on its control port: %+v", rp.Spec.Containers[0].StartupProbe)
	}
}

func TestClusterTokenBoundToPod(t *testing.T) {
	c := kubetest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newRelayedGateway(t, ctx, c, "bind", nil)
	p, gw, img, addr := r.p, r.gw, r.img, r.addr
	host, port, _ := net.SplitHostPort(addr)

	spec := sandbox.Spec{Task: "bind", Image: img, CPUs: 0.1, Memory: 64 << 20}
	peer := func(sb sandbox.Sandbox) netip.Addr {
		t.Helper()
		ip, ok := sb.(*Sandbox).GatewayPeer()
		pod, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, sb.ID(), metav1.GetOptions{})
		if err != nil || !ok || ip.String() != pod.Status.PodIP {
			t.Fatalf("pod %s: gateway peer %v (%v), pod IP %q: %v", sb.ID(), ip, ok, pod.Status.PodIP, err)
		}
		return ip
	}
	a, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	ipA, ipB := peer(a), peer(b)
	if ipA == ipB {
		t.Fatalf("two pods share the address %v", ipA)
	}
	tokA, tokB := gw.Issue("attempt-a", nil), gw.Issue("attempt-b", nil)
	if err := gw.Bind(tokA, ipA); err != nil {
		t.Fatal(err)
	}
	if err := gw.Bind(tokB, ipB); err != nil {
		t.Fatal(err)
	}
	call := func(sb sandbox.Sandbox, token, forged string) string {
		t.Helper()
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: `/steward __client "$ADDR" "$TOKEN" "$FORGED"`,
			Env: map[string]string{"ADDR": addr, "TOKEN": token, "FORGED": forged}, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("client in pod %s: %v exit %d %s %s", sb.ID(), err, res.ExitCode, res.Stdout, res.Stderr)
		}
		status, _, _ := strings.Cut(string(res.Stdout), "\n")
		return status
	}
	for _, tc := range []struct {
		sb    sandbox.Sandbox
		who   string
		token string
		want  string
	}{
		{a, "pod A with its own token", tokA, "status 200"},
		{b, "pod B with its own token", tokB, "status 200"},
		{b, "pod B with pod A's token", tokA, "status 401"},
		{a, "pod A with pod B's token", tokB, "status 401"},
	} {
		if got := call(tc.sb, tc.token, ""); got != tc.want {
			t.Fatalf("%s: %s, want %s", tc.who, got, tc.want)
		}
	}
	// Nor can a pod pose as the supervisor: the relay's control port (where
	// it hands out sandbox connections, PROXY line and token included)
	// listens on the relay pod's loopback only, which the port-forward reaches.
	ctl := net.JoinHostPort(host, strconv.Itoa(kuberelay.ControlPort))
	if res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `/steward __client "$ADDR" x`, Env: map[string]string{"ADDR": ctl}, Timeout: time.Minute}); err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "refused") {
		t.Fatalf("a pod dialled the relay's control port %s: %v exit %d %s", ctl, err, res.ExitCode, res.Stdout)
	}
	usedA, _ := gw.Usage(tokA)
	// B forges a PROXY line naming A before its request with A's token.
	forged := fmt.Sprintf("PROXY TCP4 %s %s 40000 %s", ipA, host, port)
	if got := call(b, tokA, forged); got != "status 400" {
		t.Fatalf("pod B with a forged PROXY line naming pod A and A's token: %s, want status 400", got)
	}
	if u, _ := gw.Usage(tokA); u.Requests != usedA.Requests {
		t.Fatalf("the forged request was served on pod A's token: %d requests, was %d", u.Requests, usedA.Requests)
	}
	// The grader of A's attempt is a fresh pod with an address of its own:
	// A's token is bound to it too (as the runner does for model-graded
	// scorers), and still to no other pod.
	if err := a.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	g, _, err := a.Grader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	ipG := peer(g)
	if got := call(g, tokA, ""); got != "status 401" {
		t.Fatalf("the grader pod before its binding: %s, want status 401", got)
	}
	if err := gw.Bind(tokA, ipG); err != nil {
		t.Fatal(err)
	}
	if got := call(g, tokA, ""); got != "status 200" {
		t.Fatalf("the grader pod with its attempt's token: %s", got)
	}
	if got := call(b, tokA, ""); got != "status 401" {
		t.Fatalf("pod B with pod A's token after the grader's binding: %s", got)
	}
	if got := call(g, tokB, ""); got != "status 401" {
		t.Fatalf("the grader pod with pod B's token: %s", got)
	}
}
