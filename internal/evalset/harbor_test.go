package evalset

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func harborFixtures(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../../testdata/harbor")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestTasksFromHarbor(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": "tasks:\n  - name: fixtures\n    agent: run-agent\n    tasks_from:\n      harbor: " + harborFixtures(t) + "\n"})
	es := mustLoad(t, dir, LoadOptions{Getenv: func(k string) string { return map[string]string{"FIXTURE_MODE": "on"}[k] }})
	if len(es.Warnings) != 0 {
		t.Errorf("warnings: %v", es.Warnings)
	}
	tk := es.Tasks[0]
	var ids []string
	for _, s := range tk.Samples {
		ids = append(ids, s.ID)
	}
	if !reflect.DeepEqual(ids, []string{"background-server", "reward-json", "system-state", "timeout", "write-file"}) {
		t.Fatalf("ids %v", ids)
	}
	s := tk.Samples[4]
	if !strings.HasPrefix(s.Input.(string), "Write the word `hello`") || s.Metadata["difficulty"] != "easy" {
		t.Errorf("sample %+v", s)
	}
	want := &Sandbox{Build: filepath.Join(harborFixtures(t), "write-file", "environment"), BuildNetwork: "default", CPUs: 1, Memory: 256 << 20, Disk: 64 << 20,
		PIDs: DefaultPIDs, Network: "gateway", Workdir: "/app"}
	if !reflect.DeepEqual(s.Sandbox, want) {
		t.Errorf("sandbox %+v, want %+v", s.Sandbox, want)
	}
	if s.Timeout.D() != time.Minute || s.ScorerTimeout.D() != 30*time.Second || s.BuildTimeout.D() != 10*time.Minute {
		t.Errorf("timeouts %v %v %v", s.Timeout, s.ScorerTimeout, s.BuildTimeout)
	}
	if s.Harbor.VerifierMode != "shared" || string(s.Harbor.Tests["test.sh"].Data) == "" || s.Harbor.Tests["test.sh"].Mode&0o100 == 0 || s.Harbor.Solution["solve.sh"].Data == nil {
		t.Errorf("harbor %+v", s.Harbor)
	}
	if got := tk.Samples[2].Harbor.VerifierEnv["EXPECTED_MODE"]; got != "on" {
		t.Errorf("verifier env %q, want the host's FIXTURE_MODE", got)
	}
	if tk.Samples[1].Harbor.VerifierMode != "separate" || tk.Samples[3].Timeout.D() != 5*time.Second {
		t.Errorf("reward-json %+v, timeout %v", tk.Samples[1].Harbor, tk.Samples[3].Timeout)
	}
	if !tk.HarborSamples() || tk.Scorer.Command != "" {
		t.Errorf("task %+v", tk)
	}
	for _, s := range tk.Samples {
		if !s.Harbor.KeepProcesses {
			t.Errorf("%s: a Harbor dataset's shared verifier keeps the agent's processes by default", s.ID)
		}
	}
}

// tasks_from's keep_processes: false reaches every sample; a value that is
// not a boolean is an error at its line.
func TestTasksFromKeepProcesses(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": "tasks:\n  - name: fixtures\n    agent: run-agent\n    tasks_from:\n      harbor: " + harborFixtures(t) + "\n      keep_processes: false\n"})
	es := mustLoad(t, dir, LoadOptions{})
	for _, s := range es.Tasks[0].Samples {
		if s.Harbor.KeepProcesses {
			t.Errorf("%s: keep_processes: false not applied", s.ID)
		}
	}
	dir = writeTree(t, map[string]string{"steward.yaml": "tasks:\n  - name: fixtures\n    agent: run-agent\n    tasks_from:\n      harbor: " + harborFixtures(t) + "\n      keep_processes: sometimes\n"})
	_, err := Load(filepath.Join(dir, "steward.yaml"), LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "steward.yaml:6") || !strings.Contains(err.Error(), "keep_processes") {
		t.Errorf("keep_processes: sometimes: %v", err)
	}
}

// TestTasksFromHarborAllowlist: a Harbor task's allowlist reaches its
// sample: network allowlist, and the hosts (normalized) beside the task's.
func TestTasksFromHarborAllowlist(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml":        "tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n",
		"ds/t/instruction.md": "do it", "ds/t/tests/test.sh": "true", "ds/t/environment/Dockerfile": "FROM scratch\n",
		"ds/t/task.toml": "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org\", \"*.pythonhosted.org\"]\n",
	})
	es := mustLoad(t, dir, LoadOptions{})
	s := es.Tasks[0].Samples[0]
	if s.Sandbox.Network != "allowlist" || !reflect.DeepEqual(s.Harbor.AllowedHosts, []string{"*.pythonhosted.org", "pypi.org"}) {
		t.Fatalf("network %q, hosts %q", s.Sandbox.Network, s.Harbor.AllowedHosts)
	}
}

