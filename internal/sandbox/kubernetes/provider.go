// Package kubernetes is the Kubernetes sandbox provider: every sandbox is a
// pod (one per attempt, or per lane when a sandbox is reused) created through
// the API server, driven by exec through the API server (client-go
// remotecommand; files go in as a tar stream over exec), with resource
// requests and limits, no privilege escalation, every capability dropped, a
// read-only root with writable emptyDirs for the workdir and /tmp, and the
// model gateway reached through a per-run relay pod that the supervisor
// feeds over a port-forward it opens itself (see relay.go, docs/kubernetes.md).
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Annotation keys: the lock path does not fit a label value, so the liveness
// facts Sweep judges are annotations (the run id and role stay labels so
// that lists can select on them).
const (
	AnnotationLock      = "dev.steward.lock"
	AnnotationLockScope = "dev.steward.lock-scope"
	// AnnotationOwner is the identity of the process that made the pod
	// (sandbox.Liveness.Owner): where its lock path means something.
	AnnotationOwner = "dev.steward.owner"
	AnnotationTask  = "dev.steward.task"
	labelRole       = "dev.steward.role"
	// labelInstance tells apart the provider instances of one run (the
	// supervisor's and each worker's, W1): Finalize removes only its own.
	labelInstance = "dev.steward.instance"
)

// Defaults applied when a spec leaves a limit at zero.
const (
	DefaultCPUs    = 1.0
	DefaultMemory  = 512 << 20
	DefaultWorkdir = "/work"
	// DefaultNamespace is used when none is configured.
	DefaultNamespace = "default"
	// DefaultStartTimeout bounds how long a pod may take to run.
	DefaultStartTimeout = 5 * time.Minute
)

// Options configure a Provider. Config (from the eval set's fleet file and
// the environment) is resolved into these by the CLI.
type Options struct {
	RunID string
	// Liveness judges which runs are dead, for Sweep (injected: the provider
	// knows nothing of run locks); nil = no run is ever proven dead.
	Liveness sandbox.Liveness
	// LockPath is the run's lock file; its absolute path is put in an
	// annotation of everything created, for Sweep.
	LockPath string
	Labels   map[string]string
	Log      io.Writer
	// Kubeconfig is a kubeconfig file; "" = $KUBECONFIG, then the in-cluster
	// config when running in a pod, then ~/.kube/config.
	Kubeconfig string
	Context    string
	// Namespace holds the run's pods ("" = the kubeconfig's, else default).
	Namespace string
	// NamespacePerRun: the run gets a namespace of its own, RunNamespace(RunID),
	// created on first use and deleted by the instance that created it
	// (Namespace is then unused). See NamespacePerRun.
	NamespacePerRun bool
	// ServiceAccountWait bounds the wait for a per-run namespace's default
	// service account (0 = DefaultServiceAccountWait).
	ServiceAccountWait time.Duration
	// NodeName pins pods to a node (clusters without a scheduler).
	NodeName         string
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	RuntimeClassName string
	// ImagePullPolicy: Always, IfNotPresent (default) or Never.
	ImagePullPolicy corev1.PullPolicy
	// WritableRoot turns the read-only root filesystem off (tasks that write outside workdir and /tmp).
	WritableRoot bool
	// RelayImage is an image holding a static steward binary at /steward
	// (the action's image is one); the relay pod runs it. "" = no relay:
	// tasks with network gateway cannot run.
	RelayImage   string
	RelayCommand []string
	// StartTimeout bounds pod start (0 = DefaultStartTimeout).
	StartTimeout time.Duration
	// Getenv reads the environment for KUBECONFIG and in-cluster detection; nil = os.Getenv.
	Getenv func(string) string
	// Config is a ready REST config (tests); nil = from the options above.
	Config *rest.Config
}

// Provider is the Kubernetes sandbox provider.
type Provider struct {
	cs    k8s.Interface
	rc    *rest.Config
	opts  Options
	ns    string
	lock  string
	scope string
	inst  string
	log   io.Writer

	mu      sync.Mutex
	relay   *relay
	gateway *sandbox.GatewayAddr

	// per-run namespace (NamespacePerRun): made once; owned by the instance that made it
	perRun  bool
	nsMu    sync.Mutex
	nsReady bool
	nsOwned bool
}

var _ sandbox.Provider = (*Provider)(nil)

