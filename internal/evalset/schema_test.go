package evalset

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

const (
	schemaDir    = "../../docs/schema"
	examplesDir  = "../../examples"
	evalSchema   = "steward.schema.json"
	fleetSchema  = "steward-fleet.schema.json"
	schemaPrefix = "https://github.com/steward-evals/steward/docs/schema/"
)

func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join(schemaDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaPrefix+name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schemaPrefix + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}

// yamlToJSONValue converts YAML to the value the schema validator takes
// (through JSON, so numbers and maps have the validator's types).
func yamlToJSONValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("to JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// exampleFiles lists the eval sets (files named steward.yaml, or naming the
// eval set schema in a modeline) and fleet files under examples/. Other
// YAML there (a workflow, say) is not an eval set and is left alone.
func exampleFiles(t *testing.T) (sets, fleets []string) {
	t.Helper()
	err := filepath.WalkDir(examplesDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return nil
		}
		if filepath.Base(p) == FleetFileName {
			fleets = append(fleets, p)
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.Base(p) == DefaultFileName || bytes.Contains(data, []byte(evalSchema)) {
			sets = append(sets, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sets, fleets
}

// Every example validates against the schema, loads without error, and
// names the schema in its modeline.
func TestExamples(t *testing.T) {
	sets, fleets := exampleFiles(t)
	if len(sets) < 3 {
		t.Fatalf("found only %d example eval sets under %s", len(sets), examplesDir)
	}
	es, fs := compileSchema(t, evalSchema), compileSchema(t, fleetSchema)
	for _, p := range sets {
		t.Run(p, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := es.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Errorf("schema: %v", err)
			}
			if _, err := Load(p, LoadOptions{}); err != nil {
				t.Errorf("Load: %v", err)
			}
			if !bytes.Contains(data, []byte("yaml-language-server: $schema=")) {
				t.Errorf("no yaml-language-server modeline")
			}
		})
	}
	for _, p := range fleets {
		t.Run(p, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Validate(yamlToJSONValue(t, data)); err != nil {
				t.Errorf("schema: %v", err)
			}
			if _, err := LoadFleet(p, nil, FleetOverrides{}); err != nil {
				t.Errorf("LoadFleet: %v", err)
			}
		})
	}
}

// The schema and the loader agree: inputs the loader refuses, the schema
// refuses too, and a good one passes both.
func TestSchemaAgreesWithLoader(t *testing.T) {
	es, fs := compileSchema(t, evalSchema), compileSchema(t, fleetSchema)
	good := okTask
	for _, c := range []struct {
		name, yaml string
		fleet      bool
		ok         bool
	}{
		{"good", good, false, true},
		{"good with everything optional null", "name:\nmodel:\ntasks:\n  - name: t\n    agent: x\n    sandbox:\n    scorer:\n    samples: [{input: a, target: a}]\n", false, true},
		{"unknown key", okTask + "    atempts: 2\n", false, false},
		{"missing agent", "tasks:\n  - name: t\n    samples: [{input: a, target: a}]\n", false, false},
		{"missing samples", "tasks:\n  - name: t\n    agent: x\n", false, false},
		{"samples and samples_file", okTask + "    samples_file: s.jsonl\n", false, false},
		{"attempts zero", okTask + "    attempts: 0\n", false, false},
		{"attempts and epochs", okTask + "    attempts: 2\n    epochs: 2\n", false, false},
		{"max_samples negative", okTask + "    max_samples: -1\n", false, false},
		{"bad duration", okTask + "    timeout: 10 parsecs\n", false, false},
		{"bad size", okTask + "    sandbox: {memory: lots}\n", false, false},
		{"unknown provider", okTask + "    sandbox: {provider: dockr}\n", false, false},
		{"unknown network", okTask + "    sandbox: {network: none}\n", false, false},
		{"unknown match", okTask + "    scorer: {match: exakt}\n", false, false},
		{"command and match", okTask + "    scorer: {command: x, match: exact}\n", false, false},
		{"judge_failed_agents", okTask + "    scorer: {command: x}\n    judge_failed_agents: false\n", false, true},
		{"judge_failed_agents not a bool", okTask + "    scorer: {command: x}\n    judge_failed_agents: sometimes\n", false, false},
		{"image and build", okTask + "    sandbox: {image: a, build: b}\n", false, false},
		{"unknown upstream", "model: {upstream: openia}\n" + okTask, false, false},
		{"reserved env", okTask + "    env: {OPENAI_API_KEY: x}\n", false, false},
		{"reserved env prefix", okTask + "    env: {STEWARD_X: x}\n", false, false},
		{"ordinary env", okTask + "    env: {MY_STEWARD_X: x, DEBUG: 1}\n", false, true},
		{"secret_env", "secret_env: [HOOK_TOKEN, DEPLOY_KEY]\n" + okTask, false, true},
		{"secret_env holding a value", "secret_env: [\"ghp_abc-123\"]\n" + okTask, false, false},
		{"destination escapes", okTask + "    files: {../x: y}\n", false, false},
		{"bad task name", "tasks:\n  - name: my task\n    agent: x\n    samples: [{input: a, target: a}]\n", false, false},
		{"artifacts", okTask + "    artifacts: [out/*.txt, 'report-[0-9].md']\n", false, true},
		{"artifacts dotdot", okTask + "    artifacts: [../x]\n", false, false},
		{"artifacts absolute", okTask + "    artifacts: [/etc/passwd]\n", false, false},
		{"artifacts shell", okTask + "    artifacts: ['$(id)']\n", false, false},
		{"artifacts space", okTask + "    artifacts: ['a b']\n", false, false},
		{"artifacts tilde", okTask + "    artifacts: ['~/x']\n", false, false},
		{"fleet good", "max_sandboxes: 4\nsamples_ramp: [40, 300]\ntend_interval: 5s\n", true, true},
		{"fleet ramp false", "samples_ramp: false\n", true, true},
		{"fleet ramp low zero", "samples_ramp: [0, 10]\n", true, false},
		{"fleet ramp three items", "samples_ramp: [1, 2, 3]\n", true, false},
		{"fleet ramp string", "samples_ramp: 40,300\n", true, false},
		{"fleet negative", "max_sandboxes: -1\n", true, false},
		{"fleet unknown key", "max_sandbox: 4\n", true, false},
		{"fleet transcripts metadata", "transcripts: metadata\n", true, true},
		{"fleet transcripts off", "transcripts: off\n", true, true},
		{"fleet transcripts unknown", "transcripts: some\n", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema, name := es, "steward.yaml"
			if c.fleet {
				schema, name = fs, FleetFileName
			}
			schemaErr := schema.Validate(yamlToJSONValue(t, []byte(c.yaml)))
			files := map[string]string{name: c.yaml, "b/Dockerfile": "FROM scratch\n", "y": ""}
			if c.fleet {
				files["steward.yaml"] = okTask
			}
			dir := writeTree(t, files)
			loadErr := problems(t, dir, LoadOptions{})
			if (schemaErr == nil) != c.ok {
				t.Errorf("schema: ok=%v, want %v (%v)", schemaErr == nil, c.ok, schemaErr)
			}
			if (len(loadErr) == 0) != c.ok {
				t.Errorf("loader: ok=%v, want %v (%v)", len(loadErr) == 0, c.ok, loadErr)
			}
		})
	}
}

