package evalset

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const fullSet = `# yaml-language-server: $schema=../../docs/schema/steward.schema.json
name: full
model:
  upstream: openai
  name: gpt-4o-mini
  base_url: http://127.0.0.1:9999/v1
  max_connections: 8
  prices: {input_per_mtok: 0.15, output_per_mtok: 0.6}
  settings: {temperature: 0}
tasks:
  - name: math
    sandbox:
      provider: docker
      build: img
      cpus: 0.5
      memory: 1g
      pids: 64
      network: isolated
      cap_add: [NET_ADMIN]
      workdir: /w
    setup: pip install nothing
    agent: ./agent.sh
    scorer: {command: ./score.sh}
    samples_file: data/math.jsonl
    epochs: 3
    timeout: 90
    max_samples: 5
    exclusive: false
    host: {setup: make fixtures, teardown: make clean}
    sandbox_reuse: true
    shared_state: {key: db}
    early_exit: true
    inputs: ["lib/**/*.py"]
    env: {LEVEL: 3}
    volatile: [LEVEL]
    files: {helper.py: lib/helper.py, note.txt: "data:,hello%20there"}
    retries: 0
    groups:
      - name: chain
        samples: [B, a]
  - name: words
    agent: $STEWARD_BIN agent chat
    sandbox: {provider: local}
    scorer: {match: includes, ignore_case: true}
    samples:
      - input: "Say hi"
        target: [hi, hello]
      - id: 2.50
        input:
          - {role: system, content: be brief}
          - {role: user, content: hi}
        target: 1.10
        metadata: {level: 2, tags: [x]}
        files: {in.txt: data/in.txt}
        setup: echo ready
`

func fullTree(t *testing.T) string {
	return writeTree(t, map[string]string{
		"steward.yaml":     fullSet,
		"img/Dockerfile":   "FROM scratch\n",
		"lib/helper.py":    "print(1)\n",
		"lib/sub/deep.py":  "print(2)\n",
		"data/in.txt":      "input\n",
		"data/math.jsonl":  "{\"id\":\"a\",\"input\":\"1+1\",\"target\":\"2\"}\n\n{\"input\":\"2+2\",\"target\":\"4\",\"metadata\":{\"n\":4,\"f\":1.5}}\r\n{\"id\":\"B\",\"input\":\"3+3\",\"files\":{\"x.txt\":\"data/in.txt\"}}\n",
		"_steward.yaml":    "max_sandboxes: 6\nsamples_ramp: [40, 300]\ntend_interval: 5s\nrecord: out/rec\n",
		"lib/.git/ignored": "x",
	})
}

