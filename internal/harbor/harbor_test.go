package harbor

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writeTask writes files (path -> content) under dir/name.
func writeTask(t *testing.T, dir, name string, files map[string]string) string {
	t.Helper()
	td := filepath.Join(dir, name)
	for p, c := range files {
		full := filepath.Join(td, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return td
}

func base(toml string) map[string]string {
	return map[string]string{
		"instruction.md":         "Write hello to /app/out.txt\n",
		"task.toml":              toml,
		"environment/Dockerfile": "FROM scratch\n",
		"tests/test.sh":          "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
	}
}

const everyField = `schema_version = "1.4"
source = "terminal-bench"

[task]
name = "org/hello"
version = "2.0"
description = "says hello"
keywords = ["files", "shell"]
authors = [{ name = "Ada", email = "ada@example.com" }]

[metadata]
difficulty = "easy"
category = "files"
tags = ["a", "b"]
created = 2024-05-01

[agent]
timeout_sec = 120.5

[verifier]
timeout_sec = 30
environment_mode = "separate"
env = { TEST_DIR = "/tests", TOKEN = "${HB_TOKEN:-none}", FROM_HOST = "${HB_HOST}" }

[solution]
env = { MODE = "oracle" }

[environment]
build_timeout_sec = 900
cpus = 2
memory_mb = 4096
storage_mb = 20480
network_mode = "no-network"
workdir = "/app"
env = { LANG = "C.UTF-8" }
os = "linux"
gpus = 0
`

func expand(getenv map[string]string) func(string) (string, []string, error) {
	return func(s string) (string, []string, error) {
		var names []string
		out := s
		for {
			i := strings.Index(out, "${")
			if i < 0 {
				return out, names, nil
			}
			j := strings.IndexByte(out[i:], '}')
			if j < 0 {
				return "", nil, errors.New("${ without its }")
			}
			inner := out[i+2 : i+j]
			name, def, _ := strings.Cut(inner, ":-")
			v := getenv[name]
			if v == "" {
				v = def
			}
			names = append(names, name)
			out = out[:i] + v + out[i+j+1:]
		}
	}
}

func TestEveryField(t *testing.T) {
	dir := t.TempDir()
	files := base(everyField)
	files["tests/helper/check.py"] = "print(1)\n"
	files["solution/solve.sh"] = "echo hello > /app/out.txt\n"
	writeTask(t, dir, "hello", files)
	r := Load(dir, "ds", Options{Expand: expand(map[string]string{"HB_HOST": "h"})})
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	if len(r.Tasks) != 1 {
		t.Fatalf("tasks: %d", len(r.Tasks))
	}
	tk := r.Tasks[0]
	want := map[string]any{
		"ID": "hello", "Instruction": "Write hello to /app/out.txt\n",
		"Image": "", "Build": filepath.Join(dir, "hello", "environment"), "BuildTimeout": 900 * time.Second,
		"CPUs": 2.0, "MemoryBytes": int64(4096 << 20), "StorageBytes": int64(20480 << 20),
		"Network": NetworkNone, "Workdir": "/app", "Env": map[string]string{"LANG": "C.UTF-8"},
		"AgentTimeout": 120500 * time.Millisecond, "VerifierTimeout": 30 * time.Second,
		"VerifierMode": ModeSeparate,
		"VerifierEnv":  map[string]string{"TEST_DIR": "/tests", "TOKEN": "none", "FROM_HOST": "h"},
		"SolutionEnv":  map[string]string{"MODE": "oracle"},
	}
	v := reflect.ValueOf(tk).Elem()
	for k, w := range want {
		if got := v.FieldByName(k).Interface(); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", k, got, w)
		}
	}
	if got := sortedKeys(tk.Tests); !reflect.DeepEqual(got, []string{"helper/check.py", "test.sh"}) {
		t.Errorf("tests = %v", got)
	}
	if string(tk.Solution["solve.sh"].Data) != "echo hello > /app/out.txt\n" {
		t.Errorf("solution = %v", tk.Solution)
	}
	md := tk.Metadata
	if md["difficulty"] != "easy" || md["created"] != "2024-05-01" || !reflect.DeepEqual(md["tags"], []any{"a", "b"}) {
		t.Errorf("metadata = %#v", md)
	}
	h := md["harbor"].(map[string]any)
	if h["name"] != "org/hello" || h["version"] != "2.0" || h["description"] != "says hello" || h["schema_version"] != "1.4" || h["source"] != "terminal-bench" ||
		!reflect.DeepEqual(h["keywords"], []any{"files", "shell"}) || !reflect.DeepEqual(h["authors"], []any{map[string]any{"name": "Ada", "email": "ada@example.com"}}) {
		t.Errorf("harbor identity = %#v", h)
	}
	var refs []string
	for _, ref := range r.Refs {
		refs = append(refs, ref.Name+"@"+ref.Key)
		if ref.Line != 23 {
			t.Errorf("ref %s at line %d, want 23", ref.Name, ref.Line)
		}
	}
	if !reflect.DeepEqual(refs, []string{"HB_HOST@verifier.env.FROM_HOST", "HB_TOKEN@verifier.env.TOKEN"}) {
		t.Errorf("refs = %v", refs)
	}
}

func TestDefaultsAndLegacy(t *testing.T) {
	dir := t.TempDir()
	writeTask(t, dir, "a", base("version = \"1.0\"\n[environment]\nmemory = \"1G\"\nstorage = \"512M\"\nallow_internet = false\ndocker_image = \"busybox:steward\"\n"))
	writeTask(t, dir, "b", base(""))
	r := Load(dir, "ds", Options{})
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	a, b := r.Tasks[0], r.Tasks[1]
	if a.MemoryBytes != 1<<30 || a.StorageBytes != 512<<20 || a.Network != NetworkNone || a.Image != "busybox:steward" || a.Build != "" {
		t.Errorf("legacy: %+v", a)
	}
	if b.AgentTimeout != DefaultTimeout || b.VerifierTimeout != DefaultTimeout || b.BuildTimeout != DefaultBuildTimeout ||
		b.CPUs != 1 || b.MemoryBytes != 2048<<20 || b.StorageBytes != 10240<<20 || b.Network != NetworkPublic || b.VerifierMode != ModeShared || b.Solution != nil {
		t.Errorf("defaults: %+v", b)
	}
}

// TestAllowlist: network_mode = "allowlist" loads with its hosts
// normalized (lower case, no trailing dot, sorted, once each), wildcards
// kept; a phase may repeat the environment's list.
func TestAllowlist(t *testing.T) {
	dir := t.TempDir()
	writeTask(t, dir, "a", base("[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org.\", \"*.pythonhosted.org\", \"pypi.org\"]\n"+
		"[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*.pythonhosted.org\", \"pypi.org\"]\n[verifier]\nallowed_hosts = [\"pypi.org\", \"*.PythonHosted.org\"]\n"))
	r := Load(dir, "ds", Options{})
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	a := r.Tasks[0]
	if a.Network != NetworkAllowlist || !reflect.DeepEqual(a.AllowedHosts, []string{"*.pythonhosted.org", "pypi.org"}) {
		t.Fatalf("network %q, hosts %q", a.Network, a.AllowedHosts)
	}
}

func TestOneTaskDir(t *testing.T) {
	dir := t.TempDir()
	td := writeTask(t, dir, "solo", base(""))
	r := Load(td, "solo", Options{})
	if len(r.Problems) != 0 || len(r.Tasks) != 1 || r.Tasks[0].ID != "solo" {
		t.Fatalf("%v %v", r.Problems, r.Tasks)
	}
}

func TestRefused(t *testing.T) {
	cases := []struct {
		name string
		toml string
		edit func(files map[string]string)
		want string // "file:line: key: message" prefix
		warn bool
	}{
		{"syntax", "[agent]\ntimeout_sec = = 3\n", nil, "ds/t/task.toml:2: invalid TOML", false},
		{"type", "[agent]\ntimeout_sec = \"ten\"\n", nil, "ds/t/task.toml:2: agent.timeout_sec: invalid TOML", false},
		{"steps", "[[steps]]\nname = \"one\"\n", nil, "ds/t/task.toml:1: steps: multi-step tasks are not supported", false},
		{"windows", "[environment]\nos = \"windows\"\n", nil, "ds/t/task.toml:2: environment.os: \"windows\": only linux", false},
		{"gpus", "[environment]\ncpus = 1\ngpus = 2\n", nil, "ds/t/task.toml:3: environment.gpus: GPUs are not supported", false},
		{"gpu_types", "[environment]\ngpu_types = [\"h100\"]\n", nil, "ds/t/task.toml:2: environment.gpu_types: GPUs", false},
		{"tpu", "[environment]\ntpu = \"v4\"\n", nil, "ds/t/task.toml:2: environment.tpu: TPUs", false},
		{"mcp", "[[environment.mcp_servers]]\nname = \"x\"\ntransport = \"sse\"\nurl = \"http://x\"\n", nil, "ds/t/task.toml:1: environment.mcp_servers: MCP servers are not supported yet", false},
		{"allowlist without hosts", "[environment]\nnetwork_mode = \"allowlist\"\n", nil, "ds/t/task.toml:2: environment.network_mode: allowlist without allowed_hosts", false},
		{"allowlist empty", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = []\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: empty", false},
		{"allowed host IP", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"169.254.169.254\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 2: \"169.254.169.254\": an IP address", false},
		{"allowed host inet_aton", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"0x7f.1\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 1: \"0x7f.1\": an IP address", false},
		{"allowed host URL", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"https://pypi.org/simple\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 1: \"https://pypi.org/simple\": an allowed host is a host name alone", false},
		{"allowed host port", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org:443\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 1", false},
		{"allowed host single label", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"localhost\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 1: \"localhost\": a single-label name", false},
		{"allowed host wide wildcard", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*.org\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: entry 1: \"*.org\": a wildcard over a single label", false},
		{"allowed hosts without allowlist", "[environment]\nnetwork_mode = \"no-network\"\nallowed_hosts = [\"pypi.org\"]\n", nil, "ds/t/task.toml:3: environment.allowed_hosts: applies only with network_mode = \"allowlist\"", false},
		{"phase hosts differ", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"github.com\"]\n", nil, "ds/t/task.toml:6: verifier.allowed_hosts: a host list for the verifier phase alone", false},
		{"phase hosts, public env", "[agent]\nallowed_hosts = [\"pypi.org\"]\n", nil, "ds/t/task.toml:2: agent.allowed_hosts: a host list for the agent phase alone", false},
		{"phase allowlist without hosts", "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n[agent]\nnetwork_mode = \"allowlist\"\n", nil, "ds/t/task.toml:5: agent.network_mode: allowlist without the agent phase's allowed_hosts", false},
		{"phase allowlist, env public", "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n", nil, "ds/t/task.toml:2: agent.network_mode: a network for the agent phase alone", false},
		{"badnet", "[environment]\nnetwork_mode = \"host\"\n", nil, "ds/t/task.toml:2: environment.network_mode: \"host\"", false},
		{"phase net", "[verifier]\nnetwork_mode = \"no-network\"\n", nil, "ds/t/task.toml:2: verifier.network_mode: a network for the verifier phase alone", false},
		{"user", "[agent]\nuser = \"app\"\n", nil, "ds/t/task.toml:2: agent.user: running the agent as another user", false},
		{"collect", "[[verifier.collect]]\ncommand = \"git diff\"\n", nil, "ds/t/task.toml:1: verifier.collect: collect hooks", false},
		{"verifier env", "[verifier.environment]\ndocker_image = \"x\"\n", nil, "ds/t/task.toml:1: verifier.environment: a verifier environment", false},
		{"mode", "[verifier]\nenvironment_mode = \"both\"\n", nil, "ds/t/task.toml:2: verifier.environment_mode: \"both\"", false},
		{"timeout", "[verifier]\ntimeout_sec = 0\n", nil, "ds/t/task.toml:2: verifier.timeout_sec: must be more than 0", false},
		{"cpus", "[environment]\ncpus = -1\n", nil, "ds/t/task.toml:2: environment.cpus: must be more than 0", false},
		{"memory", "[environment]\nmemory = \"lots\"\n", nil, "ds/t/task.toml:2: environment.memory: \"lots\" is not a size", false},
		{"both sizes", "[environment]\nmemory_mb = 10\nmemory = \"1G\"\n", nil, "ds/t/task.toml:3: environment.memory: set memory_mb or memory", false},
		{"workdir", "[environment]\nworkdir = \"app\"\n", nil, "ds/t/task.toml:2: environment.workdir: \"app\" must be an absolute path", false},
		{"env name", "[verifier]\nenv = { \"1X\" = \"y\" }\n", nil, "ds/t/task.toml:2: verifier.env.1X: \"1X\" is not", false},
		{"steward env", "[environment.env]\nSTEWARD_INPUT = \"y\"\n", nil, "ds/t/task.toml:2: environment.env.STEWARD_INPUT: STEWARD_ variables", false},
		{"unknown", "[environment]\ncpu = 2\n", nil, "ds/t/task.toml:2: environment.cpu: warning: not a task.toml key", true},
		{"newer", "schema_version = \"2.0\"\n", nil, "ds/t/task.toml:1: schema_version: warning: \"2.0\" is newer", true},
		{"healthcheck", "[environment.healthcheck]\ncommand = \"true\"\n", nil, "ds/t/task.toml:1: environment.healthcheck: warning: not run", true},
		{"skills", "[environment]\nskills_dir = \"/skills\"\n", nil, "ds/t/task.toml:2: environment.skills_dir: warning", true},
		{"artifacts", "artifacts = [\"/app/x\"]\n", nil, "ds/t/task.toml:1: artifacts: warning: not collected", true},
		{"compose", "", func(f map[string]string) {
			delete(f, "environment/Dockerfile")
			f["environment/docker-compose.yaml"] = "services: {}\n"
		}, "ds/t/environment/docker-compose.yaml:1: services: no service main", false},
		{"no env", "", func(f map[string]string) { delete(f, "environment/Dockerfile") }, "ds/t/task.toml: environment.docker_image: the task has no environment", false},
		{"no instruction", "", func(f map[string]string) { delete(f, "instruction.md") }, "ds/t/instruction.md: cannot read: no such file", false},
		{"empty instruction", "", func(f map[string]string) { f["instruction.md"] = " \n" }, "ds/t/instruction.md: is empty", false},
		{"bad utf8", "", func(f map[string]string) { f["instruction.md"] = "\xff" }, "ds/t/instruction.md: is not valid UTF-8", false},
		{"no tests", "", func(f map[string]string) { delete(f, "tests/test.sh") }, "ds/t/tests: missing", false},
		{"no test.sh", "", func(f map[string]string) { delete(f, "tests/test.sh"); f["tests/x.sh"] = "" }, "ds/t/tests: has no test.sh", false},
		{"no solve.sh", "", func(f map[string]string) { f["solution/x.sh"] = "" }, "ds/t/solution: has no solve.sh", false},
		{"dash name", "", func(f map[string]string) { f["tests/-rf"] = "" }, "ds/t/tests/-rf: has a name Steward does not copy", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := base(c.toml)
			if c.edit != nil {
				c.edit(f)
			}
			writeTask(t, dir, "t", f)
			r := Load(dir, "ds", Options{})
			var got []string
			found := false
			for _, p := range r.Problems {
				got = append(got, p.Error())
				if strings.HasPrefix(p.Error(), c.want) && p.Warning == c.warn {
					found = true
				}
			}
			if !found {
				t.Fatalf("want %q (warning %v), got %q", c.want, c.warn, got)
			}
			if !c.warn && len(r.Tasks) != 0 {
				t.Errorf("a refused task loaded")
			}
			if c.warn && len(r.Tasks) != 1 {
				t.Errorf("a task with only warnings did not load: %q", got)
			}
		})
	}
}

func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	td := writeTask(t, dir, "t", base(""))
	outside := filepath.Join(dir, "secret")
	os.WriteFile(outside, []byte("x"), 0o600)
	if err := os.Symlink(outside, filepath.Join(td, "tests", "link")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(td, "tests", "big")
	f, _ := os.Create(big)
	f.Truncate(MaxFileSize + 1)
	f.Close()
	td2 := writeTask(t, dir, "u", base(""))
	os.Remove(filepath.Join(td2, "instruction.md"))
	os.Symlink(outside, filepath.Join(td2, "instruction.md"))
	os.Symlink(td, filepath.Join(dir, "v"))
	r := Load(dir, "ds", Options{})
	want := []string{
		"ds/t/tests/big: is 16777217 bytes, more than the 16777216 allowed",
		"ds/t/tests/link: is a symbolic link",
		"ds/u/instruction.md: is a symbolic link",
		"ds/v: is a symbolic link",
	}
	var got []string
	for _, p := range r.Problems {
		got = append(got, p.Error())
	}
	for _, w := range want {
		ok := false
		for _, g := range got {
			ok = ok || strings.HasPrefix(g, w)
		}
		if !ok {
			t.Errorf("missing %q in %q", w, got)
		}
	}
	if len(r.Tasks) != 0 {
		t.Errorf("hostile tasks loaded: %d", len(r.Tasks))
	}
}

func TestEmptyDataset(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "notes"), 0o755)
	r := Load(dir, "ds", Options{})
	if len(r.Errs()) != 1 || !strings.Contains(r.Errs()[0].Msg, "holds no Harbor tasks") {
		t.Fatalf("%v", r.Problems)
	}
	if r := Load(filepath.Join(dir, "nope"), "nope", Options{}); len(r.Errs()) != 1 {
		t.Fatalf("%v", r.Problems)
	}
}

