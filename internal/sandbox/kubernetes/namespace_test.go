package kubernetes

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

// newPerRun is a provider of run runID (holding lock) in a namespace of its own.
func newPerRun(t testing.TB, c *kubetest.Cluster, runID, lock string) *Provider {
	t.Helper()
	p, err := New(context.Background(), Options{
		RunID: runID, LockPath: lock, Kubeconfig: c.Kubeconfig, NamespacePerRun: true, NodeName: c.Node,
		ImagePullPolicy: corev1.PullNever, Labels: map[string]string{"dev.steward.test": "true"}, Liveness: runlock.Liveness{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// In per-run mode the supervisor's provider makes steward-<run>, labelled
// as Steward's with the run's liveness annotations and nothing secret in it;
// every pod of the run (a worker's too) lands there; a worker's Finalize
// leaves it; the supervisor's deletes it, and the cluster's namespace
// controller removes it with what it held.
func TestClusterNamespacePerRun(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	run := "nsrun-" + randomID(3)
	lock := heldLock(t)
	sup := newPerRun(t, c, run, lock)
	ns := RunNamespace(run)
	if sup.Namespace() != ns {
		t.Fatalf("namespace %q, want %q", sup.Namespace(), ns)
	}
	t.Cleanup(func() { _ = sup.deleteNamespace(context.Background(), ns) })
	spec := sandbox.Spec{Task: "ns", Image: c.Busybox, CPUs: 0.1, Memory: 32 << 20}
	if err := sup.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Prepare made no namespace %s: %v", ns, err)
	}
	if got.Labels[sandbox.LabelManaged] != "true" || got.Labels[sandbox.LabelRun] != run || got.Labels[labelRole] != roleNamespace ||
		got.Annotations[AnnotationLock] != lock || got.Annotations[AnnotationOwner] == "" || got.Annotations[AnnotationLockScope] != Scope() {
		t.Fatalf("namespace labels %v annotations %v", got.Labels, got.Annotations)
	}
	sb, err := sup.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID(), metav1.GetOptions{}); err != nil {
		t.Fatalf("sandbox pod not in %s: %v", ns, err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "echo in-namespace"})
	if err != nil || string(res.Stdout) != "in-namespace\n" {
		t.Fatalf("exec: %v %q", err, res.Stdout)
	}
	// A worker of the same run adopts the namespace; its Finalize leaves it.
	worker := newPerRun(t, c, run, lock)
	if err := worker.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		t.Fatal(err)
	}
	wsb, err := worker.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, wsb.ID(), metav1.GetOptions{}); err != nil {
		t.Fatalf("worker's pod not in %s: %v", ns, err)
	}
	if err := worker.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || cur.DeletionTimestamp != nil {
		t.Fatalf("a worker's Finalize deleted the run's namespace: %v", err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, sb.ID(), metav1.GetOptions{}); err != nil {
		t.Fatalf("a worker's Finalize removed the supervisor's pod: %v", err)
	}
	// Nothing secret was put in the namespace.
	secrets, err := c.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(secrets.Items) != 0 {
		t.Fatalf("secrets in the run's namespace: %v %v", err, secrets)
	}
	// The supervisor's Finalize (its sandbox still open) deletes the namespace.
	if err := sup.Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	c.WaitNamespaceDeleted(t, ns, 2*time.Minute)
}

// A run in a namespace of its own killed with SIGKILL leaves the namespace;
// a sweep keeps it while the run lives and deletes it (with its pods) once
// the run's lock is free.
func TestClusterNamespaceSweptAfterSIGKILL(t *testing.T) {
	c := kubetest.Get(t)
	ctx := context.Background()
	deadRunID := "nsdead-" + randomID(3)
	ns := RunNamespace(deadRunID)
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "KUBE_HELPER=1", "HELPER_RUN="+deadRunID, "HELPER_LOCK="+filepath.Join(t.TempDir(), "dead.lock"),
		"HELPER_KUBECONFIG="+c.Kubeconfig, "HELPER_PER_RUN=1", "HELPER_NODE="+c.Node, "HELPER_IMAGE="+c.Busybox)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
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
		t.Fatal("helper run did not get ready")
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelRun + "=" + deadRunID})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("helper pods in %s: %v %d", ns, err, len(pods.Items))
	}
	// Sweeping while the run lives (from a run with a configured namespace) keeps it.
	sweeper := newProvider(t, c, "nssweeper-"+randomID(3), heldLock(t))
	res, err := sweeper.Sweep(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r == deadRunID {
			t.Fatalf("swept a live run's namespace: %+v", res)
		}
	}
	if cur, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil || cur.DeletionTimestamp != nil {
		t.Fatalf("the live run's namespace is going: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The next run in per-run mode sweeps it before it starts.
	next := newPerRun(t, c, "nsnext-"+randomID(3), heldLock(t))
	res, err = next.Sweep(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Namespaces < 1 {
		t.Fatalf("sweep after SIGKILL deleted no namespace: %+v", res)
	}
	c.WaitNamespaceDeleted(t, ns, 2*time.Minute)
	for _, p := range pods.Items {
		if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
			t.Fatalf("pod %s outlived its namespace", p.Name)
		}
	}
}
