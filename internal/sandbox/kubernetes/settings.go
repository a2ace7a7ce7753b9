package kubernetes

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubeconf"
)

// Environment variables that win over the fleet file's kubernetes: section.
const (
	EnvNamespace    = "STEWARD_KUBE_NAMESPACE"
	EnvContext      = "STEWARD_KUBE_CONTEXT"
	EnvNode         = "STEWARD_KUBE_NODE"
	EnvRelayImage   = "STEWARD_KUBE_RELAY_IMAGE"
	EnvRuntimeClass = "STEWARD_KUBE_RUNTIME_CLASS"
	EnvPullPolicy   = "STEWARD_KUBE_IMAGE_PULL_POLICY"
)

// OptionsFrom resolves the provider options: environment (KUBECONFIG and
// STEWARD_KUBE_*) over the fleet file's kubernetes: section over defaults.
func OptionsFrom(k kubeconf.Settings, getenv func(string) string) (Options, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	pick := func(env, file string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return file
	}
	kubeconfig := pick("KUBECONFIG", k.Kubeconfig)
	if k.KubeconfigFromFlag {
		kubeconfig = k.Kubeconfig // flag > environment > _steward.yaml
	}
	o := Options{
		Kubeconfig:       kubeconfig,
		Context:          pick(EnvContext, k.Context),
		Namespace:        pick(EnvNamespace, k.Namespace),
		NodeName:         pick(EnvNode, k.NodeName),
		NodeSelector:     k.NodeSelector,
		RuntimeClassName: pick(EnvRuntimeClass, k.RuntimeClassName),
		ImagePullPolicy:  corev1.PullPolicy(pick(EnvPullPolicy, k.ImagePullPolicy)),
		WritableRoot:     k.WritableRoot,
		RelayImage:       pick(EnvRelayImage, k.RelayImage),
		Getenv:           getenv,
	}
	if o.Namespace == NamespacePerRun {
		o.Namespace, o.NamespacePerRun = "", true
	}
	switch o.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return Options{}, fmt.Errorf("%s: must be Always, IfNotPresent or Never, got %q", EnvPullPolicy, o.ImagePullPolicy)
	}
	for _, t := range k.Tolerations {
		o.Tolerations = append(o.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect),
		})
	}
	return o, nil
}
