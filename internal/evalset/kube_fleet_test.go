package evalset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFleetKubernetesSection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FleetFileName)
	os.WriteFile(p, []byte("kubernetes:\n  kubeconfig: kube/config\n  namespace: evals\n  node_name: n1\n  node_selector: {pool: evals}\n  tolerations:\n    - {key: a, operator: Exists}\n  image_pull_policy: Never\n  relay_image: ghcr.io/x/steward:1\n"), 0o644)
	f, err := LoadFleet(p, nil, FleetOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	k := f.Kubernetes
	if k.Namespace != "evals" || k.NodeName != "n1" || k.NodeSelector["pool"] != "evals" || len(k.Tolerations) != 1 || k.Tolerations[0].Operator != "Exists" ||
		k.ImagePullPolicy != "Never" || k.RelayImage != "ghcr.io/x/steward:1" || k.Kubeconfig != filepath.Join(dir, "kube/config") {
		t.Fatalf("got %+v", k)
	}
	os.WriteFile(p, []byte("kubernetes:\n  image_pull_policy: Sometimes\n"), 0o644)
	if _, err := LoadFleet(p, nil, FleetOverrides{}); err == nil || !strings.Contains(err.Error(), "image_pull_policy") || !strings.Contains(err.Error(), ":2") {
		t.Fatalf("bad pull policy: %v", err)
	}
	os.WriteFile(p, []byte("kubernetes:\n  namespace: evals\n  nodename: x\n"), 0o644)
	if _, err := LoadFleet(p, nil, FleetOverrides{}); err == nil || !strings.Contains(err.Error(), "nodename") {
		t.Fatalf("unknown key: %v", err)
	}
}
