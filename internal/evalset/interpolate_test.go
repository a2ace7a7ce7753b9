package evalset

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestExpandVars(t *testing.T) {
	env := map[string]string{"HOST": "127.0.0.1", "PORT": "8080", "YAMLISH": "{a: 1, b: [2]}", "EMPTY": ""}
	get := func(k string) string { return env[k] }
	for _, c := range []struct {
		in, want, err string
		names         []string
	}{
		{"http://${HOST}:${PORT}/v1", "http://127.0.0.1:8080/v1", "", []string{"HOST", "PORT"}},
		{"${MISSING:-fallback}", "fallback", "", []string{"MISSING"}},
		{"${EMPTY:-fallback}", "fallback", "", []string{"EMPTY"}},
		{"${HOST:-x}", "127.0.0.1", "", []string{"HOST"}},
		{"${MISSING:-}", "", "", []string{"MISSING"}},
		{"cost $$5 and $${HOST}", "cost $5 and ${HOST}", "", nil},
		{"$HOME and $ alone and a$", "$HOME and $ alone and a$", "", nil},
		{"${YAMLISH}", "{a: 1, b: [2]}", "", []string{"YAMLISH"}},
		{"${MISSING}", "", "${MISSING}: MISSING is not set (give a default with ${MISSING:-value}, or write $${MISSING} for the text itself)", nil},
		{"${EMPTY}", "", "EMPTY is not set", nil},
		{"${HOST", "", "${ without its closing }", nil},
		{"${1X}", "", `"1X" is not a variable name`, nil},
		{"${HOST:?msg}", "", `"HOST:?msg" is not a variable name`, nil},
	} {
		got, names, err := ExpandVars(c.in, get)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || !reflect.DeepEqual(names, c.names) {
			t.Errorf("%q = %q %v %v, want %q %v", c.in, got, names, err, c.want, c.names)
		}
	}
}

// ${…} in the eval set and _steward.yaml: expanded at load, typed like the
// plain value it replaces, never YAML structure; commands and samples are
// left alone; secrets are refused wherever they would be expanded.
func TestInterpolation(t *testing.T) {
	env := map[string]string{
		"PORT": "9999", "MODEL": "gpt-x", "TEMP": "0.2", "N": "4", "LABEL": "{a: 1, b: [2]}", "TRUE": "true",
		"OPENAI_API_KEY": "sk-real-key-123456", "MY_TOKEN": "tok-1234567890", "OTHER_KEY": "sk-other-1234567",
	}
	y := `name: ${LABEL}
model:
  upstream: openai
  name: ${MODEL}
  base_url: http://127.0.0.1:${PORT}/v1
  settings:
    temperature: ${TEMP}
    quoted: "${TEMP}"
    label: ${LABEL}
tasks:
  - name: t
    agent: echo "${STEWARD_INPUT}" $$
    setup: echo ${NOT_SET_ANYWHERE}
    max_samples: ${N}
    env:
      RUN: "run-${N:-1}"
      PRICE: "$$3"
      FLAG: ${TRUE}
    samples:
      - {input: "What does \u0060${a}\u0060 print?", target: "${a}"}
`
	dir := writeTree(t, map[string]string{"steward.yaml": y, "_steward.yaml": "max_sandboxes: ${N}\ntend_interval: ${TICK:-5s}\n"})
	es := mustLoad(t, dir, LoadOptions{Getenv: func(k string) string { return env[k] }})
	m := es.Model
	if es.Name != "{a: 1, b: [2]}" || m.Name != "gpt-x" || m.BaseURL != "http://127.0.0.1:9999/v1" {
		t.Errorf("name %q model %+v", es.Name, m)
	}
	if b, _ := json.Marshal(m.Settings); string(b) != `{"label":"{a: 1, b: [2]}","quoted":"0.2","temperature":0.2}` {
		t.Errorf("settings %s", b)
	}
	tk := es.Tasks[0]
	if tk.Agent != `echo "${STEWARD_INPUT}" $$` || tk.Setup != "echo ${NOT_SET_ANYWHERE}" {
		t.Errorf("commands were expanded: %q %q", tk.Agent, tk.Setup)
	}
	if tk.MaxSamples != 4 || tk.Env["RUN"] != "run-4" || tk.Env["PRICE"] != "$3" || tk.Env["FLAG"] != "true" {
		t.Errorf("task %d %v", tk.MaxSamples, tk.Env)
	}
	if s := tk.Samples[0]; s.Input != "What does `${a}` print?" || s.Target != "${a}" {
		t.Errorf("sample was expanded: %+v", s)
	}
	if es.Fleet.MaxSandboxes != 4 || es.Fleet.TendInterval.D().String() != "5s" {
		t.Errorf("fleet %+v", es.Fleet)
	}

	getenv := func(k string) string { return env[k] }
	cases := []badCase{
		{name: "unset", files: yamlOnly("name: ${NOPE}\n" + okTask + "    env: {A: \"${ALSO_NOPE}\"}\n"),
			want: []string{`steward.yaml:1: name: ${NOPE}: NOPE is not set`, `steward.yaml:7: tasks[0].env.A: ${ALSO_NOPE}: ALSO_NOPE is not set`}},
		{name: "unset in _steward.yaml", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_workers: 2\nmax_sandboxes: ${NOPE}\n"},
			want: []string{`_steward.yaml:2: max_sandboxes: ${NOPE}: NOPE is not set`}},
		{name: "typed after expansion", files: map[string]string{"steward.yaml": okTask + "    max_samples: ${MODEL}\n"},
			want: []string{`steward.yaml:6: tasks[0].max_samples: expected a whole number, got "gpt-x"`}},
		{name: "the model key", files: yamlOnly(okTask + "    files: {key.txt: \"data:,${OPENAI_API_KEY}\"}\n"),
			want: []string{`steward.yaml:6: tasks[0].files.key.txt: ${OPENAI_API_KEY}: OPENAI_API_KEY holds a secret (always a secret) and is never expanded`}},
		{name: "api_key_env's variable", files: yamlOnly("model: {upstream: openai, api_key_env: OTHER_KEY}\n" + okTask + "    env: {K: \"${OTHER_KEY}\"}\n"),
			want: []string{`steward.yaml:7: tasks[0].env.K: ${OTHER_KEY}: OTHER_KEY holds a secret (named by model.api_key_env, secret_env or secrets)`}},
		{name: "a secret even with a default", files: yamlOnly("secret_env: [MY_TOKEN]\n" + okTask + "    env: {K: \"${MY_TOKEN:-none}\"}\n"),
			want: []string{`steward.yaml:7: tasks[0].env.K: ${MY_TOKEN}: MY_TOKEN holds a secret`}},
		{name: "a secret named in _steward.yaml, used in the eval set", files: map[string]string{"steward.yaml": "name: ${MY_TOKEN}\n" + okTask, "_steward.yaml": "secrets: [MY_TOKEN]\n"},
			want: []string{`steward.yaml:1: name: ${MY_TOKEN}: MY_TOKEN holds a secret`}},
		{name: "a secret used in _steward.yaml, named in the eval set", files: map[string]string{"steward.yaml": "secret_env: [MY_TOKEN]\n" + okTask, "_steward.yaml": "record: ${MY_TOKEN}\n"},
			want: []string{`_steward.yaml:1: record: ${MY_TOKEN}: MY_TOKEN holds a secret`}},
	}
	for i := range cases {
		cases[i].env = env
	}
	_ = getenv
	runBad(t, cases)
}

