package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/steward-evals/steward/internal/proxyproto"
	"github.com/steward-evals/steward/internal/sandbox"
)

// ProbeArg makes the steward binary (in the relay image) fetch a URL and
// exit 0 when it answers: the doctor's relay reachability probe.
const ProbeArg = "__kubeprobe"

// Probe GETs url and fails unless it answers 200.
func Probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe %s: status %d", url, resp.StatusCode)
	}
	return nil
}

// Doctor prints what Steward sees of the cluster: the API server and its
// version, the namespace, the sandbox budget its quota allows for a default
// sandbox, and whether a pod reaches the relay (when a relay image is set:
// it starts the relay and a probe pod, and removes both).
func (p *Provider) Doctor(ctx context.Context, w io.Writer) error {
	v, err := p.cs.Discovery().ServerVersion()
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("kubernetes: read the server version: %w", err))
	}
	if p.perRun {
		fmt.Fprintf(w, "kubernetes: API server %s (%s), namespace per run (this probe's: %s)\n", p.rc.Host, v.GitVersion, p.ns)
	} else {
		fmt.Fprintf(w, "kubernetes: API server %s (%s), namespace %s\n", p.rc.Host, v.GitVersion, p.ns)
	}
	switch ok, why, err := p.canCreateNamespaces(ctx); {
	case err != nil:
		fmt.Fprintf(w, "kubernetes: namespaces: cannot tell whether this user may create namespaces: %v\n", err)
	case ok:
		fmt.Fprintln(w, "kubernetes: namespaces: this user may create namespaces (namespace: per-run can be used)")
	default:
		fmt.Fprintf(w, "kubernetes: namespaces: this user may NOT create namespaces: namespace: per-run cannot be used (%s)\n", strings.TrimSpace(why))
	}
	c, err := p.Capacity(ctx, []sandbox.Spec{{}})
	if err != nil {
		fmt.Fprintf(w, "kubernetes: budget: %v\n", err)
	} else if c.Limit > 0 {
		fmt.Fprintf(w, "kubernetes: budget %d default sandboxes (%g CPU, %d MiB) from %s\n", c.Limit, DefaultCPUs, DefaultMemory>>20, c.Source)
	} else {
		fmt.Fprintf(w, "kubernetes: budget unbounded (%s)\n", c.Source)
	}
	if p.opts.RelayImage == "" {
		fmt.Fprintln(w, "kubernetes: relay: no relay_image set: tasks cannot reach the model gateway")
		return nil
	}
	ok, why := p.probeRelay(ctx)
	if ok {
		fmt.Fprintf(w, "kubernetes: relay: a pod reached the gateway through the relay (%s)\n", why)
	} else {
		fmt.Fprintf(w, "kubernetes: relay: NOT reachable from a pod: %s\n", why)
	}
	return p.Finalize(ctx)
}

// probeRelay starts the relay, serves a stand-in gateway on its loopback
// address, and runs a pod that fetches it through the relay; the relay must
// name the probe pod's own address (what the gateway binds tokens to).
func (p *Provider) probeRelay(ctx context.Context) (bool, string) {
	g, err := p.Gateway(ctx)
	if err != nil {
		return false, err.Error()
	}
	ln, err := net.Listen("tcp", g.Listen)
	if err != nil {
		return false, err.Error()
	}
	var named sync.Map // peers the relay named, as the gateway would see them
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			named.Store(ap.Addr(), true)
		}
		io.WriteString(w, "ok\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(proxyproto.Listener{Listener: ln})
	defer srv.Close()
	_, port, _ := net.SplitHostPort(g.Listen)
	url := "http://" + net.JoinHostPort(g.Host, port) + "/"
	pod := p.relayPod([]string{"/steward", ProbeArg, url}, nil)
	pod.Name = podName(p.opts.RunID, "probe", randomID(3))
	pod.Labels[labelRole] = "probe"
	created, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return false, err.Error()
	}
	defer func() {
		cctx, cancel := cleanupCtx(ctx)
		_ = p.deletePod(cctx, created.Name)
		cancel()
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cur, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		switch cur.Status.Phase {
		case corev1.PodSucceeded:
			ip, err := netip.ParseAddr(cur.Status.PodIP)
			if _, ok := named.Load(ip.Unmap()); err != nil || !ok {
				return false, fmt.Sprintf("the relay did not name probe pod %s (%s) as the connection's source: tokens could not be bound to pods", cur.Name, cur.Status.PodIP)
			}
			return true, "pod " + cur.Name + " → " + url + ", named by the relay as " + ip.String()
		case corev1.PodFailed:
			return false, "probe pod failed: " + podWhy(cur)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err().Error()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false, "probe pod did not finish within 2m"
}