// The examples show what their comments say they show.
func TestExampleContents(t *testing.T) {
	gs, err := Load(filepath.Join(examplesDir, "groups-and-state"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, fs, chat := gs.Task("migrations"), gs.Task("flaky-search"), gs.Task("chat")
	if m == nil || fs == nil || chat == nil {
		t.Fatalf("tasks %v", gs.Tasks)
	}
	if len(m.Groups) != 2 || m.SharedState.Key != "example-db" || !m.SandboxReuse || m.Host.Setup == "" || m.Host.Teardown == "" {
		t.Errorf("migrations: %+v", m)
	}
	if fs.Attempts != 3 || fs.MaxSamples != 1 || !fs.EarlyExit || *fs.Retries != 0 {
		t.Errorf("flaky-search: %+v", fs)
	}
	if chat.Scorer.Match != "regex" || len(chat.Samples) != 3 || chat.Samples[2].InputText() != "What is 100/8?" {
		t.Errorf("chat: %+v", chat)
	}
	if in, err := gs.InputFiles(chat); err != nil || len(in) != 1 || in[0] != "prompts/system.txt" {
		t.Errorf("chat inputs %v %v", in, err)
	}
	if gs.Fleet.MaxWorkers != 2 || gs.Fleet.SamplesRamp != (RampRange{true, 4, 16}) {
		t.Errorf("fleet %+v", gs.Fleet)
	}

	db, err := Load(filepath.Join(examplesDir, "docker-basic"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range db.Tasks {
		if tk.Sandbox.Provider != "docker" || filepath.Base(tk.Sandbox.Build) != "image" {
			t.Errorf("%s sandbox %+v", tk.Name, tk.Sandbox)
		}
	}
	if s := db.Task("sort-unique").Samples; len(s) != 3 || s[1].Files["words.txt"] != "data:,b%0Aa%0Ab%0A" {
		t.Errorf("sort-unique samples %+v", s)
	} else if b, err := FileData(s[2].Files["words.txt"]); err != nil || string(b) != "x\ny\nz\n" {
		t.Errorf("base64 data URL: %q %v", b, err)
	}
}
