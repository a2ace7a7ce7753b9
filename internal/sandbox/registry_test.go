package sandbox_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
	_ "github.com/steward-evals/steward/internal/sandbox/providers"
)

func TestRegisteredProviders(t *testing.T) {
	if got, want := sandbox.Names(), []string{"docker", "kubernetes", "local"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	local, _ := sandbox.Lookup("local")
	docker, _ := sandbox.Lookup("docker")
	if !local.Exclusive || !local.OnHost || !local.Fallback || local.Auto {
		t.Errorf("local's facts: %+v", local)
	}
	if docker.Exclusive || docker.OnHost || docker.Fallback || !docker.Auto || docker.Available == nil {
		t.Errorf("docker's facts: %+v", docker)
	}
	if !sandbox.IsExclusive("local") || sandbox.IsExclusive("docker") || sandbox.IsExclusive("nope") {
		t.Error("IsExclusive disagrees with the descriptors")
	}
	if !sandbox.IsOnHost("local") || sandbox.IsOnHost("docker") {
		t.Error("IsOnHost disagrees with the descriptors")
	}
}

func TestChoose(t *testing.T) {
	yes := func(string) bool { return true }
	no := func(string) bool { return false }
	cases := []struct {
		name       string
		named      string
		wantsImage bool
		available  func(string) bool
		want       string
		err        string
	}{
		{"named wins", "local", true, yes, "local", ""},
		{"named docker without daemon", "docker", true, no, "docker", ""},
		{"image and docker answers", "", true, yes, "docker", ""},
		{"image but no daemon: fallback", "", true, no, "local", ""},
		{"no image: fallback even with a daemon", "", false, yes, "local", ""},
		{"unknown name", "dockr", false, yes, "", `unknown sandbox provider "dockr"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sandbox.Choose(c.named, c.wantsImage, c.available)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Choose = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// A new provider is one Register call: it is looked up, chosen when named
// and listed; names and fallbacks are unique.
func TestRegisterRules(t *testing.T) {
	mk := func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) { return nil, nil }
	sandbox.Register(sandbox.Descriptor{Name: "pods", New: mk, Auto: true})
	t.Cleanup(func() { sandbox.Deregister("pods") })
	if _, ok := sandbox.Lookup("pods"); !ok {
		t.Fatal("pods not registered")
	}
	// Auto providers are tried by name: docker before pods.
	got, err := sandbox.Choose("", true, func(n string) bool { return n == "pods" })
	if err != nil || got != "pods" {
		t.Fatalf("Choose = %q, %v; want pods (docker down)", got, err)
	}
	for name, d := range map[string]sandbox.Descriptor{
		"twice":         {Name: "pods", New: mk},
		"no name":       {New: mk},
		"no new":        {Name: "x"},
		"two fallbacks": {Name: "y", New: mk, Fallback: true},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%+v) did not panic", d)
					sandbox.Deregister(d.Name)
				}
			}()
			sandbox.Register(d)
		})
	}
}
