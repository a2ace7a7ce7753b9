package evalset

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// The schema's provider enum is the registry's names: a provider registered
// without a schema entry, or a schema entry no provider backs, fails here.
func TestSchemaProviderEnumIsTheRegistry(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(schemaDir, evalSchema))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var found []any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["provider"].(map[string]any); ok {
				if e, ok := p["enum"].([]any); ok {
					found = e
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	if found == nil {
		t.Fatal("the schema has no provider enum")
	}
	var names []string
	for _, v := range found {
		if s, ok := v.(string); ok {
			names = append(names, s)
		}
	}
	if want := sandbox.Names(); !reflect.DeepEqual(names, want) {
		t.Errorf("schema provider enum %v, registry %v", names, want)
	}
	if len(names) < 2 {
		t.Errorf("want at least local and docker registered, got %v", names)
	}
}

// Validation takes the allowed providers, the did-you-mean and each
// provider's own refusals from the registry: a provider registered here
// (as a new package would from its init) is accepted at once, its Check is
// applied on its field, and a misspelling of it is suggested.
func TestValidationReadsTheRegistry(t *testing.T) {
	sandbox.Register(sandbox.Descriptor{
		Name: "testpods",
		New:  func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) { return nil, nil },
		Check: func(s sandbox.Settings) []sandbox.Problem {
			if s.Network == "bridge" {
				return []sandbox.Problem{{Field: "network", Message: "testpods cannot bridge"}}
			}
			return nil
		},
	})
	t.Cleanup(func() { sandbox.Deregister("testpods") })
	task := "tasks:\n  - name: t\n    agent: echo hi\n    samples: [{id: a, input: x, target: x}]\n    sandbox:\n"
	cases := []struct {
		name, sandbox string
		want          []string // each a substring of one error; none = loads
	}{
		{"registered", "      provider: testpods\n", nil},
		{"its check", "      provider: testpods\n      network: bridge\n", []string{"tasks[0].sandbox.network: testpods cannot bridge"}},
		{"did you mean", "      provider: testpod\n", []string{`unknown provider "testpod" (did you mean "testpods"?)`}},
		{"local refuses an image", "      provider: local\n      image: x\n", []string{"tasks[0].sandbox.image: the local provider runs on the host and takes no image"}},
		{"docker wants one", "      provider: docker\n", []string{"tasks[0].sandbox: the docker provider needs image"}},
		{"unknown lists all", "      provider: zzzzzzzz\n", []string{"use one of docker, kubernetes, local, testpods"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "steward.yaml"), []byte(task+c.sandbox), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{Getenv: func(string) string { return "" }})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("loaded; want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