// launch's model flags replace the YAML exactly: the same values (and so
// the same fingerprint) as writing them in the file.
func TestModelFlags(t *testing.T) {
	str := func(s string) *string { return &s }
	flagged := mustLoad(t, writeTree(t, yamlOnly("model: {upstream: mock, name: a, settings: {top_p: 1}}\n"+okTask)), LoadOptions{Flags: FleetOverrides{
		Model: str("gpt-4o"), ModelBaseURL: str("http://127.0.0.1:8080/v1"), Upstream: str("openai"),
		ModelSettings: []string{"temperature=0.2", "max_tokens=100", "stop=[END]", "tag=#x", "seed=~"},
	}})
	written := mustLoad(t, writeTree(t, yamlOnly("model:\n  upstream: openai\n  name: gpt-4o\n  base_url: http://127.0.0.1:8080/v1\n  settings: {top_p: 1, temperature: 0.2, max_tokens: 100, stop: [END], tag: '#x', seed: ~}\n"+okTask)), LoadOptions{})
	fm, wm := flagged.Model, written.Model
	if fm.Sources["name"] != "flag" || fm.Sources["settings.temperature"] != "flag" || wm.Sources != nil {
		t.Errorf("sources %v / %v", fm.Sources, wm.Sources)
	}
	fm.Sources = nil
	if !reflect.DeepEqual(fm, wm) {
		t.Errorf("flags\n %#v\nYAML\n %#v", fm, wm)
	}
	if fm.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("api_key_env %q follows the upstream", fm.APIKeyEnv)
	}

	dir := writeTree(t, yamlOnly(okTask))
	got := problems(t, dir, LoadOptions{Flags: FleetOverrides{Upstream: str("openia"), ModelBaseURL: str("ftp://x"), Model: str(" "), ModelSettings: []string{"temperature"}}})
	want := []string{`flag: --upstream: unknown upstream "openia" (did you mean "openai"?)`, `flag: --model: must name a model`,
		`flag: --model-base-url: "ftp://x" is not an http(s) URL`, `flag: -M: "temperature" is not key=value (e.g. -M temperature=0.2)`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// --agent replaces every task's agent exactly as writing it in the file
// (the oracle of a Harbor dataset: docs/harbor.md); an empty one is refused.
func TestAgentFlag(t *testing.T) {
	str := func(s string) *string { return &s }
	two := okTask + "  - name: u\n    agent: echo other\n    samples:\n      - {input: b, target: b}\n"
	flagged := mustLoad(t, writeTree(t, yamlOnly(two)), LoadOptions{Flags: FleetOverrides{Agent: str("oracle")}})
	for _, task := range flagged.Tasks {
		if task.Agent != "oracle" {
			t.Errorf("task %s: agent %q, want the flag's", task.Name, task.Agent)
		}
	}
	got := problems(t, writeTree(t, yamlOnly(okTask)), LoadOptions{Flags: FleetOverrides{Agent: str(" ")}})
	if want := "flag: --agent: must name an agent command"; len(got) == 0 || got[0] != want {
		t.Errorf("problems %q, want %q first", got, want)
	}
}
