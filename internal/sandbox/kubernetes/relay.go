package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
)

// RelayIdle is how many idle control connections the supervisor keeps open.
const RelayIdle = 16

// relay is the run's relay pod and the port-forward feeding it.
type relay struct {
	pod           string
	podIP         string
	gatewayListen string
	cancel        context.CancelFunc
	done          chan struct{}

	mu        sync.Mutex
	localPort int
}

func (r *relay) stop() {
	r.cancel()
	<-r.done
}

// startRelay creates the relay pod, waits for its address, and starts the
// port-forward and the feed of control connections.
func (p *Provider) startRelay(ctx context.Context) (*relay, error) {
	if p.opts.RelayImage == "" {
		return nil, fmt.Errorf("start gateway relay: no relay image configured (kubernetes.relay_image, or STEWARD_KUBE_RELAY_IMAGE): an image holding a static steward binary at /steward, e.g. the action's image")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start gateway relay: pick a port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := p.opts.RelayCommand
	if len(cmd) == 0 {
		cmd = []string{"/steward", kuberelay.Arg}
	}
	// The control port only on the relay pod's loopback: the port-forward
	// reaches it there (it dials inside the pod's network namespace), pods
	// cannot; a pod on it would be handed other pods' connections.
	control := "127.0.0.1:" + strconv.Itoa(kuberelay.ControlPort)
	ready := []string{cmd[0], kuberelay.ReadyArg, control}
	cmd = append(append([]string(nil), cmd...), ":"+strconv.Itoa(port), control)
	pod := p.relayPod(cmd, ready)
	created, err := p.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("start gateway relay: create pod: %w", err))
	}
	fail := func(err error) (*relay, error) {
		cctx, cancel := cleanupCtx(ctx)
		_ = p.deletePod(cctx, created.Name)
		cancel()
		return nil, fmt.Errorf("start gateway relay: %w", err)
	}
	// Started, not just running: the port-forward must not reach the
	// control port before the relay listens there (a refused connection
	// wedges client-go's port-forward: every later stream times out).
	running, err := p.waitStarted(ctx, created)
	if err != nil {
		return fail(err)
	}
	ip, err := p.podIP(ctx, running)
	if err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &relay{pod: created.Name, podIP: ip.String(), gatewayListen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cancel: cancel, done: make(chan struct{})}
	forwarding := make(chan struct{})
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); p.keepForwarding(rctx, r, forwarding) }()
		select {
		case <-forwarding:
		case <-rctx.Done():
		}
		kuberelay.Feed(rctx, RelayIdle, r.dial, r.gatewayListen, p.log)
		wg.Wait()
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = p.deletePod(dctx, r.pod)
		dcancel()
	}()
	select {
	case <-forwarding:
	case <-ctx.Done():
		r.stop()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		r.stop()
		return nil, sandbox.InfraError(fmt.Errorf("start gateway relay: the port-forward to pod %s did not start", r.pod))
	}
	fmt.Fprintf(p.log, "kubernetes: relay pod %s at %s, fed through a port-forward\n", r.pod, r.podIP)
	return r, nil
}

func (r *relay) dial(ctx context.Context) (net.Conn, error) {
	r.mu.Lock()
	lp := r.localPort
	r.mu.Unlock()
	if lp == 0 {
		return nil, fmt.Errorf("port-forward to relay pod %s not up", r.pod)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lp)))
}

// keepForwarding runs the port-forward to the relay's control port and
// restarts it when the API server drops it, until ctx ends.
func (p *Provider) keepForwarding(ctx context.Context, r *relay, ready chan struct{}) {
	once := sync.Once{}
	for ctx.Err() == nil {
		err := p.forward(ctx, r, func() { once.Do(func() { close(ready) }) })
		if ctx.Err() != nil {
			return
		}
		fmt.Fprintf(p.log, "kubernetes: port-forward to relay %s ended (%v); reopening\n", r.pod, err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (p *Provider) forward(ctx context.Context, r *relay, onReady func()) error {
	rt, upgrader, err := spdy.RoundTripperFor(p.rc)
	if err != nil {
		return err
	}
	u := p.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.ns).Name(r.pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop := make(chan struct{})
	readyCh := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(kuberelay.ControlPort)}, stop, readyCh, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errc:
		return err
	case <-ctx.Done():
		close(stop)
		<-errc
		return ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		<-errc
		return fmt.Errorf("port-forward: no local port: %v", err)
	}
	r.mu.Lock()
	r.localPort = int(ports[0].Local)
	r.mu.Unlock()
	onReady()
	select {
	case err := <-errc:
		r.mu.Lock()
		r.localPort = 0
		r.mu.Unlock()
		return err
	case <-ctx.Done():
		close(stop)
		<-errc
		return ctx.Err()
	}
}

// relayPod is the relay's pod: FROM scratch, no secret, non-root,
// read-only. With ready, the container counts as started once that command
// succeeds (a startup probe: checked every second, for a minute at most,
// and never again after).
func (p *Provider) relayPod(cmd, ready []string) *corev1.Pod {
	pod := p.relayPodSpec(cmd)
	if ready != nil {
		pod.Spec.Containers[0].StartupProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: ready}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 60,
		}
	}
	return pod
}

func (p *Provider) relayPodSpec(cmd []string) *corev1.Pod {
	no, yes := false, true
	uid := int64(65534)
	grace := int64(0)
	res := corev1.ResourceList{corev1.ResourceCPU: quantityCPU(RelayCPUs), corev1.ResourceMemory: quantityMem(RelayMemory)}
	return &corev1.Pod{
		ObjectMeta: p.meta(podName(p.opts.RunID, "relay", randomID(3)), "", "relay", nil),
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeName:                      p.opts.NodeName,
			NodeSelector:                  p.opts.NodeSelector,
			Tolerations:                   p.opts.Tolerations,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "relay", Image: p.opts.RelayImage, ImagePullPolicy: p.opts.ImagePullPolicy,
				Command:   cmd,
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},

				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, Privileged: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// The relay pod's resources (counted against the quota in Capacity).
const (
	RelayCPUs   = 0.2
	RelayMemory = 64 << 20
)
