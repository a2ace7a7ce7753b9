// Package kubeconf is the kubernetes provider's section of _steward.yaml (and
// its --kubeconfig flag), registered with the sandbox registry (section.go),
// apart from the provider so that loading an eval set needs no cluster client.
package kubeconf

// Settings is the kubernetes: section of _steward.yaml. Environment
// variables (STEWARD_KUBE_*, KUBECONFIG) win over it.
type Settings struct {
	// Kubeconfig is a kubeconfig file (relative to the fleet file); "" =
	// $KUBECONFIG, the in-cluster config in a pod, then ~/.kube/config.
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig,omitempty"`
	// KubeconfigFromFlag: Kubeconfig came from --kubeconfig and wins over
	// KUBECONFIG (in JSON too: a worker is handed the settings, W1).
	KubeconfigFromFlag bool   `yaml:"-" json:"kubeconfig_from_flag,omitempty"`
	Context            string `yaml:"context" json:"context,omitempty"`
	// Namespace for the run's pods ("" = the kubeconfig's, else "default";
	// "per-run" = a namespace of its own per run, made and deleted by Steward).
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
	// NodeName pins pods to one node (clusters without a scheduler).
	NodeName         string            `yaml:"node_name" json:"node_name,omitempty"`
	NodeSelector     map[string]string `yaml:"node_selector" json:"node_selector,omitempty"`
	Tolerations      []Toleration      `yaml:"tolerations" json:"tolerations,omitempty"`
	RuntimeClassName string            `yaml:"runtime_class" json:"runtime_class,omitempty"`
	// ImagePullPolicy: Always, IfNotPresent (default) or Never.
	ImagePullPolicy string `yaml:"image_pull_policy" json:"image_pull_policy,omitempty"`
	// WritableRoot turns off the read-only root filesystem.
	WritableRoot bool `yaml:"writable_root" json:"writable_root,omitempty"`
	// RelayImage holds a static steward binary at /steward (the action's image).
	RelayImage string `yaml:"relay_image" json:"relay_image,omitempty"`
}

// Toleration is a pod toleration.
type Toleration struct {
	Key      string `yaml:"key" json:"key,omitempty"`
	Operator string `yaml:"operator" json:"operator,omitempty"`
	Value    string `yaml:"value" json:"value,omitempty"`
	Effect   string `yaml:"effect" json:"effect,omitempty"`
}