func TestLoadFull(t *testing.T) {
	dir := fullTree(t)
	es := mustLoad(t, dir, LoadOptions{})
	if es.Name != "full" || es.Dir != dir || es.File != filepath.Join(dir, "steward.yaml") {
		t.Fatalf("name/dir/file: %q %q %q", es.Name, es.Dir, es.File)
	}
	if es.Model.Upstream != "openai" || es.Model.APIKeyEnv != "OPENAI_API_KEY" || es.Model.MaxConnections != 8 || es.Model.Prices.OutputPerMTok != 0.6 {
		t.Errorf("model: %+v", es.Model)
	}
	m := es.Tasks[0]
	if m.Line != 11 || m.Attempts != 3 || m.Timeout.D() != 90*time.Second || m.MaxSamples != 5 || *m.Exclusive || *m.Retries != 0 {
		t.Errorf("math task: line %d attempts %d timeout %s max %d", m.Line, m.Attempts, m.Timeout, m.MaxSamples)
	}
	sb := m.Sandbox
	if sb.Build != filepath.Join(dir, "img") || sb.CPUs != 0.5 || sb.Memory != 1<<30 || sb.PIDs != 64 || sb.Network != "isolated" || sb.Workdir != "/w" {
		t.Errorf("sandbox: %+v", sb)
	}
	if m.SamplesFile != filepath.Join(dir, "data/math.jsonl") || len(m.Samples) != 3 {
		t.Fatalf("samples file %q, %d samples", m.SamplesFile, len(m.Samples))
	}
	var ids, sources []string
	for _, s := range m.Samples {
		ids = append(ids, s.ID)
		sources = append(sources, strings.TrimPrefix(s.Source, dir+"/"))
	}
	if fmt.Sprint(ids) != "[a 2 B]" || fmt.Sprint(sources) != "[data/math.jsonl:1 data/math.jsonl:3 data/math.jsonl:4]" {
		t.Errorf("ids %v sources %v", ids, sources)
	}
	if got := m.Samples[1].Metadata; got["n"] != 4 || got["f"] != 1.5 {
		t.Errorf("jsonl metadata %#v", got)
	}
	if m.Samples[2].Files["x.txt"] != filepath.Join(dir, "data/in.txt") {
		t.Errorf("jsonl sample file not resolved: %v", m.Samples[2].Files)
	}
	if m.Files["helper.py"] != filepath.Join(dir, "lib/helper.py") || m.Files["note.txt"] != "data:,hello%20there" {
		t.Errorf("task files %v", m.Files)
	}
	if b, err := FileData(m.Files["note.txt"]); err != nil || string(b) != "hello there" {
		t.Errorf("FileData(data URL) = %q, %v", b, err)
	}
	if m.Env["LEVEL"] != "3" || m.SharedState.Key != "db" || !m.EarlyExit || !m.SandboxReuse || m.Host.Teardown != "make clean" {
		t.Errorf("task settings %+v", m)
	}
	if in, err := es.InputFiles(m); err != nil || fmt.Sprint(in) != "[lib/helper.py lib/sub/deep.py]" {
		t.Errorf("InputFiles = %v, %v", in, err)
	}
	w := es.Tasks[1]
	if w.Scorer.Match != "includes" || !w.Scorer.IgnoreCase || w.Attempts != 1 || w.Timeout.D() != DefaultTimeout || *w.Retries != 1 {
		t.Errorf("words defaults: %+v", w)
	}
	if w.Sandbox.Memory != DefaultMemory || w.Sandbox.CPUs != 1 || w.Sandbox.PIDs != 256 || w.Sandbox.Network != "gateway" {
		t.Errorf("sandbox defaults: %+v", w.Sandbox)
	}
	s0, s1 := w.Samples[0], w.Samples[1]
	if s0.ID != "1" || fmt.Sprint(s0.Targets()) != "[hi hello]" || s0.InputText() != "Say hi" {
		t.Errorf("sample 0: %+v", s0)
	}
	if s1.ID != "2.50" || s1.Target != "1.10" || s1.Setup != "echo ready" || s1.Files["in.txt"] != filepath.Join(dir, "data/in.txt") {
		t.Errorf("sample 1: %+v", s1)
	}
	if s1.InputText() != "hi" || s1.InputJSON() != `[{"content":"be brief","role":"system"},{"content":"hi","role":"user"}]` {
		t.Errorf("chat input text %q json %s", s1.InputText(), s1.InputJSON())
	}
	f := es.Fleet
	if f.MaxSandboxes != 6 || f.SamplesRamp != (RampRange{true, 40, 300}) || f.TendInterval.D() != 5*time.Second || f.Record != filepath.Join(dir, "out/rec") || f.File != filepath.Join(dir, "_steward.yaml") {
		t.Errorf("fleet %+v", f)
	}
	if f.Sources["max_sandboxes"] != "_steward.yaml:1" || f.Sources["max_workers"] != "default" {
		t.Errorf("sources %v", f.Sources)
	}
}