// client-go logs through klog to stderr (e.g. a cancelled exec stream's
// reader ending); Steward reports errors itself, so klog is silenced.
func init() {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

// LoadConfig resolves the REST config: the kubeconfig file named, else
// $KUBECONFIG, else the in-cluster config when running in a pod, else
// ~/.kube/config. It also returns the kubeconfig's namespace ("" if none).
func LoadConfig(kubeconfig, kctx string, getenv func(string) string) (*rest.Config, string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if kubeconfig == "" {
		kubeconfig = getenv("KUBECONFIG")
	}
	if kubeconfig == "" && getenv("KUBERNETES_SERVICE_HOST") != "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("load in-cluster config: %w", err)
		}
		ns, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		return rc, strings.TrimSpace(string(ns)), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = ""
		rules.Precedence = filepath.SplitList(kubeconfig)
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kctx})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns, _, _ := cc.Namespace()
	return rc, ns, nil
}

// New connects to the cluster and checks that the API server answers.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.RunID == "" {
		opts.RunID = randomID(6)
	}
	rc := opts.Config
	ns := opts.Namespace
	if rc == nil {
		var kns string
		var err error
		rc, kns, err = LoadConfig(opts.Kubeconfig, opts.Context, opts.Getenv)
		if err != nil {
			return nil, err
		}
		if ns == "" {
			ns = kns
		}
	}
	if opts.NamespacePerRun {
		ns = RunNamespace(opts.RunID)
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	rc = rest.CopyConfig(rc)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	rc.UserAgent = "steward"
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create kubernetes client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if opts.NamespacePerRun {
		// The namespace is made when the run prepares; what must hold now is
		// that this user may make it.
		p := &Provider{cs: cs}
		ok, why, err := p.canCreateNamespaces(pctx)
		switch {
		case apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("kubernetes API server %s refuses this kubeconfig's user: %w", rc.Host, err)
		case err != nil:
			return nil, sandbox.InfraError(fmt.Errorf("connect to kubernetes API server %s: %w", rc.Host, err))
		case !ok:
			return nil, fmt.Errorf("kubernetes namespace: %s: this kubeconfig's user may not create namespaces on %s (%s): grant it (docs/kubernetes.md, RBAC for per-run namespaces) or configure a namespace", NamespacePerRun, rc.Host, strings.TrimSpace(why))
		}
	} else if _, err := cs.CoreV1().Namespaces().Get(pctx, ns, metav1.GetOptions{}); err != nil {
		if apierrors.IsForbidden(err) {
			// A namespaced Role cannot grant get on namespaces (cluster-scoped):
			// check what the provider needs instead, listing pods there.
			_, err = cs.CoreV1().Pods(ns).List(pctx, metav1.ListOptions{Limit: 1})
		}
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("kubernetes namespace %q does not exist: create it (kubectl create namespace %s) or configure another", ns, ns)
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("kubernetes API server %s refuses this kubeconfig's user in namespace %s (see docs/kubernetes.md for the Role it needs): %w", rc.Host, ns, err)
		default:
			return nil, sandbox.InfraError(fmt.Errorf("connect to kubernetes API server %s: %w", rc.Host, err))
		}
	}
	lock := ""
	if opts.LockPath != "" {
		abs, err := filepath.Abs(opts.LockPath)
		if err != nil {
			return nil, fmt.Errorf("resolve lock path: %w", err)
		}
		lock = abs
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	if opts.ImagePullPolicy == "" {
		opts.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	return &Provider{cs: cs, rc: rc, opts: opts, ns: ns, lock: lock, scope: Scope(), inst: randomID(4), log: log, perRun: opts.NamespacePerRun}, nil
}

// Scope is where this process's lock paths mean something: the host name
// (the pod's name when Steward runs in a pod). Sweep judges a lock path
// only in its own scope, as the Docker provider does.
func Scope() string {
	h, _ := os.Hostname()
	return "host:" + h
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "kubernetes" }

// Namespace is the namespace the provider works in (in per-run mode, the run's, made on first use).
func (p *Provider) Namespace() string { return p.ns }

// Clientset is the provider's client.
func (p *Provider) Clientset() k8s.Interface { return p.cs }

// labelValue makes s a valid label value (63 characters of [A-Za-z0-9._-],
// alphanumeric at both ends).
func labelValue(s string) string {
	s = labelBad.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "_.-")
}

var (
	labelBad = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
	nameBad  = regexp.MustCompile(`[^a-z0-9-]+`)
)

