// Package kubetest gives tests a real single-node Kubernetes cluster: the one
// .ci/run started (.ci/kube/start.sh; found through its kubeconfig), or one
// this package starts from the cached binaries and stops when the test
// binary ends (call Main from TestMain). When no cluster can run it fails the
// test under CI=true and skips it otherwise, like the Docker tests.
package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/steward-evals/steward/internal/testlock"
)

// Cluster is a running test cluster.
type Cluster struct {
	Kubeconfig string
	Namespace  string
	Node       string
	// Busybox is an image on the node: busybox-static FROM scratch.
	Busybox string
	Config  *rest.Config
	Client  k8s.Interface
	// containerd socket of the cluster (for image imports).
	ctrSock string
}

var (
	once    sync.Once
	cluster *Cluster
	err     error
	// users is the KubeUsers lock, held shared while this binary may use the
	// cluster (test binaries run side by side, internal/testlock).
	users *os.File
)

// settings read from .ci/kube/env.sh's defaults (overridable by the same variables).
func setting(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Root is the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

func script(name string) string { return filepath.Join(Root(), ".ci", "kube", name) }

func kubeDir() string { return setting("STEWARD_KUBE_DIR", "/tmp/steward-kube") }

// startedMark, when it exists, says a test binary started the cluster (not
// .ci/run): the last test binary using it stops it.
func startedMark() string { return strings.TrimSuffix(kubeDir(), "/") + ".started-by-tests" }

func up() (*Cluster, error) {
	u, lerr := testlock.Acquire(testlock.KubeUsers, false, nil)
	if lerr != nil {
		return nil, lerr
	}
	users = u
	dir := kubeDir()
	c := &Cluster{
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		Namespace:  setting("STEWARD_KUBE_NAMESPACE", "steward-test"),
		Node:       setting("STEWARD_KUBE_NODE", "steward-node"),
		Busybox:    "steward.local/busybox:1",
		ctrSock:    filepath.Join(dir, "containerd", "containerd.sock"),
	}
	if !c.ready() {
		// Not started by .ci/run: start it (binaries must be cached by build.sh).
		cmd := exec.Command(script("start.sh"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("start the test cluster (.ci/kube/start.sh; build the binaries first with .ci/kube/build.sh): %v\n%s", err, out.String())
		}
		// Another process may have started it meanwhile: then it is already marked.
		if !strings.Contains(out.String(), "already running") {
			if err := os.WriteFile(startedMark(), []byte("kubetest\n"), 0o644); err != nil {
				return nil, err
			}
		}
		if !c.ready() {
			return nil, fmt.Errorf("the test cluster started but does not answer")
		}
	}
	return c, nil
}

func (c *Cluster) ready() bool {
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		return false
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return false
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, c.Namespace, metav1.GetOptions{}); err != nil {
		return false
	}
	c.Config, c.Client = rc, cs
	return true
}

// Get returns the cluster, failing (CI=true) or skipping the test when none
// can run. The test holds the cluster alone until it ends
// (testlock.Exclusive on testlock.Kube; tests of other packages and
// worktrees wait): the node has two CPUs and a test's pods request up to one
// each, sweeps remove other runs' dead pods, a quota bounds the namespace,
// and the end-to-end test fails on any pod that appears during its run.
// Parallel tests that call Get take turns. The test holds the Docker test
// lock shared too (images are built with Docker).
func Get(t testing.TB) *Cluster {
	t.Helper()
	testlock.Exclusive(t, testlock.Kube)
	testlock.Shared(t, testlock.Docker)
	once.Do(func() { cluster, err = up() })
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kubernetes test cluster required under CI=true: %v", err)
		}
		t.Skipf("no kubernetes test cluster: %v", err)
	}
	return cluster
}

// Main runs the tests and, when a test binary started the cluster and no
// other one still uses it, stops it.
func Main(m *testing.M) int {
	code := m.Run()
	if users == nil {
		return code // this binary never used the cluster
	}
	users.Close()
	if _, err := os.Stat(startedMark()); err != nil {
		return code // .ci/run started it (or nobody did): not ours to stop
	}
	last, err := testlock.TryAcquire(testlock.KubeUsers, true)
	if err != nil || last == nil {
		return code // another test binary still uses it: the last one stops it
	}
	defer last.Close()
	out, err := exec.Command(script("stop.sh")).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: stop the cluster: %v\n%s", err, out)
	}
	os.Remove(startedMark())
	return code
}

// ImportImage builds dir (a Dockerfile context, FROM scratch) with Docker as
// ref and imports it into the cluster's containerd (pods use imagePullPolicy Never).
func (c *Cluster) ImportImage(t testing.TB, dir, ref string) {
	t.Helper()
	tarPath := filepath.Join(t.TempDir(), "image.tar")
	for _, args := range [][]string{
		{"docker", "build", "-q", "-t", ref, dir},
		{"docker", "save", "-o", tarPath, ref},
		{"ctr", "-a", c.ctrSock, "-n", "k8s.io", "images", "import", tarPath},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
}

// GoBinary builds (args: "build" PKG or "test" "-c" PKG) a static binary and returns its path.
func GoBinary(t testing.TB, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "steward")
	cmd := exec.Command("go", append(append(append([]string(nil), args[:len(args)-1]...), "-trimpath", "-o", out), args[len(args)-1])...)
	cmd.Dir = Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// BinaryImage imports an image FROM scratch holding bin at /steward (plus
// busybox and /tmp, /work when withShell).
func (c *Cluster) BinaryImage(t testing.TB, bin, ref string, withShell bool) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "steward"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	df := "FROM scratch\nCOPY steward /steward\n"
	if withShell {
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
			t.Fatal(err)
		}
		df += "COPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nRUN [\"/bin/busybox\", \"mkdir\", \"-p\", \"/tmp\", \"/work\"]\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ImportImage(t, dir, ref)
}

// WaitNamespaceDeleted waits for the watch event that says namespace name is
// gone (the namespace controller emptied and removed it); it fails the test
// when that has not happened within bound.
func (c *Cluster) WaitNamespaceDeleted(t testing.TB, name string, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		ns, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("namespace %s not deleted within %s: %v", name, bound, err)
		}
		w, err := c.Client.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: ns.ResourceVersion,
		})
		if err != nil {
			t.Fatalf("namespace %s not deleted within %s (phase %s): %v", name, bound, ns.Status.Phase, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			t.Fatalf("namespace %s not deleted within %s (phase %s, conditions %v)", name, bound, ns.Status.Phase, ns.Status.Conditions)
		}
		// the API server closed the watch: look again
	}
}

// WaitPodDeleted waits for the watch event that says pod name in namespace
// ns is gone (the kubelet confirmed its end and the API server removed it);
// it fails the test when that has not happened within bound.
func (c *Cluster) WaitPodDeleted(t testing.TB, ns, name string, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	pods := c.Client.CoreV1().Pods(ns)
	for {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("pod %s/%s not deleted within %s: %v", ns, name, bound, err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			t.Fatalf("pod %s/%s not deleted within %s (phase %s): %v", ns, name, bound, pod.Status.Phase, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			t.Fatalf("pod %s/%s not deleted within %s (phase %s)", ns, name, bound, pod.Status.Phase)
		}
		// the API server closed the watch: look again
	}
}
