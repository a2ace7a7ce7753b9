package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubeconf"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
)

// Name is the provider's name in eval sets.
const Name = "kubernetes"

func init() {
	sandbox.Register(sandbox.Descriptor{
		Name:    Name,
		Summary: "a pod per attempt in a Kubernetes cluster (elastic: the ramp governs the budget)",
		Check:   check,
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) {
			o, err := OptionsFrom(settingsOf(ri.Settings), ri.Getenv)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", sandbox.ErrBadInput, err)
			}
			if o.RelayImage == "" && ri.RunID != "" {
				return nil, fmt.Errorf("%w: _steward.yaml: kubernetes.relay_image (or %s) is not set: sandboxes reach the model gateway through a relay pod running that image (a static steward binary at /steward, e.g. the action's image; see docs/kubernetes.md)", sandbox.ErrBadInput, EnvRelayImage)
			}
			o.RunID, o.LockPath, o.Log, o.Labels, o.Liveness = ri.RunID, ri.LockPath, ri.Stderr, map[string]string{}, ri.Liveness
			p, err := New(ctx, o)
			if err != nil {
				if !errors.Is(err, sandbox.ErrInfra) {
					// no kubeconfig, a missing namespace, refused credentials: the user's to fix
					return nil, fmt.Errorf("%w: %v", sandbox.ErrBadInput, err)
				}
				return nil, err
			}
			return p, nil
		},
		Sweep: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			p, err := configured(ctx, w, ri, "sweep")
			if p == nil || err != nil {
				return err
			}
			_, err = p.Sweep(ctx, w)
			return err
		},
		Doctor: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			p, err := configured(ctx, w, ri, "doctor")
			if p == nil || err != nil {
				return err
			}
			return p.Doctor(ctx, w)
		},
		Internal: []sandbox.InternalCommand{
			{Name: kuberelay.Arg, Usage: "SANDBOX-LISTEN CONTROL-LISTEN", Short: "internal: the gateway relay in a kubernetes pod", Args: 2,
				Run: func(ctx context.Context, args []string, stderr io.Writer) error {
					return kuberelay.Run(ctx, args[0], args[1], stderr)
				}},
			{Name: kuberelay.ReadyArg, Usage: "CONTROL-ADDR", Short: "internal: the relay pod's startup probe", Args: 1,
				Run: func(ctx context.Context, args []string, stderr io.Writer) error {
					return kuberelay.Ready(ctx, args[0])
				}},
			{Name: ProbeArg, Usage: "URL", Short: "internal: fetch a URL through the kubernetes relay", Args: 1,
				Run: func(ctx context.Context, args []string, stderr io.Writer) error {
					return Probe(ctx, args[0])
				}},
		},
	})
}

// check: a pod starts from an image the cluster can pull or holds.
func check(s sandbox.Settings) []sandbox.Problem {
	var out []sandbox.Problem
	if s.Image == "" {
		out = append(out, sandbox.Problem{Message: "the kubernetes provider needs image (an image the cluster can pull or already holds)"})
	}
	if s.Build != "" {
		out = append(out, sandbox.Problem{Field: "build", Message: "the kubernetes provider cannot build images: push the image to a registry and set image"})
	}
	if s.Compose {
		out = append(out, sandbox.Problem{Message: "the kubernetes provider cannot run compose environments (environment/docker-compose.yaml: services beside main on a network of their own): use sandbox.provider: docker"})
	}
	if s.Network == NetworkAllowlist {
		out = append(out, sandbox.Problem{Field: "network", Message: allowlistRefusal})
	}
	return out
}

// NetworkAllowlist is the network of a sandbox that reaches named hosts
// only (a Harbor task's network_mode = "allowlist"): refused here.
const NetworkAllowlist = "allowlist"

const allowlistRefusal = "the kubernetes provider cannot enforce a network allowlist (network_mode = \"allowlist\", allowed_hosts): a NetworkPolicy filters by address, not by host name, and Steward runs no egress proxy in the cluster; use sandbox.provider: docker"

func settingsOf(m map[string]any) kubeconf.Settings {
	k, _ := m[Name].(kubeconf.Settings)
	return k
}

// configured connects to the cluster configured here (nil when none is):
// _steward.yaml's kubernetes: section, KUBECONFIG, STEWARD_KUBE_* or the
// in-cluster environment.
func configured(ctx context.Context, w io.Writer, ri sandbox.RunInfo, role string) (*Provider, error) {
	getenv, settings := ri.Getenv, ri.Settings
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	k := settingsOf(settings)
	if k.Kubeconfig == "" && k.Namespace == "" && k.RelayImage == "" && getenv("KUBECONFIG") == "" &&
		getenv(EnvNamespace) == "" && getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	o, err := OptionsFrom(k, getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sandbox.ErrBadInput, err)
	}
	o.RunID = role + "-" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	o.Liveness = ri.Liveness
	p, err := New(ctx, o)
	if err != nil {
		fmt.Fprintf(w, "kubernetes: %v\n", err)
		return nil, nil
	}
	return p, nil
}

// SweepAfterRun deletes the pods dead runs left, this run's crashed workers included (D4).
func (p *Provider) SweepAfterRun(ctx context.Context) {
	_, _ = p.Sweep(ctx, io.Discard)
}

// PreflightRun deletes what dead runs left before this one starts.
func (p *Provider) PreflightRun(ctx context.Context, specs []*sandbox.Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error {
	if _, err := p.Sweep(ctx, io.Discard); err != nil {
		fmt.Fprintf(w, "steward: sweep leftovers of dead runs: %v\n", err)
	}
	return nil
}

var (
	_ sandbox.Preflighter     = (*Provider)(nil)
	_ sandbox.AfterRunSweeper = (*Provider)(nil)
)