// podName is a DNS-1123 label: steward-<run>-<task>-<rand>.
func podName(parts ...string) string {
	s := nameBad.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-")
	s = strings.Trim(s, "-")
	if len(s) > 54 {
		s = strings.TrimRight(s[:54], "-")
	}
	return "steward-" + s
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// meta is the object metadata of a resource of this run.
func (p *Provider) meta(name, task, role string, extra map[string]string) metav1.ObjectMeta {
	l := map[string]string{}
	for k, v := range p.opts.Labels {
		l[k] = labelValue(v)
	}
	for k, v := range extra {
		l[k] = labelValue(v)
	}
	l[sandbox.LabelManaged] = "true"
	l[sandbox.LabelRun] = labelValue(p.opts.RunID)
	if task != "" {
		l[sandbox.LabelTask] = labelValue(task)
	}
	l[labelRole] = role
	if p.inst != "" {
		l[labelInstance] = p.inst
	}
	return metav1.ObjectMeta{
		Name: name, Namespace: p.ns, Labels: l,
		Annotations: map[string]string{AnnotationLock: p.lock, AnnotationLockScope: p.scope, AnnotationTask: task, AnnotationOwner: p.owner()},
	}
}

// Prepare checks the specs: the provider runs images from a registry the
// cluster reaches (or already on its nodes); it builds nothing.
func (p *Provider) Prepare(ctx context.Context, specs []*sandbox.Spec) error {
	for _, s := range specs {
		if s.Build != "" {
			return fmt.Errorf("prepare task %s: the kubernetes provider cannot build images (build: %s): push the image to a registry the cluster pulls from and set image", s.Task, s.Build)
		}
		if s.Image == "" {
			return fmt.Errorf("prepare task %s: no image: set image", s.Task)
		}
		switch s.Network {
		case "", "gateway", "bridge", "isolated":
		case NetworkAllowlist:
			return fmt.Errorf("%w: prepare task %s: %s", sandbox.ErrBadInput, s.Task, allowlistRefusal)
		default:
			return fmt.Errorf("prepare task %s: unknown network %q (want gateway, bridge or isolated)", s.Task, s.Network)
		}
	}
	return p.ensureNamespace(ctx)
}

// Gateway starts the run's relay pod and the port-forward that feeds it:
// sandboxes dial the relay's pod address; the relay carries each connection
// back over a stream the supervisor opened, to the gateway on loopback,
// starting it with a PROXY line naming the sandbox pod's address (the
// gateway serves a proxied listener and binds tokens to pods).
func (p *Provider) Gateway(ctx context.Context) (sandbox.GatewayAddr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gateway != nil {
		return *p.gateway, nil
	}
	if err := p.ensureNamespace(ctx); err != nil {
		return sandbox.GatewayAddr{}, err
	}
	r, err := p.startRelay(ctx)
	if err != nil {
		return sandbox.GatewayAddr{}, err
	}
	p.relay = r
	// Every connection starts with the relay's PROXY line naming the pod.
	g := sandbox.GatewayAddr{Listen: r.gatewayListen, Host: r.podIP, Proxied: true}
	p.gateway = &g
	return g, nil
}

// Finalize stops the relay and deletes whatever pods of this provider
// instance are left. It works with a cancelled ctx.
func (p *Provider) Finalize(ctx context.Context) error {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	p.mu.Lock()
	r := p.relay
	p.relay, p.gateway = nil, nil
	p.mu.Unlock()
	var errs []error
	if r != nil {
		r.stop()
	}
	// Pods never closed (a create interrupted after the API server made the
	// pod) cannot outlive this provider; other instances' pods of the run
	// (workers still running) are theirs.
	pods, err := p.cs.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: p.runSelector() + "," + labelInstance + "=" + p.inst})
	if err != nil {
		errs = append(errs, fmt.Errorf("list leftover pods: %w", err))
	} else {
		for _, pod := range pods.Items {
			if err := p.deletePod(ctx, pod.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// The run's namespace goes with the instance that made it (the
	// supervisor's, which finalizes after its workers); its pods go with it.
	p.nsMu.Lock()
	owned := p.nsOwned
	p.nsOwned, p.nsReady = false, false
	p.nsMu.Unlock()
	if owned {
		if err := p.deleteNamespace(ctx, p.ns); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(p.log, "kubernetes: deleted namespace %s\n", p.ns)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finalize kubernetes provider: %w", err)
	}
	return nil
}

func (p *Provider) runSelector() string {
	return sandbox.LabelManaged + "=true," + sandbox.LabelRun + "=" + labelValue(p.opts.RunID)
}

// deletePod deletes a pod at once (grace 0); a pod already gone is fine.
func (p *Provider) deletePod(ctx context.Context, name string) error {
	grace := int64(0)
	err := p.cs.CoreV1().Pods(p.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return sandbox.InfraError(fmt.Errorf("delete pod %s: %w", name, err))
	}
	return nil
}

func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
}

func quantityCPU(cpus float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(cpus*1000+0.5), resource.DecimalSI)
}

func quantityMem(b int64) resource.Quantity { return *resource.NewQuantity(b, resource.BinarySI) }

// owner is this process's identity for the owner annotation ("" without a judge).
func (p *Provider) owner() string {
	if p.opts.Liveness == nil {
		return ""
	}
	return p.opts.Liveness.Owner()
}