// A task.toml shaped as Terminal-Bench 2's are (schema 1.1: empty
// artifacts, mcp_servers and env tables, gpus = 0, allow_internet, both a
// Dockerfile and a prebuilt docker_image) loads with no problem at all.
func TestTerminalBenchShape(t *testing.T) {
	dir := t.TempDir()
	files := base(`schema_version = "1.1"
artifacts = []

[task]
name = "example-bench/parse-logs"
description = "Parse a log file."
keywords = ["data-processing"]
[[task.authors]]
name = "A. Author"
email = "author@example.com"

[metadata]
author_name = "A. Author"
author_email = "author@example.com"
difficulty = "medium"
category = "data-processing"
tags = []
expert_time_estimate_min = 20.0
junior_time_estimate_min = 90.0

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "example/parse-logs:20250101"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]

[solution.env]
`)
	files["README.md"] = "# parse-logs\n"
	files["environment/task-deps/input.log"] = "x\n"
	files["solution/solve.sh"] = "#!/bin/bash\ntrue\n"
	files["tests/test_outputs.py"] = "def test_x(): pass\n"
	writeTask(t, dir, "parse-logs", files)
	r := Load(dir, "ds", Options{})
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %v", r.Problems)
	}
	tk := r.Tasks[0]
	if tk.Image != "example/parse-logs:20250101" || tk.Build != "" || tk.Network != NetworkPublic || tk.AgentTimeout != 900*time.Second {
		t.Errorf("%+v", tk)
	}
	if a := tk.Metadata["harbor"].(map[string]any)["authors"]; !reflect.DeepEqual(a, []any{map[string]any{"name": "A. Author", "email": "author@example.com"}}) {
		t.Errorf("authors %v", a)
	}
}

func TestDatasetSizeBound(t *testing.T) {
	defer func(n int64) { maxDatasetSize = n }(maxDatasetSize)
	maxDatasetSize = 100
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		f := base("")
		f["tests/data"] = strings.Repeat("x", 60)
		writeTask(t, dir, n, f)
	}
	r := Load(dir, "ds", Options{})
	if e := r.Errs(); len(e) != 1 || e[0].Error() != "ds: the tasks' tests/ and solution/ hold more than 100 bytes in all" {
		t.Fatalf("%v", r.Problems)
	}
}
