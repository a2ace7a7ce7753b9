package evalset

import (
	"strings"
	"testing"
)

// okTask is a minimal valid task body (5 lines) used by many cases.
const okTask = `tasks:
  - name: t
    agent: echo hi
    samples:
      - {input: a, target: a}
`

type badCase struct {
	name  string
	files map[string]string
	env   map[string]string
	// want lists every expected problem as a fragment of its formatted line
	// ("file:line: field: message"); each must match exactly one problem and
	// no other problem may be reported.
	want []string
}

func yamlOnly(y string) map[string]string { return map[string]string{"steward.yaml": y} }

func TestBadInputs(t *testing.T) {
	cases := []badCase{
		{name: "syntax error unclosed flow", files: yamlOnly("tasks: [\n  {name: t\n"),
			want: []string{"steward.yaml:1: YAML syntax error: did not find expected ',' or '}'"}},
		{name: "syntax error tab indent", files: yamlOnly("tasks:\n\t- name: t\n"),
			want: []string{"steward.yaml:2: YAML syntax error: found character that cannot start any token"}},
		{name: "syntax error undefined alias", files: yamlOnly(okTask + "name: *nope\n"),
			want: []string{"steward.yaml:6: YAML syntax error: unknown anchor 'nope' referenced"}},
		{name: "not a mapping", files: yamlOnly("- a\n- b\n"),
			want: []string{"steward.yaml:1: the eval set must be a mapping with a tasks list, got a list"}},
		{name: "empty file", files: yamlOnly("# nothing\n"),
			want: []string{"steward.yaml: the eval set is empty: it needs at least a tasks list"}},
		{name: "two documents", files: yamlOnly(okTask + "---\nname: x\n"),
			want: []string{"steward.yaml:6: more than one YAML document"}},
		{name: "unknown top-level key", files: yamlOnly("taks: []\n" + okTask),
			want: []string{`steward.yaml:1: taks: unknown key "taks" (did you mean "tasks"?)`}},
		{name: "unknown task key", files: yamlOnly(okTask + "    atempts: 2\n"),
			want: []string{`steward.yaml:6: tasks[0].atempts: unknown key "atempts" (did you mean "attempts"?)`}},
		{name: "fleet key in eval set", files: yamlOnly("max_sandboxes: 4\n" + okTask),
			want: []string{`steward.yaml:1: max_sandboxes: unknown key "max_sandboxes": max_sandboxes is a fleet setting: put it in _steward.yaml`}},
		{name: "sandbox key at task level", files: yamlOnly(okTask + "    image: alpine\n"),
			want: []string{`steward.yaml:6: tasks[0].image: unknown key "image": did you mean sandbox.image?`}},
		{name: "unknown key far from any", files: yamlOnly(okTask + "    zzzzzz: 1\n"),
			want: []string{`steward.yaml:6: tasks[0].zzzzzz: unknown key "zzzzzz" (known keys: agent, artifacts, attempts,`}},
		{name: "artifact glob the shell would run", files: yamlOnly(okTask + "    artifacts: [out/*.txt, '$(id)', ../up]\n"),
			want: []string{`steward.yaml:6: tasks[0].artifacts[1]: "$(id)": the character '$' is not allowed in an artifact glob`,
				`steward.yaml:6: tasks[0].artifacts[2]: "../up" leaves the workdir (..)`}},
		{name: "duplicate key", files: yamlOnly(okTask + "    agent: echo again\n"),
			want: []string{`steward.yaml:6: tasks[0].agent: duplicate key "agent" (first on line 3)`}},
		{name: "wrong type whole number", files: yamlOnly(okTask + "    attempts: three\n"),
			want: []string{`steward.yaml:6: tasks[0].attempts: expected a whole number, got "three"`}},
		{name: "wrong type float for int", files: yamlOnly(okTask + "    max_samples: 2.5\n"),
			want: []string{`steward.yaml:6: tasks[0].max_samples: expected a whole number, got the number 2.5`}},
		{name: "wrong type list for string", files: yamlOnly("tasks:\n  - name: t\n    agent: [a, b]\n    samples: [{input: a, target: a}]\n"),
			want: []string{`steward.yaml:3: tasks[0].agent: expected a string, got a list`}},
		{name: "wrong type mapping for list", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples: {input: a}\n"),
			want: []string{`steward.yaml:4: tasks[0].samples: expected a list, got a mapping`}},
		{name: "wrong type bool", files: yamlOnly(okTask + "    early_exit: maybe\n"),
			want: []string{`steward.yaml:6: tasks[0].early_exit: expected true or false, got "maybe"`}},
		{name: "wrong type tasks", files: yamlOnly("tasks: 3\n"),
			want: []string{`steward.yaml:1: tasks: expected a list, got the number 3`}},
		{name: "missing task name", files: yamlOnly("tasks:\n  - agent: x\n    samples: [{input: a, target: a}]\n"),
			want: []string{`steward.yaml:2: tasks[0].name: missing: every task needs a name`}},
		{name: "bad task name", files: yamlOnly("tasks:\n  - name: my task\n    agent: x\n    samples: [{input: a, target: a}]\n"),
			want: []string{`steward.yaml:2: tasks[0].name: "my task": use letters, digits`}},
		{name: "missing agent", files: yamlOnly("tasks:\n  - name: t\n    samples: [{input: a, target: a}]\n"),
			want: []string{`steward.yaml:2: tasks[0].agent: missing: the shell command that runs one attempt`}},
		{name: "missing samples", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n"),
			want: []string{`steward.yaml:2: tasks[0]: no samples: give samples (inline) or samples_file (JSONL)`}},
		{name: "empty samples", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples: []\n"),
			want: []string{`steward.yaml:4: tasks[0].samples: the samples list is empty`}},
		{name: "missing tasks", files: yamlOnly("name: x\n"),
			want: []string{`steward.yaml:1: tasks: missing: the eval set needs a tasks list`}},
		{name: "empty tasks", files: yamlOnly("name: x\ntasks: []\n"),
			want: []string{`steward.yaml:2: tasks: the tasks list is empty`}},
		{name: "duplicate task names", files: yamlOnly(okTask + "  - name: t\n    agent: y\n    samples: [{input: b, target: b}]\n"),
			want: []string{`steward.yaml:6: tasks[1].name: duplicate task name "t" (first on line 2)`}},
		{name: "duplicate sample ids", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {id: q1, input: a, target: a}\n      - {id: Q1, input: b, target: b}\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[1].id: duplicate sample id "Q1": also the id of the sample at steward.yaml:5`}},
		{name: "duplicate of a positional id", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {input: a, target: a}\n      - id: 1\n        input: b\n        target: b\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[1].id: duplicate sample id "1": also the id of the sample at steward.yaml:5 (a sample without an id takes its position as id)`}},
		{name: "empty sample id", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {id: '', input: a, target: a}\n"),
			want: []string{`steward.yaml:5: tasks[0].samples[0].id: id is empty`}},
		{name: "bad duration", files: yamlOnly(okTask + "    timeout: 10 parsecs\n"),
			want: []string{`steward.yaml:6: tasks[0].timeout: "10 parsecs" is not a duration`}},
		{name: "zero timeout", files: yamlOnly(okTask + "    timeout: 0s\n"),
			want: []string{`steward.yaml:6: tasks[0].timeout: must be longer than 0`}},
		{name: "negative duration", files: yamlOnly(okTask + "    timeout: -5m\n"),
			want: []string{`steward.yaml:6: tasks[0].timeout: duration "-5m" is negative`}},
		{name: "bad size", files: yamlOnly(okTask + "    sandbox: {memory: lots}\n"),
			want: []string{`steward.yaml:6: tasks[0].sandbox.memory: "lots" is not a size`}},
		{name: "size too small", files: yamlOnly(okTask + "    sandbox:\n      memory: 1k\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.memory: 1k is below the minimum 6m`}},
		{name: "cpus zero", files: yamlOnly(okTask + "    sandbox:\n      cpus: 0\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.cpus: must be more than 0, got 0`}},
		{name: "pids zero", files: yamlOnly(okTask + "    sandbox:\n      pids: 0\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.pids: must be at least 1, got 0`}},
		{name: "attempts zero", files: yamlOnly(okTask + "    attempts: 0\n"),
			want: []string{`steward.yaml:6: tasks[0].attempts: must be at least 1, got 0`}},
		{name: "epochs zero shows epochs", files: yamlOnly(okTask + "    epochs: 0\n"),
			want: []string{`steward.yaml:6: tasks[0].epochs: must be at least 1, got 0`}},
		{name: "epochs and attempts", files: yamlOnly(okTask + "    attempts: 2\n    epochs: 3\n"),
			want: []string{`steward.yaml:7: tasks[0].epochs: "epochs" and "attempts" are the same setting (the other is on line 6); keep one`}},
		{name: "negative max_samples", files: yamlOnly(okTask + "    max_samples: -1\n"),
			want: []string{`steward.yaml:6: tasks[0].max_samples: must be 0 (unset: ramp) or more, got -1`}},
		{name: "negative retries", files: yamlOnly(okTask + "    retries: -1\n"),
			want: []string{`steward.yaml:6: tasks[0].retries: must be between 0 and 10, got -1`}},
		{name: "unknown provider", files: yamlOnly(okTask + "    sandbox:\n      provider: dockr\n      image: x\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.provider: unknown provider "dockr" (did you mean "docker"?)`}},
		{name: "unknown network", files: yamlOnly(okTask + "    sandbox:\n      network: none\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.network: unknown network "none": use one of gateway, bridge, isolated`}},
		{name: "unknown network far", files: yamlOnly(okTask + "    sandbox:\n      network: host-mode\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.network: unknown network "host-mode": use one of gateway, bridge, isolated`}},
		{name: "unknown match", files: yamlOnly(okTask + "    scorer:\n      match: exakt\n"),
			want: []string{`steward.yaml:7: tasks[0].scorer.match: unknown match "exakt" (did you mean "exact"?)`}},
		{name: "unknown upstream", files: yamlOnly("model:\n  upstream: openia\n" + okTask),
			want: []string{`steward.yaml:2: model.upstream: unknown upstream "openia" (did you mean "openai"?)`}},
		{name: "api key in file", files: yamlOnly("model:\n  upstream: openai\n  api_key: sk-123\n" + okTask),
			want: []string{`steward.yaml:3: model.api_key: unknown key "api_key": never write the key itself`}},
		{name: "bad base_url", files: yamlOnly("model:\n  upstream: openai\n  base_url: localhost:8080\n" + okTask),
			want: []string{`steward.yaml:3: model.base_url: "localhost:8080" is not an http(s) URL`}},
		{name: "negative connection ceiling", files: yamlOnly("model:\n  upstream: openai\n  max_connections_ceiling: -1\n" + okTask),
			want: []string{`steward.yaml:3: model.max_connections_ceiling: must be 0 (the gateway's own, 100 000) or more, got -1`}},
		{name: "bad api_key_env", files: yamlOnly("model:\n  upstream: openai\n  api_key_env: sk-live-123\n" + okTask),
			want: []string{`steward.yaml:3: model.api_key_env: "sk-live-123" is not an environment variable name`}},
		{name: "image and build", files: map[string]string{"steward.yaml": okTask + "    sandbox:\n      image: a\n      build: img\n", "img/Dockerfile": "FROM scratch\n"},
			want: []string{`steward.yaml:8: tasks[0].sandbox.build: set image or build, not both`}},
		{name: "build without Dockerfile", files: map[string]string{"steward.yaml": okTask + "    sandbox:\n      build: img\n", "img/README": "x"},
			want: []string{`steward.yaml:7: tasks[0].sandbox.build: img has no Dockerfile`}},
		{name: "build dir missing", files: yamlOnly(okTask + "    sandbox:\n      build: nowhere\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.build: nowhere: no such file`}},
		{name: "docker without image", files: yamlOnly(okTask + "    sandbox:\n      provider: docker\n"),
			want: []string{`steward.yaml:6: tasks[0].sandbox: the docker provider needs image`}},
		{name: "local with image", files: yamlOnly(okTask + "    sandbox:\n      provider: local\n      image: busybox\n"),
			want: []string{`steward.yaml:8: tasks[0].sandbox.image: the local provider runs on the host and takes no image`}},
		{name: "bad capability", files: yamlOnly(okTask + "    sandbox:\n      cap_add: [net-admin]\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.cap_add[0]: "net-admin" is not a capability name`}},
		{name: "relative workdir", files: yamlOnly(okTask + "    sandbox:\n      workdir: work\n"),
			want: []string{`steward.yaml:7: tasks[0].sandbox.workdir: "work" must be an absolute path inside the sandbox`}},
		{name: "samples_file missing", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples_file: data/s.jsonl\n"),
			want: []string{`steward.yaml:4: tasks[0].samples_file: data/s.jsonl: no such file`}},
		{name: "samples and samples_file", files: map[string]string{"steward.yaml": okTask + "    samples_file: s.jsonl\n", "s.jsonl": `{"input":"a","target":"a"}`},
			want: []string{`steward.yaml:6: tasks[0].samples_file: set samples or samples_file, not both`}},
		{name: "sample file missing", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        files: {in.txt: data/in.txt}\n"),
			want: []string{`steward.yaml:7: tasks[0].samples[0].files.in.txt: data/in.txt: no such file`}},
		{name: "task file missing", files: yamlOnly(okTask + "    files:\n      helper.py: lib/helper.py\n"),
			want: []string{`steward.yaml:7: tasks[0].files.helper.py: lib/helper.py: no such file`}},
		{name: "sample file escapes with ..", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        files:\n          f: ../secret\n"},
			want: []string{`steward.yaml:8: tasks[0].samples[0].files.f: "../secret" escapes the eval set directory`}},
		{name: "sample file absolute", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        files:\n          f: /etc/passwd\n"),
			want: []string{`steward.yaml:8: tasks[0].samples[0].files.f: "/etc/passwd": absolute paths are not allowed`}},
		{name: "sample file symlink out", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        files:\n          f: link\n", "link": "symlink:/etc/hostname"},
			want: []string{`steward.yaml:8: tasks[0].samples[0].files.f: "link" is a symlink that leads out of the eval set directory`}},
		{name: "sample file is a directory", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n        target: a\n        files:\n          f: sub\n", "sub/x": "1"},
			want: []string{`steward.yaml:8: tasks[0].samples[0].files.f: sub is not a regular file`}},
		{name: "destination escapes workdir", files: map[string]string{"steward.yaml": okTask + "    files:\n      ../x: h.py\n", "h.py": ""},
			want: []string{`steward.yaml:7: tasks[0].files.../x: destination "../x" leaves the workdir`}},
		{name: "bad data url", files: yamlOnly(okTask + "    files:\n      a.txt: 'data:text/plain;base64,@@@'\n"),
			want: []string{`steward.yaml:7: tasks[0].files.a.txt: data URL has invalid base64`}},
		{name: "bad glob", files: yamlOnly(okTask + "    inputs: ['lib/[a-']\n"),
			want: []string{`steward.yaml:6: tasks[0].inputs[0]: bad glob "lib/[a-": syntax error in pattern`}},
		{name: "glob matches nothing", files: yamlOnly(okTask + "    inputs:\n      - lib/*.py\n"),
			want: []string{`steward.yaml:7: tasks[0].inputs[0]: "lib/*.py" matches no files`}},
		{name: "glob leaves the directory", files: yamlOnly(okTask + "    inputs: [../**]\n"),
			want: []string{`steward.yaml:6: tasks[0].inputs[0]: must stay inside the eval set directory (no ..)`}},
		{name: "absolute glob", files: yamlOnly(okTask + "    inputs: [/etc/*]\n"),
			want: []string{`steward.yaml:6: tasks[0].inputs[0]: must be relative to the eval set directory`}},
		{name: "group member unknown", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {id: alpha, input: a, target: a}\n    groups:\n      - name: g\n        samples: [alpah]\n"),
			want: []string{`steward.yaml:8: tasks[0].groups[0].samples[0]: "alpah" is not the id of a sample of this task (did you mean "alpha"?)`}},
		{name: "group member twice", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {id: a, input: a, target: a}\n      - {id: b, input: b, target: b}\n    groups:\n      - name: g1\n        samples: [a, b]\n      - name: g2\n        samples:\n          - b\n"),
			want: []string{`steward.yaml:12: tasks[0].groups[1].samples[0]: sample "b" is already in group "g1" (line 8)`}},
		{name: "group without name", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {id: a, input: a, target: a}\n    groups:\n      - samples: [a]\n"),
			want: []string{`steward.yaml:7: tasks[0].groups[0].name: missing: every group needs a name`}},
		{name: "shared_state without key", files: yamlOnly(okTask + "    shared_state: {}\n"),
			want: []string{`steward.yaml:6: tasks[0].shared_state.key: missing: name the lease key`}},
		{name: "regex target does not compile", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    scorer: {match: regex}\n    samples:\n      - {input: a, target: '(a'}\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[0].target: target "(a" is not a valid regular expression`}},
		{name: "numeric target not a number", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    scorer: {match: numeric}\n    samples:\n      - input: a\n        target: four\n"),
			want: []string{`steward.yaml:7: tasks[0].samples[0].target: target "four" is not a number`}},
		{name: "scorer command and match", files: yamlOnly(okTask + "    scorer:\n      command: ./score.sh\n      match: exact\n"),
			want: []string{`steward.yaml:6: tasks[0].scorer: set command or match, not both`}},
		{name: "ignore_case with command", files: yamlOnly(okTask + "    scorer:\n      command: ./score.sh\n      ignore_case: true\n"),
			want: []string{`steward.yaml:8: tasks[0].scorer.ignore_case: applies to scorer.match only`}},
		{name: "no scorer and no targets", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - input: a\n"),
			want: []string{`steward.yaml:2: tasks[0]: no scorer: set scorer.command, or give the samples a target`}},
		{name: "match without target", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - {input: a, target: a}\n      - input: b\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[1]: no target, but the task's scorer matches targets (scorer.match exact)`}},
		{name: "sample without input", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - target: a\n"),
			want: []string{`steward.yaml:5: tasks[0].samples[0].input: missing: every sample needs an input`}},
		{name: "sample input mapping", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - target: a\n        input: {text: hi}\n"),
			want: []string{`steward.yaml:6: tasks[0].samples[0].input: expected a string or a list of chat messages`}},
		{name: "chat message bad role", files: yamlOnly("tasks:\n  - name: t\n    agent: x\n    samples:\n      - target: a\n        input:\n          - {role: human, content: hi}\n"),
			want: []string{`steward.yaml:7: tasks[0].samples[0].input[0].role: expected role system, user, assistant or tool, got human`}},
		{name: "reserved env", files: yamlOnly(okTask + "    env:\n      OPENAI_API_KEY: sk-1\n"),
			want: []string{`steward.yaml:7: tasks[0].env.OPENAI_API_KEY: OPENAI_API_KEY is set by Steward in every sandbox and cannot be overridden`}},
		{name: "reserved env prefix", files: yamlOnly(okTask + "    env:\n      STEWARD_MODE: fast\n"),
			want: []string{`steward.yaml:7: tasks[0].env.STEWARD_MODE: names starting with STEWARD_ are reserved for the variables Steward sets`}},
		{name: "bad env name", files: yamlOnly(okTask + "    env:\n      1BAD: x\n"),
			want: []string{`steward.yaml:7: tasks[0].env.1BAD: "1BAD" is not an environment variable name`}},
		{name: "jsonl invalid line", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "{\"input\":\"a\",\"target\":\"a\"}\n\n{\"input\": oops}\n"},
			want: []string{`s.jsonl:3: invalid JSON: invalid character 'o' looking for beginning of value`}},
		{name: "jsonl array file", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.json\n", "s.json": "[{\"input\":\"a\"}]\n"},
			want: []string{`s.json:1: samples_file must be JSON Lines (one JSON object per line), not a JSON array`}},
		{name: "jsonl not an object", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "{\"input\":\"a\",\"target\":\"a\"}\n\"just text\"\n"},
			want: []string{`s.jsonl:2: tasks[0].samples[1]: expected a JSON object per line, got a string`}},
		{name: "jsonl unknown key", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "{\"input\":\"a\",\"targte\":\"a\"}\n"},
			want: []string{`s.jsonl:1: tasks[0].samples[0].targte: unknown key "targte" (did you mean "target"?)`}},
		{name: "jsonl wrong type", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "\n{\"input\":\"a\",\"target\":\"a\",\"setup\":[1]}\n"},
			want: []string{`s.jsonl:2: tasks[0].samples[0].setup: expected a string, got a list`}},
		{name: "jsonl duplicate ids name both lines", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "{\"id\":7,\"input\":\"a\",\"target\":\"a\"}\n{\"id\":\"8\",\"input\":\"a\",\"target\":\"a\"}\n{\"id\":\"7\",\"input\":\"b\",\"target\":\"b\"}\n"},
			want: []string{`s.jsonl:3: tasks[0].samples[2].id: duplicate sample id "7": also the id of the sample at s.jsonl:1`}},
		{name: "jsonl empty", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "\n\n"},
			want: []string{`steward.yaml:4: tasks[0].samples_file: s.jsonl holds no samples`}},
		{name: "jsonl sample file escapes", files: map[string]string{"steward.yaml": "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n", "s.jsonl": "{\"input\":\"a\",\"target\":\"a\",\"files\":{\"k\":\"../../k\"}}\n"},
			want: []string{`s.jsonl:1: tasks[0].samples[0].files.k: "../../k" escapes the eval set directory`}},
		{name: "fleet bad ramp order", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "samples_ramp: [300, 40]\n"},
			want: []string{`_steward.yaml:1: samples_ramp: samples_ramp low end 300 is above its high end 40`}},
		{name: "fleet ramp below one", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_workers: 2\nsamples_ramp: [0, 40]\n"},
			want: []string{`_steward.yaml:2: samples_ramp: samples_ramp low end 0 must be at least 1`}},
		{name: "fleet ramp not numbers", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "samples_ramp: [a, b]\n"},
			want: []string{`_steward.yaml:1: samples_ramp: expected [low, high] with whole numbers, got "a"`}},
		{name: "fleet ramp string", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "samples_ramp: 40,300\n"},
			want: []string{`_steward.yaml:1: samples_ramp: expected [low, high] or false, got "40,300"`}},
		{name: "fleet negative", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_sandboxes: -1\n"},
			want: []string{`_steward.yaml:1: max_sandboxes: must be 0 (unset) or more, got -1`}},
		{name: "fleet unknown key", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_sandbox: 4\n"},
			want: []string{`_steward.yaml:1: max_sandbox: unknown key "max_sandbox" (did you mean "max_sandboxes"?)`}},
		{name: "fleet tend too short", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "tend_interval: 1ms\n"},
			want: []string{`_steward.yaml:1: tend_interval: 1ms is too short: the minimum is 100ms`}},
		{name: "fleet syntax error", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_sandboxes: [\n"},
			want: []string{`_steward.yaml:1: YAML syntax error: did not find expected node content`}},
		{name: "env bad number", files: map[string]string{"steward.yaml": okTask}, env: map[string]string{"STEWARD_MAX_SANDBOXES": "many"},
			want: []string{`env: STEWARD_MAX_SANDBOXES: "many" is not a whole number`}},
		{name: "env bad ramp", files: map[string]string{"steward.yaml": okTask}, env: map[string]string{"STEWARD_SAMPLES_RAMP": "300,40"},
			want: []string{`env: STEWARD_SAMPLES_RAMP: samples_ramp low end 300 is above its high end 40`}},
		{name: "env bad tend", files: map[string]string{"steward.yaml": okTask}, env: map[string]string{"STEWARD_TEND_INTERVAL": "soon"},
			want: []string{`env: STEWARD_TEND_INTERVAL: "soon" is not a duration`}},
		{name: "errors in two files at once", files: map[string]string{"steward.yaml": okTask + "    attempts: 0\n", "_steward.yaml": "max_tasks: -2\n"},
			want: []string{`steward.yaml:6: tasks[0].attempts: must be at least 1`, `_steward.yaml:1: max_tasks: must be 0 (unset) or more, got -2`}},
	}
	// The "env" field is optional; cases without it have only two fields set.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTree(t, c.files)
			env := func(k string) string { return c.env[k] }
			got := problems(t, dir, LoadOptions{Getenv: env})
			if len(got) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d:\n got  %s\n want %s", i, got[i], w)
				}
			}
		})
	}
}

func TestConnectionCeilingLoads(t *testing.T) {
	dir := writeTree(t, yamlOnly("model:\n  upstream: openai\n  max_connections_ceiling: 5000\n"+okTask))
	if es := mustLoad(t, dir, LoadOptions{}); es.Model.MaxConnectionsCeiling != 5000 || es.Model.MaxConnections != 0 {
		t.Fatalf("model: %+v", es.Model)
	}
}