func TestDefaults(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": okTask})
	es := mustLoad(t, dir, LoadOptions{})
	if es.Name != filepath.Base(dir) || es.Model.Upstream != "mock" || es.Model.APIKeyEnv != "" {
		t.Errorf("set defaults: %q %+v", es.Name, es.Model)
	}
	tk := es.Tasks[0]
	if tk.Attempts != 1 || tk.Timeout.D() != 10*time.Minute || tk.Scorer.Match != "exact" || *tk.Retries != 1 || tk.Exclusive != nil {
		t.Errorf("task defaults %+v", tk)
	}
	if tk.Samples[0].ID != "1" {
		t.Errorf("id %q", tk.Samples[0].ID)
	}
	f := es.Fleet
	want := Fleet{SamplesRamp: DefaultRamp, TendInterval: Duration(10 * time.Second), Record: filepath.Join(dir, ".steward")}
	if f.MaxSandboxes != 0 || f.SamplesRamp != want.SamplesRamp || f.TendInterval != want.TendInterval || f.Record != want.Record || f.File != "" {
		t.Errorf("fleet defaults %+v", f)
	}
}

func TestAliasesAndMergeKeys(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": `
base: &base
  agent: echo hi
  attempts: 2
  scorer: {match: exact}
tasks:
  - <<: *base
    name: a
    samples: &s [{input: x, target: x}]
  - <<: *base
    name: b
    attempts: 4
    samples: *s
`})
	// "base" is not a key of the format: it is refused like any other.
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || !strings.Contains(got[0], `steward.yaml:2: base: unknown key "base"`) {
		t.Fatalf("got %v", got)
	}
	// Anchors on a real key work.
	dir = writeTree(t, map[string]string{"steward.yaml": `
tasks:
  - &a
    name: a
    agent: echo hi
    attempts: 2
    samples: &s [{input: x, target: x}]
  - <<: *a
    name: b
    attempts: 4
    samples: *s
`})
	es := mustLoad(t, dir, LoadOptions{})
	if a, b := es.Tasks[0], es.Tasks[1]; a.Attempts != 2 || b.Attempts != 4 || b.Agent != "echo hi" || len(b.Samples) != 1 {
		t.Errorf("merged: %+v %+v", a, b)
	}
}

func TestAliasBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	// Put the bomb where a generic value is decoded (sample metadata).
	y := "tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        metadata:\n" +
		indent(b.String(), "          ")
	dir := writeTree(t, map[string]string{"steward.yaml": y})
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || !strings.Contains(got[0], "steward.yaml:8: tasks[0].samples[0].metadata") || !strings.Contains(got[0], "an alias bomb?") {
		t.Fatalf("got %v", got)
	}
}

func indent(s, p string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestDeepNestingRefused(t *testing.T) {
	y := okTask + "    env: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n"
	dir := writeTree(t, map[string]string{"steward.yaml": y})
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || !strings.Contains(got[0], "steward.yaml:6: tasks[0].env: expected a mapping, got a list") {
		t.Fatalf("got %v", got)
	}
	y = "tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        metadata: {k: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}\n"
	dir = writeTree(t, map[string]string{"steward.yaml": y})
	got = problems(t, dir, LoadOptions{})
	if len(got) != 1 || !strings.Contains(got[0], "nested more than 64 levels deep") {
		t.Fatalf("got %v", got)
	}
}

func TestSizeLimit(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: big.jsonl\n"})
	f, err := os.Create(filepath.Join(dir, "big.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || got[0] != "big.jsonl: file is larger than the 64 MiB limit" {
		t.Fatalf("got %v", got)
	}
	if err := os.Rename(filepath.Join(dir, "big.jsonl"), filepath.Join(dir, "steward.yaml")); err != nil {
		t.Fatal(err)
	}
	got = problems(t, dir, LoadOptions{})
	if len(got) != 1 || got[0] != "steward.yaml: file is larger than the 64 MiB limit" {
		t.Fatalf("got %v", got)
	}
}

func TestMissingEvalSet(t *testing.T) {
	dir := t.TempDir()
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || got[0] != "steward.yaml: cannot read: no such file" {
		t.Fatalf("got %v", got)
	}
}

func TestErrorsImplementErrorAndCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("tasks:\n  - name: t\n    agent: x\n    samples:\n")
	for i := 0; i < MaxErrors+50; i++ {
		b.WriteString("      - {input: a, target: a, bogus: 1}\n")
	}
	dir := writeTree(t, map[string]string{"steward.yaml": b.String()})
	_, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{})
	var es *Errors
	if !errors.As(err, &es) {
		t.Fatalf("err %T", err)
	}
	if len(es.List) != MaxErrors || es.Len() != MaxErrors+50+(MaxErrors+50-1) {
		// every sample also duplicates... no: ids are positional, so only the bogus keys count.
		if es.Len() != MaxErrors+50 {
			t.Fatalf("listed %d, total %d", len(es.List), es.Len())
		}
	}
	if !strings.HasSuffix(err.Error(), "… and 50 more problems") {
		t.Errorf("tail: %q", err.Error()[len(err.Error())-40:])
	}
	if first := strings.SplitN(err.Error(), "\n", 2)[0]; !strings.HasSuffix(first, `steward.yaml:5: tasks[0].samples[0].bogus: unknown key "bogus" (known keys: choices, files, id, input, metadata, setup, target)`) {
		t.Errorf("first line %q", first)
	}
}

func TestRoundTripJSONAndYAML(t *testing.T) {
	dir := fullTree(t)
	es := mustLoad(t, dir, LoadOptions{})
	b, err := json.Marshal(es)
	if err != nil {
		t.Fatal(err)
	}
	var back EvalSet
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal JSON: %v\n%s", err, b)
	}
	b2, _ := json.Marshal(&back)
	if string(b) != string(b2) {
		t.Errorf("JSON round trip differs:\n%s\n%s", b, b2)
	}

	// YAML: an inline-only set written back out loads to the same thing.
	src := writeTree(t, map[string]string{"steward.yaml": `
name: rt
tasks:
  - name: a
    agent: echo hi
    attempts: 2
    timeout: 90s
    sandbox: {memory: 2g, cpus: 2}
    samples:
      - {id: x, input: hello, target: [h, hello]}
      - input: [{role: user, content: hi}]
        target: "1.10"
        metadata: {k: [1, 2.5, true, null]}
`})
	first := mustLoad(t, src, LoadOptions{})
	out, err := yaml.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	dst := writeTree(t, map[string]string{"steward.yaml": string(out)})
	second := mustLoad(t, dst, LoadOptions{})
	norm := func(es *EvalSet) string {
		c := *es
		c.File, c.Dir, c.Fleet = "", "", Fleet{}
		var tasks []*Task
		for _, t := range es.Tasks {
			tc := *t
			tc.Line = 0
			var ss []*Sample
			for _, s := range t.Samples {
				sc := *s
				sc.Source = ""
				ss = append(ss, &sc)
			}
			tc.Samples = ss
			tasks = append(tasks, &tc)
		}
		c.Tasks = tasks
		c.Name = ""
		j, _ := json.Marshal(c)
		return string(j)
	}
	if norm(first) != norm(second) {
		t.Errorf("YAML round trip differs:\n%s\n%s\n%s", norm(first), norm(second), out)
	}
}

func TestValueTypes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{{"90s", 90 * time.Second, false}, {"90", 90 * time.Second, false}, {"1.5", 1500 * time.Millisecond, false}, {"1h30m", 90 * time.Minute, false}, {"-1s", 0, true}, {"soon", 0, true}, {"", 0, true}, {"1e300", 0, true}} {
		got, err := ParseDuration(c.in)
		if (err != nil) != c.bad || (!c.bad && got.D() != c.want) {
			t.Errorf("ParseDuration(%q) = %v, %v", c.in, got, err)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{{"512m", 512 << 20, false}, {"512MiB", 512 << 20, false}, {"2g", 2 << 30, false}, {"1.5k", 1536, false}, {"1048576", 1 << 20, false}, {"10b", 10, false}, {"-1m", 0, true}, {"lots", 0, true}, {"99999999t", 0, true}} {
		got, err := ParseBytes(c.in)
		if (err != nil) != c.bad || (!c.bad && int64(got) != c.want) {
			t.Errorf("ParseBytes(%q) = %v, %v", c.in, got, err)
		}
	}
	if Bytes(512<<20).String() != "512m" || Bytes(1000).String() != "1000" {
		t.Error("Bytes.String")
	}
	for _, c := range []struct {
		in   string
		want RampRange
		err  string
	}{
		{"40,300", RampRange{true, 40, 300}, ""},
		{" 40 , 300 ", RampRange{true, 40, 300}, ""},
		{"[40, 300]", RampRange{true, 40, 300}, ""},
		{"40-300", RampRange{true, 40, 300}, ""},
		{"false", RampRange{}, ""},
		{"true", DefaultRamp, ""},
		{"300,40", RampRange{}, "samples_ramp low end 300 is above its high end 40"},
		{"0,40", RampRange{}, "samples_ramp low end 0 must be at least 1"},
		{"a,b", RampRange{}, `samples_ramp "a,b": both ends must be whole numbers`},
		{"40", RampRange{}, `samples_ramp "40": use "LO,HI"`},
		{"1,2,3", RampRange{}, `samples_ramp "1,2,3": use "LO,HI"`},
		{"", RampRange{}, "empty samples_ramp"},
	} {
		got, err := ParseRamp(c.in)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ParseRamp(%q) = %v, %v", c.in, got, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseRamp(%q) error %v, want %q", c.in, err, c.err)
		}
		if err == nil {
			if again, _ := ParseRamp(got.String()); again != got {
				t.Errorf("ParseRamp(String()) for %q = %v", c.in, again)
			}
		}
	}
	// YAML forms of samples_ramp.
	for in, want := range map[string]RampRange{"[40, 300]": {true, 40, 300}, "false": {}, "true": DefaultRamp} {
		var r RampRange
		if err := yaml.Unmarshal([]byte(in), &r); err != nil || r != want {
			t.Errorf("yaml %q = %v, %v", in, r, err)
		}
		j, _ := json.Marshal(r)
		var back RampRange
		if err := json.Unmarshal(j, &back); err != nil || back != r {
			t.Errorf("json round trip of %v: %s %v", r, j, err)
		}
	}
}

func TestIDs(t *testing.T) {
	if NormalizeID("  Q-7 ") != "q-7" {
		t.Error(NormalizeID("  Q-7 "))
	}
	ids := []string{"q10", "Q2", "10", "2", "b", "a", "02", "q1"}
	sorted := append([]string{}, ids...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if CompareIDs(sorted[j], sorted[i]) < 0 {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	if fmt.Sprint(sorted) != "[2 02 10 a b q1 Q2 q10]" {
		t.Errorf("order %v", sorted)
	}
	for _, a := range ids {
		for _, b := range ids {
			if CompareIDs(a, b) != -CompareIDs(b, a) || (a != b && CompareIDs(a, b) == 0) {
				t.Errorf("CompareIDs(%q,%q) not antisymmetric/total", a, b)
			}
		}
	}
}

func TestParseJSONL(t *testing.T) {
	data := "\ufeff{\"input\":\"a\",\"target\":\"a\"}\n   \n{\"id\":3,\"input\":\"b\"}\n{\"input\":[{\"role\":\"user\",\"content\":\"c\"}],\"target\":[\"x\",\"y\"],\"metadata\":{\"big\":12345678901234567890}}"
	ss, err := ParseJSONL("d.jsonl", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range ss {
		got = append(got, s.ID+"@"+s.Source)
	}
	if fmt.Sprint(got) != "[1@d.jsonl:1 3@d.jsonl:3 3@d.jsonl:4]" {
		t.Errorf("ids/sources %v", got)
	}
	if fmt.Sprint(ss[2].Targets()) != "[x y]" || ss[2].Metadata["big"] != 1.2345678901234567e19 {
		t.Errorf("sample 3 %+v", ss[2])
	}
	_, err = ParseJSONL("d.jsonl", []byte("{\"input\":\"a\"} {\"input\":\"b\"}\n{\"input\":\"a\"}x\n"))
	if err == nil || !strings.Contains(err.Error(), "d.jsonl:1: invalid JSON: more than one JSON value") || !strings.Contains(err.Error(), "d.jsonl:2:") {
		t.Errorf("err %v", err)
	}
}

func TestFleetPrecedence(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml":  okTask,
		"_steward.yaml": "max_sandboxes: 4\nmax_workers: 2\nmax_tasks: 3\nsamples_ramp: [10, 20]\ntend_interval: 2s\nrecord: rec\n",
	})
	env := map[string]string{EnvMaxSandboxes: "8", EnvMaxWorkers: "5", EnvSamplesRamp: "false", EnvRecord: filepath.Join(dir, "envrec")}
	getenv := func(k string) string { return env[k] }
	sb, ramp, tend := 16, "30,60", 3*time.Second
	es := mustLoad(t, dir, LoadOptions{Getenv: getenv, Flags: FleetOverrides{MaxSandboxes: &sb, SamplesRamp: &ramp, TendInterval: &tend}})
	f := es.Fleet
	checks := []struct {
		name      string
		got, want any
		src, wsrc string
	}{
		{"max_sandboxes flag>env>file", f.MaxSandboxes, 16, f.Sources["max_sandboxes"], "flag"},
		{"max_workers env>file", f.MaxWorkers, 5, f.Sources["max_workers"], "env STEWARD_MAX_WORKERS"},
		{"max_tasks file", f.MaxTasks, 3, f.Sources["max_tasks"], "_steward.yaml:3"},
		{"samples_ramp flag>env", f.SamplesRamp, RampRange{true, 30, 60}, f.Sources["samples_ramp"], "flag"},
		{"tend flag>file", f.TendInterval.D(), 3 * time.Second, f.Sources["tend_interval"], "flag"},
		{"record env>file", f.Record, filepath.Join(dir, "envrec"), f.Sources["record"], "env STEWARD_RECORD"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) || c.src != c.wsrc {
			t.Errorf("%s: got %v from %q, want %v from %q", c.name, c.got, c.src, c.want, c.wsrc)
		}
	}
	// Env alone over file; false from env disables the ramp.
	f2, err := LoadFleet(filepath.Join(dir, FleetFileName), getenv, FleetOverrides{})
	if err != nil || f2.SamplesRamp.Enabled || f2.MaxSandboxes != 8 || f2.Record != filepath.Join(dir, "envrec") {
		t.Errorf("env over file: %+v %v", f2, err)
	}
	// File alone: relative record resolves against the file's directory.
	f3, err := LoadFleet(filepath.Join(dir, FleetFileName), nil, FleetOverrides{})
	if err != nil || f3.Record != filepath.Join(dir, "rec") || f3.SamplesRamp != (RampRange{true, 10, 20}) {
		t.Errorf("file only: %+v %v", f3, err)
	}
	// A bad flag is refused even when the file is good.
	neg := -1
	if _, err := LoadFleet(filepath.Join(dir, FleetFileName), nil, FleetOverrides{MaxWorkers: &neg}); err == nil || err.Error() != "flag: max_workers: must be 0 (unset) or more, got -1" {
		t.Errorf("bad flag: %v", err)
	}
}

// The supervisor re-reads _steward.yaml at each tend: a bad edit is refused
// with a message and the caller keeps the last good range.
func TestFleetReReadKeepsLastGood(t *testing.T) {
	dir := writeTree(t, map[string]string{"_steward.yaml": "samples_ramp: [50, 200]\n"})
	path := filepath.Join(dir, FleetFileName)
	good, err := LoadFleet(path, nil, FleetOverrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("samples_ramp: [50, 100]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	narrowed, err := LoadFleet(path, nil, FleetOverrides{})
	if err != nil || narrowed.SamplesRamp.Hi != 100 {
		t.Fatalf("narrowed: %+v %v", narrowed, err)
	}
	good = narrowed
	if err := os.WriteFile(path, []byte("samples_ramp: [100, 50]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := LoadFleet(path, nil, FleetOverrides{})
	var es *Errors
	if !errors.As(err, &es) || !strings.HasSuffix(err.Error(), "_steward.yaml:1: samples_ramp: samples_ramp low end 100 is above its high end 50") {
		t.Fatalf("bad edit: %v", err)
	}
	if bad.SamplesRamp.Enabled || good.SamplesRamp.Hi != 100 {
		t.Errorf("bad read must return a zero Fleet: %+v", bad)
	}
	// An empty file (comments only) is defaults.
	if err := os.WriteFile(path, []byte("# nothing yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if empty, err := LoadFleet(path, nil, FleetOverrides{}); err != nil || empty.SamplesRamp != DefaultRamp || empty.File != path {
		t.Errorf("empty file: %+v %v", empty, err)
	}
	// A missing file is defaults, not an error.
	os.Remove(path)
	def, err := LoadFleet(path, nil, FleetOverrides{})
	if err != nil || def.SamplesRamp != DefaultRamp || def.File != "" {
		t.Errorf("missing file: %+v %v", def, err)
	}
}

func TestExpandInputs(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"a.py": "", "lib/b.py": "", "lib/x/c.py": "", "lib/x/c.txt": "", ".git/d.py": "", "lib/.git/e.py": "", ".steward/record.py": "",
	})
	for glob, want := range map[string]string{
		"**/*.py":   "[a.py lib/b.py lib/x/c.py]",
		"lib/**":    "[lib/b.py lib/x/c.py lib/x/c.txt]",
		"lib/*.py":  "[lib/b.py]",
		"lib/x/c.*": "[lib/x/c.py lib/x/c.txt]",
		"a.py":      "[a.py]",
		"nope/*":    "[]",
	} {
		got, err := ExpandInputs(dir, []string{glob})
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("%s: %v %v, want %s", glob, got, err, want)
		}
	}
	if _, err := ExpandInputs(dir, []string{"a**b"}); err == nil {
		t.Error("a**b accepted")
	}
}

func TestYesIsNotABool(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": okTask + "    early_exit: yes\n"})
	got := problems(t, dir, LoadOptions{})
	if len(got) != 1 || got[0] != `steward.yaml:6: tasks[0].early_exit: expected true or false, got "yes"` {
		t.Fatalf("got %v", got)
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": okTask})
	es, err := Load(dir, LoadOptions{})
	if err != nil || es.File != filepath.Join(dir, "steward.yaml") {
		t.Fatalf("Load(dir) = %v, %v", es, err)
	}
}

// BenchmarkLoadJSONL loads an eval set whose task reads 10 000 JSONL samples.
func BenchmarkLoadJSONL(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "{\"id\":\"s%d\",\"input\":\"What is %d+%d?\",\"target\":\"%d\",\"metadata\":{\"i\":%d,\"tags\":[\"a\",\"b\"]}}\n", i, i, i, 2*i, i)
	}
	dir := writeTree(b, map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": sb.String()})
	b.SetBytes(int64(sb.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadYAML loads an eval set with 2 000 inline samples.
func BenchmarkLoadYAML(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("tasks:\n  - name: t\n    agent: x\n    samples:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&sb, "      - id: s%d\n        input: What is %d+%d?\n        target: \"%d\"\n", i, i, i, 2*i)
	}
	dir := writeTree(b, map[string]string{"steward.yaml": sb.String()})
	b.SetBytes(int64(sb.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSymlinkInsideIsAllowed(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml": okTask + "    files: {h.py: link.py}\n",
		"real/h.py":    "x",
		"link.py":      "symlink:real/h.py",
	})
	es := mustLoad(t, dir, LoadOptions{})
	if b, err := FileData(es.Tasks[0].Files["h.py"]); err != nil || string(b) != "x" {
		t.Fatalf("FileData = %q, %v", b, err)
	}
}

// transcripts: full by default, from _steward.yaml or STEWARD_TRANSCRIPTS
// (env wins); an unknown mode is refused with file, line and field.
func TestFleetTranscripts(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": okTask, "_steward.yaml": "tend_interval: 2s\ntranscripts: metadata\n"})
	path := filepath.Join(dir, FleetFileName)
	f, err := LoadFleet(path, nil, FleetOverrides{})
	if err != nil || f.Transcripts != "metadata" || f.Sources["transcripts"] != "_steward.yaml:2" {
		t.Errorf("from file: %q from %q (%v)", f.Transcripts, f.Sources["transcripts"], err)
	}
	env := func(k string) string {
		if k == EnvTranscripts {
			return "off"
		}
		return ""
	}
	if f, err := LoadFleet(path, env, FleetOverrides{}); err != nil || f.Transcripts != "off" || f.Sources["transcripts"] != "env STEWARD_TRANSCRIPTS" {
		t.Errorf("from env: %q from %q (%v)", f.Transcripts, f.Sources["transcripts"], err)
	}
	if f := DefaultFleet(dir); f.Transcripts != "full" {
		t.Errorf("default %q, want full", f.Transcripts)
	}
	bad := writeTree(t, map[string]string{"steward.yaml": okTask, "_steward.yaml": "transcripts: everything\n"})
	_, err = LoadFleet(filepath.Join(bad, FleetFileName), nil, FleetOverrides{})
	if err == nil || !strings.Contains(err.Error(), "_steward.yaml:1") || !strings.Contains(err.Error(), "transcripts") || !strings.Contains(err.Error(), "full, metadata or off") {
		t.Errorf("bad mode: %v", err)
	}
	if _, err := LoadFleet(path, func(k string) string {
		if k == EnvTranscripts {
			return "most"
		}
		return ""
	}, FleetOverrides{}); err == nil || !strings.Contains(err.Error(), "STEWARD_TRANSCRIPTS") {
		t.Errorf("bad env: %v", err)
	}
}

// secrets: in _steward.yaml names variables whose values the gateway scrubs;
// a value written instead of a name is refused at its line.
func TestFleetSecrets(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml":  okTask,
		"_steward.yaml": "max_tasks: 1\nsecrets: [GH_PAT, DB_PASSWORD]\n",
	})
	f, err := LoadFleet(filepath.Join(dir, FleetFileName), nil, FleetOverrides{})
	if err != nil || !reflect.DeepEqual(f.Secrets, []string{"GH_PAT", "DB_PASSWORD"}) || f.Sources["secrets"] != "_steward.yaml:2" {
		t.Fatalf("secrets: %v from %q, %v", f.Secrets, f.Sources["secrets"], err)
	}
	bad := writeTree(t, map[string]string{"_steward.yaml": "secrets:\n  - OK_NAME\n  - ghp_abc123 value\n"})
	_, err = LoadFleet(filepath.Join(bad, FleetFileName), nil, FleetOverrides{})
	if err == nil || !strings.Contains(err.Error(), "_steward.yaml:1: secrets") || !strings.Contains(err.Error(), "not an environment variable name") {
		t.Fatalf("bad secret name: %v", err)
	}
}

// One large string aliased thousands of times stays under the node budget
// but would decode to gigabytes: it is refused while decoding, with the
// file and line of the alias that crossed the byte budget.
func TestAliasAmplificationBoundedByBytes(t *testing.T) {
	var b strings.Builder
	b.WriteString("tasks:\n  - name: t\n    agent: x\n    scorer: {match: exact}\n    samples:\n")
	b.WriteString("      - {input: &big \"" + strings.Repeat("A", 1<<20) + "\", target: \"1\"}\n")
	for i := 1; i < 5000; i++ {
		b.WriteString("      - {input: *big, target: \"1\"}\n")
	}
	dir := writeTree(t, map[string]string{"steward.yaml": b.String()})
	got := problems(t, dir, LoadOptions{})
	if len(got) == 0 {
		t.Fatal("an eval set that decodes to 5 GB was accepted")
	}
	// Sample 0 (line 6) holds the anchor; the 16 MiB budget is crossed by the 16th copy (sample 15, line 21).
	if len(got) != 1 || !strings.Contains(got[0], "steward.yaml:21:") || !strings.Contains(got[0], "tasks[0].samples[15].input") || !strings.Contains(got[0], "decodes to more than") {
		t.Fatalf("got %v", got)
	}
}
