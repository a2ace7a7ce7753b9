package evalset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/gateway"
)

// The schema's upstream enum is the gateway's registered wire formats and
// the mock: a format registered without a schema entry, or a schema entry
// no format backs, fails here.
func TestSchemaUpstreamEnumIsTheRegistry(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(schemaDir, evalSchema))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Model struct {
				Properties struct {
					Upstream struct {
						Enum []any `json:"enum"`
					} `json:"upstream"`
				} `json:"properties"`
			} `json:"model"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range doc.Properties.Model.Properties.Upstream.Enum {
		if s, ok := v.(string); ok {
			names = append(names, s)
		}
	}
	want := gateway.Upstreams()
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("schema upstream enum %v, registry %v", names, want)
	}
}

// Validation reads the upstreams, their default key variables and the
// variables a task may not set from the gateway's registry.
func TestValidationReadsTheUpstreamRegistry(t *testing.T) {
	for _, a := range gateway.APIs() {
		dir := writeTree(t, map[string]string{"steward.yaml": "model: {upstream: " + a.Name() + "}\n" + okTask})
		es, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", a.Name(), err)
		}
		if es.Model.APIKeyEnv != a.Upstream().KeyEnv {
			t.Errorf("%s: api_key_env %q, want %q", a.Name(), es.Model.APIKeyEnv, a.Upstream().KeyEnv)
		}
		for _, kv := range a.Env("http://gw", "tok") {
			k, _, _ := strings.Cut(kv, "=")
			bad := writeTree(t, map[string]string{"steward.yaml": strings.Replace(okTask, "    agent:", "    env: {"+k+": x}\n    agent:", 1)})
			if p := problems(t, bad, LoadOptions{}); len(p) != 1 || !strings.Contains(p[0], k+" is set by Steward") {
				t.Errorf("%s: a task setting %s: %v", a.Name(), k, p)
			}
		}
	}
}
