package evalset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kubeconf"
)

func TestFleetKubernetesSection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FleetFileName)
	os.WriteFile(p, []byte("kubernetes:\n  kubeconfig: kube/config\n  namespace: evals\n  node_name: n1\n  node_selector: {pool: evals}\n  tolerations:\n    - {key: a, operator: Exists}\n  image_pull_policy: Never\n  relay_image: ghcr.io/x/steward:1\n"), 0o644)
	f, err := LoadFleet(p, nil, FleetOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := f.ProviderSettings()[kubeconf.Key].(kubeconf.Settings)
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
	if src := f.Sources["kubernetes"]; src != FleetFileName+":1" {
		t.Errorf("source %q", src)
	}
}

// The kubernetes section and its --kubeconfig flag are the provider's
// (kubeconf registers them with the sandbox registry): the loader decodes
// them without naming the provider, the flag wins over the file, and a
// flag no provider declares is refused by name.
func TestFleetProviderFlags(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FleetFileName)
	os.WriteFile(p, []byte("kubernetes:\n  kubeconfig: kube/config\n  namespace: evals\n"), 0o644)
	f, err := LoadFleet(p, nil, FleetOverrides{ProviderFlags: map[string]string{"kubeconfig": "other/config"}})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := f.ProviderSettings()[kubeconf.Key].(kubeconf.Settings)
	want, _ := filepath.Abs("other/config")
	if k.Kubeconfig != want || !k.KubeconfigFromFlag || k.Namespace != "evals" || f.Sources["kubernetes.kubeconfig"] != SourceFlag {
		t.Fatalf("flag over the file: %+v %v", k, f.Sources)
	}
	// No file: the flag alone makes the section.
	f, err = LoadFleet(filepath.Join(dir, "none.yaml"), nil, FleetOverrides{ProviderFlags: map[string]string{"kubeconfig": "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := f.ProviderSettings()[kubeconf.Key].(kubeconf.Settings); !k.KubeconfigFromFlag {
		t.Fatalf("flag alone: %+v", k)
	}
	for flags, want := range map[string]string{"kubeconfig= ": "must name a file", "kubeconfg=x": "no provider declares this flag"} {
		name, v, _ := strings.Cut(flags, "=")
		_, err := LoadFleet(p, nil, FleetOverrides{ProviderFlags: map[string]string{name: v}})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want %q", flags, err, want)
		}
	}
	// Twice in the file is refused, with both lines.
	os.WriteFile(p, []byte("kubernetes:\n  namespace: a\nkubernetes:\n  namespace: b\n"), 0o644)
	if _, err := LoadFleet(p, nil, FleetOverrides{}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("twice: %v", err)
	}
}
