package kubernetes

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/steward-evals/steward/internal/proxyproto"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubetest"
)

// documentedPolicies reads the NetworkPolicies docs/kubernetes.md tells
// users to apply (the YAML block of "Restrict sandbox egress to the relay"),
// so that the test proves the documentation, not a copy of it.
func documentedPolicies(t *testing.T) []*networkingv1.NetworkPolicy {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(kubetest.Root(), "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### Restrict sandbox egress to the relay (NetworkPolicy)")
	if !ok {
		t.Fatal("docs/kubernetes.md has no NetworkPolicy section")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/kubernetes.md: the NetworkPolicy block does not end")
	}
	var out []*networkingv1.NetworkPolicy
	for _, part := range strings.Split(block, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(part), nil, nil)
		if err != nil {
			t.Fatalf("docs/kubernetes.md NetworkPolicy: %v\n%s", err, part)
		}
		np, ok := obj.(*networkingv1.NetworkPolicy)
		if !ok {
			t.Fatalf("docs/kubernetes.md: %T in the NetworkPolicy block", obj)
		}
		out = append(out, np)
	}
	if len(out) != 2 {
		t.Fatalf("docs/kubernetes.md: %d NetworkPolicies, want the sandboxes' and the relay's", len(out))
	}
	return out
}

// The NetworkPolicies docs/kubernetes.md documents, applied in a run's
// namespace on the test cluster (kube-router enforces them), confine a
// sandbox pod: it reaches the relay (and through it the gateway) and
// nothing else — not another pod of the namespace that it reached a moment
// before the policies went in.
func TestClusterNetworkPolicyConfinesSandbox(t *testing.T) {
	c := kubetest.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	relayImg := "steward.local/relay-netpol:" + randomID(3)
	// one image for the relay and the sandbox: the test relay binary (which
	// also fetches URLs) and busybox
	c.BinaryImage(t, kubetest.GoBinary(t, "build", "./internal/sandbox/kubernetes/testdata/relay"), relayImg, true)
	run := "netpol-" + randomID(3)
	p := newPerRun(t, c, run, heldLock(t))
	p.opts.RelayImage = relayImg
	defer p.Finalize(context.Background())
	ns := p.Namespace()
	spec := sandbox.Spec{Task: "confined", Image: relayImg, CPUs: 0.05, Memory: 32 << 20}
	if err := p.Prepare(ctx, []*sandbox.Spec{&spec}); err != nil {
		t.Fatal(err)
	}

	// the gateway stand-in, reached only through the relay
	ga, err := p.Gateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ga.Listen)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "via-relay\n") }), ReadHeaderTimeout: 10 * time.Second}
	// the gateway's address is proxied: each connection opens with the
	// relay's PROXY line, which the stand-in reads before serving HTTP
	go srv.Serve(proxyproto.Listener{Listener: ln})
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ga.Listen)
	relayURL := "http://" + net.JoinHostPort(ga.Host, port) + "/"

	// a pod the policies do not name, serving HTTP in the same namespace
	no := false
	grace := int64(0)
	target, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "target", Labels: map[string]string{"app": "target"}},
		Spec: corev1.PodSpec{
			NodeName: c.Node, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "httpd", Image: c.Busybox, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", "mkdir -p /tmp/www && echo target > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := p.waitRunning(ctx, target)
	if err != nil || cur.Status.PodIP == "" {
		t.Fatalf("target pod address: %v", err)
	}
	targetURL := "http://" + net.JoinHostPort(cur.Status.PodIP, "8080") + "/"

	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	fetch := func(url string) (string, bool) {
		res, err := sb.Exec(ctx, sandbox.ExecSpec{Shell: "/steward fetch " + url, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Logf("fetch %s: exit %d: %s", url, res.ExitCode, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout)), res.ExitCode == 0
	}
	// Without the policies the sandbox reaches both: what follows is the policies' doing.
	if got, ok := fetch(targetURL); !ok || got != "target" {
		t.Fatalf("before the policies the sandbox must reach the target pod: %q %v", got, ok)
	}
	if got, ok := fetch(relayURL); !ok || got != "via-relay" {
		t.Fatalf("before the policies the sandbox must reach the gateway through the relay: %q %v", got, ok)
	}

	policies := documentedPolicies(t)
	for _, np := range policies {
		np.Namespace = ns
		if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The enforcer applies policies asynchronously: wait (bounded) until the
	// target is refused, then check both paths.
	blocked := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		if _, ok := fetch(targetURL); !ok {
			blocked = true
			break
		}
	}
	if !blocked {
		t.Fatal("the documented policies never blocked the sandbox from another pod: is the cluster's NetworkPolicy enforcer (kube-router, .ci/kube/start.sh) running?")
	}
	for i := 0; i < 3; i++ {
		if got, ok := fetch(targetURL); ok {
			t.Fatalf("the sandbox reached the target pod under the policies: %q", got)
		}
		if got, ok := fetch(relayURL); !ok || got != "via-relay" {
			t.Fatalf("under the policies the sandbox no longer reaches the gateway through the relay: %q %v", got, ok)
		}
	}
	// Without the sandboxes' policy the target answers again: it was the
	// policy that refused, not a target gone away.
	if err := c.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, policies[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); ; {
		if got, ok := fetch(targetURL); ok && got == "target" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the target pod stayed unreachable after the sandboxes' policy was deleted")
		}
	}
}