func TestTasksFromHarborRefused(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		files map[string]string
		want  []string
	}{
		{"toml", "tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/environment/Dockerfile": "FROM scratch\n", "ds/t/tests/test.sh": "true",
			"ds/t/task.toml": "[environment]\ncpus = 1\ngpus = 1\n\n[[steps]]\nname = \"x\"\n",
		}, []string{
			"ds/t/task.toml:3: environment.gpus: GPUs are not supported: Steward's sandboxes have none (got 1)",
			"ds/t/task.toml:5: steps: multi-step tasks are not supported: Steward runs one instruction and one verifier per sample",
		}},
		{"conflicts", "tasks:\n  - name: d\n    agent: a\n    timeout: 1m\n    samples: [{input: x}]\n    scorer: {command: x}\n    sandbox: {image: x}\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/environment/Dockerfile": "FROM scratch\n", "ds/t/tests/test.sh": "true", "ds/t/task.toml": "",
		}, []string{
			"steward.yaml:4: tasks[0].timeout: each Harbor task sets its own timeouts ([agent] and [verifier] timeout_sec): drop timeout",
			"steward.yaml:5: tasks[0].samples: a task with tasks_from takes its samples from the dataset: drop samples",
			"steward.yaml:6: tasks[0].scorer: a Harbor task's verifier (tests/test.sh and its reward file) is the scorer: drop scorer",
			"steward.yaml:7: tasks[0].sandbox.image: each Harbor task sets its own image (task.toml [environment]): drop it here",
		}},
		{"kubernetes", "tasks:\n  - name: d\n    agent: a\n    sandbox: {provider: kubernetes}\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/environment/Dockerfile": "FROM scratch\n", "ds/t/tests/test.sh": "true", "ds/t/task.toml": "",
		}, []string{
			"steward.yaml:4: tasks[0].sandbox.provider: sample t: the kubernetes provider cannot build images",
		}},
		{"kubernetes compose", "tasks:\n  - name: d\n    agent: a\n    sandbox: {provider: kubernetes}\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/tests/test.sh": "true", "ds/t/task.toml": "",
			"ds/t/environment/docker-compose.yaml": "services:\n  main: {image: reg/main:1}\n  db: {image: reg/db:1}\n",
		}, []string{
			"steward.yaml:4: tasks[0].sandbox.provider: sample t: the kubernetes provider cannot run compose environments",
		}},
		{"kubernetes allowlist", "tasks:\n  - name: d\n    agent: a\n    sandbox: {provider: kubernetes}\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/tests/test.sh": "true",
			"ds/t/task.toml": "[environment]\ndocker_image = \"reg/x:1\"\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
		}, []string{
			"steward.yaml:4: tasks[0].sandbox.provider: sample t: the kubernetes provider cannot enforce a network allowlist (network_mode = \"allowlist\", allowed_hosts): a NetworkPolicy filters by address, not by host name",
		}},
		{"missing", "tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: nope}\n", nil, []string{
			"nope: cannot read the Harbor dataset: no such file or directory",
		}},
		{"secret", "tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n", map[string]string{
			"ds/t/instruction.md": "do it", "ds/t/environment/Dockerfile": "FROM scratch\n", "ds/t/tests/test.sh": "true",
			"ds/t/task.toml": "[verifier]\nenv = { KEY = \"${OPENAI_API_KEY}\" }\n",
		}, []string{
			"ds/t/task.toml:2: verifier.env.KEY: ${OPENAI_API_KEY}: OPENAI_API_KEY holds a secret (always a secret) and is never expanded",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"steward.yaml": c.yaml}
			for k, v := range c.files {
				files[k] = v
			}
			dir := writeTree(t, files)
			got := problems(t, dir, LoadOptions{Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "sk-x"}[k] }})
			for _, w := range c.want {
				found := false
				for _, g := range got {
					found = found || strings.HasPrefix(g, w)
				}
				if !found {
					t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestTasksFromHarborWarnings(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"steward.yaml":        "tasks:\n  - name: d\n    agent: a\n    tasks_from: {harbor: ds}\n",
		"ds/t/instruction.md": "do it", "ds/t/environment/Dockerfile": "FROM scratch\n", "ds/t/tests/test.sh": "true",
		"ds/t/task.toml": "[environment]\ncpu = 2\n[environment.healthcheck]\ncommand = \"true\"\n",
	})
	es := mustLoad(t, dir, LoadOptions{})
	var got []string
	for _, w := range es.Warnings {
		got = append(got, strings.ReplaceAll(w.Error(), dir+string(filepath.Separator), ""))
	}
	want := []string{
		"ds/t/task.toml:2: environment.cpu: not a task.toml key Steward knows (schema 1.0–1.4): ignored",
		"ds/t/task.toml:3: environment.healthcheck: not run: Steward starts the agent without waiting for a health check, and does not start the image's own command",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}
