package run

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/report"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// harborDataset copies testdata/harbor into dir/dataset with every
// environment made buildable here: the busybox binary beside its
// Dockerfile and this package's owner file copied first (its layers are
// its own; TestMain removes the image). extra adds tasks: name -> file ->
// content. All the fixtures' environments are the same, so one image is
// built for them all.
// writeFileWithNetwork is testdata/harbor's write-file task with its
// network_mode line replaced by mode: the files of a dataset task for
// harborDataset.
func writeFileWithNetwork(t *testing.T, mode string) map[string]string {
	t.Helper()
	toml, err := os.ReadFile("../../testdata/harbor/write-file/task.toml")
	if err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile("../../testdata/harbor/write-file/tests/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"instruction.md": "Say hello.\n", "tests/test.sh": string(test),
		"task.toml": strings.Replace(string(toml), `network_mode = "no-network"`, mode, 1)}
}

// keepTasks removes every task of the Harbor dataset ds but keep's.
func keepTasks(t *testing.T, ds string, keep ...string) {
	t.Helper()
	fixtures, _ := filepath.Glob(filepath.Join(ds, "*", "task.toml"))
	for _, f := range fixtures {
		if d := filepath.Dir(f); !slices.Contains(keep, filepath.Base(d)) {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func harborDataset(t *testing.T, dir string, extra map[string]map[string]string) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox-static is needed (apt-get install busybox-static): %v", err)
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "dataset")
	if err := os.CopyFS(ds, os.DirFS("../../testdata/harbor")); err != nil {
		t.Fatal(err)
	}
	for name, files := range extra {
		for p, body := range files {
			write(t, filepath.Join(ds, name), p, body)
		}
		df, _ := os.ReadFile(filepath.Join(ds, "write-file", "environment", "Dockerfile"))
		write(t, filepath.Join(ds, name), "environment/Dockerfile", string(df))
	}
	envs, _ := filepath.Glob(filepath.Join(ds, "*", "environment"))
	for _, env := range envs {
		if err := os.WriteFile(filepath.Join(env, "busybox"), bin, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, env, "owner", "internal/run tests\n")
		df, err := os.ReadFile(filepath.Join(env, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		write(t, env, "Dockerfile", strings.Replace(string(df), "FROM scratch\n", "FROM scratch\nCOPY owner /etc/steward-test-owner\n", 1))
		if sum, err := sbdocker.ContextHash(env); err == nil {
			builtImages.Store(sum, true)
		}
	}
	return ds
}

// harborLaunch runs a one-task eval set over dataset with agent.
func harborLaunch(t *testing.T, dataset, agent string, workers bool) (*report.Report, string) {
	t.Helper()
	return harborLaunchFrom(t, dataset, agent, workers, "")
}

// harborLaunchFrom is harborLaunch with more keys of tasks_from (", key: value").
func harborLaunchFrom(t *testing.T, dataset, agent string, workers bool, from string) (*report.Report, string) {
	t.Helper()
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: harbor
    sandbox: {provider: docker}
    agent: '`+agent+`'
    agent_grace: 1s
    tasks_from: {harbor: `+dataset+from+`}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	opts := Options{EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}}
	if workers {
		opts.Workers, opts.Exe = true, buildSteward(t)
	}
	res, err := Launch(context.Background(), opts)
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.steward.run="+res.Report.RunIDs[0]).Output()
	if len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("containers left behind: %q", out)
	}
	return res.Report, stderr.String()
}

func rowOf(t *testing.T, rep *report.Report, sample string) report.AttemptRow {
	t.Helper()
	for _, a := range rep.Attempts {
		if a.Sample == sample {
			return a
		}
	}
	t.Fatalf("no attempt of sample %s in %s", sample, statuses(rep))
	return report.AttemptRow{}
}

// A Harbor dataset runs as it is on Docker: each sample in a sandbox of its
// own image (built once for the fixtures, which share one), resources,
// network and timeouts; the oracle (the reference solutions) passes every
// task, in process and from worker processes, and an agent that does
// nothing fails every one, judged by the reward files, not exit statuses.
// reward.json's metrics are all kept; system-state's verifier reads what
// the agent changed under /etc and /usr/local/bin (shared mode: the agent's
// own sandbox, writable outside its workdir).
func TestHarborOracleAndDoNothing(t *testing.T) {
	t.Parallel()
	needDocker(t)
	ds := harborDataset(t, t.TempDir(), nil)
	for _, workers := range []bool{false, true} {
		rep, stderr := harborLaunch(t, ds, "oracle", workers)
		if got := statuses(rep); got != "background-server:p reward-json:p system-state:p timeout:p write-file:p" {
			t.Fatalf("oracle (workers %v): %s\n%s\n%+v", workers, got, stderr, rep.Attempts)
		}
		if n := strings.Count(stderr, "docker: building "); n > 1 {
			t.Errorf("the fixtures' one environment was built %d times in a run", n)
		}
		rj := rowOf(t, rep, "reward-json")
		if want := `reward.json (reward: reward): {"lines_found":3,"lines_wanted":3,"reward":1}`; rj.Explanation != want || rj.Score == nil || *rj.Score != 1 {
			t.Errorf("reward-json: explanation %q score %v, want %q and 1", rj.Explanation, rj.Score, want)
		}
		// /logs is collected as Harbor does: the verifier's reward file from
		// the separate verifier's sandbox and from the shared one.
		for sample, want := range map[string]string{"reward-json": `"lines_found": 3`, "system-state": "1\n"} {
			var got []string
			found := false
			if d := rowOf(t, rep, sample).Details; d != nil {
				for _, a := range d.Artifacts {
					got = append(got, a.Path)
					found = found || (strings.HasPrefix(a.Path, "/logs/verifier/reward.") && strings.Contains(a.Text, want))
				}
			}
			if !found {
				t.Errorf("%s (workers %v): /logs/verifier's reward file is not among its artifacts %v", sample, workers, got)
			}
		}
	}
	rep, stderr := harborLaunch(t, ds, "true", false)
	if got := statuses(rep); got != "background-server:f reward-json:f system-state:f timeout:f write-file:f" {
		t.Fatalf("do-nothing agent: %s\n%s\n%+v", got, stderr, rep.Attempts)
	}
	if rj := rowOf(t, rep, "reward-json"); !strings.Contains(rj.Explanation, `"lines_found":0`) {
		t.Errorf("reward-json's metrics for a do-nothing agent: %q", rj.Explanation)
	}
}

// A shared verifier runs beside the processes the agent left, as Harbor's
// does (issue 24): background-server's reference solution leaves an HTTP
// server running in the background and its verifier connects to it. The
// oracle passes, in process and through worker processes; with
// keep_processes: false the server is ended before the verifier and the
// same solution fails. The agent's own command is still ended at its
// timeout (a command that starts a server with setsid and then never
// returns is stopped, timed_out, and judged with its server still up,
// while the command itself is gone: the verifier checks).
func TestHarborBackgroundProcesses(t *testing.T) {
	t.Parallel()
	needDocker(t)
	toml, err := os.ReadFile("../../testdata/harbor/background-server/task.toml")
	if err != nil {
		t.Fatal(err)
	}
	test, _ := os.ReadFile("../../testdata/harbor/background-server/tests/test.sh")
	ds := harborDataset(t, t.TempDir(), map[string]map[string]string{
		"server-past-deadline": {
			"instruction.md": "start the server, then never return\n",
			"task.toml":      strings.Replace(string(toml), "[agent]\ntimeout_sec = 60", "[agent]\ntimeout_sec = 5", 1),
			// The server in a session of its own (the command's process
			// group is what the deadline kills), then a command that never returns.
			"solution/solve.sh": "#!/bin/sh\nmkdir -p /srv/www\necho ready > /srv/www/status.txt\n" +
				"setsid httpd -f -p 127.0.0.1:8080 -h /srv/www </dev/null >/dev/null 2>&1 &\n" +
				"until wget -q -O /dev/null http://127.0.0.1:8080/status.txt; do sleep 0.1; done\nsleep 600\n",
			// The verifier also checks that the agent's own command is gone.
			"tests/test.sh": strings.Replace(string(test), "#!/bin/sh\n", "#!/bin/sh\nif ps | grep -v grep | grep -q \"sleep 600\"; then echo 0 > /logs/verifier/reward.txt; exit 0; fi\n", 1),
		},
	})
	keepTasks(t, ds, "background-server", "server-past-deadline")
	for _, workers := range []bool{false, true} {
		rep, stderr := harborLaunch(t, ds, "oracle", workers)
		if got := statuses(rep); got != "background-server:p server-past-deadline:p" {
			t.Fatalf("keep_processes (default), workers %v: %s\n%s\n%+v", workers, got, stderr, rep.Attempts)
		}
		if r := rowOf(t, rep, "server-past-deadline"); !r.TimedOut {
			t.Errorf("server-past-deadline: the agent's command was not stopped at its deadline: %+v", r)
		}
	}
	rep, stderr := harborLaunchFrom(t, ds, "oracle", false, ", keep_processes: false")
	if got := statuses(rep); got != "background-server:f server-past-deadline:f" {
		t.Fatalf("keep_processes: false: %s\n%s\n%+v", got, stderr, rep.Attempts)
	}
	rep, stderr = harborLaunch(t, ds, "true", false)
	if got := statuses(rep); got != "background-server:f server-past-deadline:f" {
		t.Fatalf("do-nothing agent: %s\n%s\n%+v", got, stderr, rep.Attempts)
	}
}

// The verifier's contract: the agent sees /logs/{agent,verifier,artifacts},
// its instruction in files as well as its environment (issue 24 item 6),
// and neither /tests nor /solution; what it plants in /tests or
// /logs/verifier does not count; the exit status of test.sh is not the
// verdict; a missing or garbled reward, or a verifier past its timeout, is
// errored, never failed; an agent past its own timeout is stopped and
// judged on what it left; environment_mode separate verifies in a fresh
// sandbox (what the agent changed under /etc is not there).
func TestHarborVerifierContract(t *testing.T) {
	t.Parallel()
	needDocker(t)
	toml := func(extra string) string {
		return "[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n" + extra + "[environment]\nmemory_mb = 256\nstorage_mb = 64\nnetwork_mode = \"no-network\"\nworkdir = \"/app\"\n"
	}
	task := func(test, extra string) map[string]string {
		return map[string]string{"instruction.md": "do it\n", "task.toml": toml(extra), "tests/test.sh": test}
	}
	sysState, _ := os.ReadFile("../../testdata/harbor/system-state/tests/test.sh")
	ds := harborDataset(t, t.TempDir(), map[string]map[string]string{
		"no-reward":        task("#!/bin/sh\necho all good\n", ""),
		"garbled":          task("#!/bin/sh\necho yes > /logs/verifier/reward.txt\n", ""),
		"exit-not-verdict": task("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\nexit 3\n", ""),
		"resources":        task("", ""),
		"slow-verifier":    task("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\nsleep 60\n", ""),
		"separate-state": {"instruction.md": "configure /etc\n", "task.toml": strings.Replace(toml(""), "timeout_sec = 30\n", "timeout_sec = 30\nenvironment_mode = \"separate\"\n", 1),
			"tests/test.sh": string(sysState)},
	})
	// A sample's own resources: 300 MiB, not the task's default.
	write(t, filepath.Join(ds, "resources"), "instruction.md", "nothing\n")
	write(t, filepath.Join(ds, "resources"), "task.toml", strings.Replace(toml(""), "memory_mb = 256", "memory_mb = 300", 1))
	write(t, filepath.Join(ds, "resources"), "tests/test.sh", "#!/bin/sh\nm=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)\necho \"memory $m\"\nif [ \"$m\" = 314572800 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
	// A prebuilt image (docker_image), never pulled: built here from the
	// fixtures' environment, named by a tag of this test's.
	tag := "steward-harbor-prebuilt:" + strings.ReplaceAll(filepath.Base(t.TempDir()), "_", "-")
	tag = strings.ToLower(tag[:min(len(tag), 120)])
	if out, err := dockertest.CLI("build", "--pull=false", "-q", "-t", tag, filepath.Join(ds, "write-file", "environment")); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { _, _ = dockertest.CLI("rmi", tag) })
	wf, _ := os.ReadFile(filepath.Join(ds, "write-file", "tests", "test.sh"))
	write(t, filepath.Join(ds, "prebuilt"), "instruction.md", "Write hello into /app/hello.txt.\n")
	write(t, filepath.Join(ds, "prebuilt"), "tests/test.sh", string(wf))
	write(t, filepath.Join(ds, "prebuilt"), "task.toml", strings.Replace(toml(""), "[environment]\n", "[environment]\ndocker_image = \""+tag+"\"\n", 1))
	// An environment that does not build errors its own sample alone.
	write(t, filepath.Join(ds, "broken-build"), "instruction.md", "nothing\n")
	write(t, filepath.Join(ds, "broken-build"), "tests/test.sh", "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
	write(t, filepath.Join(ds, "broken-build"), "task.toml", toml(""))
	write(t, filepath.Join(ds, "broken-build", "environment"), "owner", "internal/run tests\n")
	write(t, filepath.Join(ds, "broken-build", "environment"), "Dockerfile", "FROM scratch\nCOPY owner /etc/steward-test-owner\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"false\"]\n")
	bb, err := os.ReadFile(filepath.Join(ds, "write-file", "environment", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, "broken-build", "environment", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	// slow-verifier's verifier has one second.
	write(t, filepath.Join(ds, "slow-verifier"), "task.toml", strings.Replace(toml(""), "[verifier]\ntimeout_sec = 30", "[verifier]\ntimeout_sec = 1", 1))
	agent := `ok=1; for d in /logs/agent /logs/verifier /logs/artifacts; do test -d $d || ok=0; done; test -e /tests && ok=0; test -e /solution && ok=0; ` +
		`printf %s "$STEWARD_INPUT" | cmp -s - "$STEWARD_INPUT_FILE" && printf %s "$STEWARD_INPUT_JSON" | cmp -s - "$STEWARD_INPUT_JSON_FILE" || ok=0; ` +
		`case $STEWARD_SAMPLE_ID in ` +
		`write-file) test $ok = 1 && echo hello > /app/hello.txt;; ` +
		`prebuilt) test -f /etc/steward-test-owner && echo hello > /app/hello.txt;; ` +
		`reward-json) echo 1 > /logs/verifier/reward.txt; mkdir -p /tests; printf "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n" > /tests/test.sh; exit 1;; ` +
		`timeout) sleep 600;; ` +
		`no-reward) echo 1 > /logs/verifier/reward.txt;; ` + // shared mode: planted, must not count
		`system-state|separate-state) mkdir -p /etc/fixture /usr/local/bin && echo enabled > /etc/fixture/mode && printf "#!/bin/sh\necho hi\n" > /usr/local/bin/greet && chmod +x /usr/local/bin/greet;; ` +
		`esac`
	rep, stderr := harborLaunch(t, ds, agent, true) // through worker processes: what the supervisor prepared (and could not) reaches them
	want := "background-server:f broken-build:e exit-not-verdict:p garbled:e no-reward:e prebuilt:p resources:p reward-json:f separate-state:f slow-verifier:e system-state:p timeout:f write-file:p"
	if got := statuses(rep); got != want {
		t.Fatalf("statuses %s\nwant     %s\n%s\n%+v", got, want, stderr, rep.Attempts)
	}
	for sample, reason := range map[string]string{
		"no-reward":     "neither /logs/verifier/reward.txt nor /logs/verifier/reward.json",
		"garbled":       "reward.txt is not a number",
		"slow-verifier": "verifier timed out (verifier timeout 1s)",
		"broken-build":  "build image from",
	} {
		if r := rowOf(t, rep, sample); !strings.Contains(r.Reason, reason) {
			t.Errorf("%s: reason %q, want it to say %q", sample, r.Reason, reason)
		}
	}
	if r := rowOf(t, rep, "reward-json"); r.AgentExit != 1 {
		t.Errorf("reward-json: the agent's exit 1 is kept beside the verdict: %+v", r)
	}
	if r := rowOf(t, rep, "timeout"); !r.TimedOut || r.Limit != "agent_time" {
		t.Errorf("timeout: the agent past its 5s timeout is not marked timed out: %+v", r)
	}
	if r := rowOf(t, rep, "exit-not-verdict"); !strings.Contains(r.Explanation, "tests/test.sh exited 3") {
		t.Errorf("exit-not-verdict: explanation %q", r.Explanation)
	}
}

// Harbor's network modes: no-network (network: gateway) and public
// (network: bridge) sandboxes both reach the model gateway, and only
// through it: an agent that completes a chat through the gateway writes
// the file its verifier wants, and the gateway counted its tokens.
func TestHarborNetworkModesReachTheGateway(t *testing.T) {
	t.Parallel()
	needDocker(t)
	ds := harborDataset(t, t.TempDir(), map[string]map[string]string{
		"public-file": writeFileWithNetwork(t, `network_mode = "public"`),
	})
	keepTasks(t, ds, "public-file", "write-file")
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model: {upstream: mock, name: mock-model}
tasks:
  - name: harbor
    sandbox: {provider: docker}
    agent: 'hostname -i > /logs/agent/ip.txt; "$STEWARD_BIN" agent chat > /logs/agent/answer.txt && echo hello > /app/hello.txt'
    tasks_from: {harbor: `+ds+`}
`)
	l := launchSet(t, path, func(o *Options) { o.Providers, o.Exe = dockerFactory{t}, buildSteward(t) })
	if got := statuses(l.rep); got != "public-file:p write-file:p" {
		t.Fatalf("statuses %s\n%s\n%+v", got, l.stderr, l.rep.Attempts)
	}
	// Each sandbox was on its mode's network: its address is in the subnet
	// of the run's internal (no-network) or outbound (public) network.
	nets := map[string]string{}
	for _, m := range regexp.MustCompile(`created network \S+ \((internal|outbound), gateway (\d+\.\d+\.\d+)\.\d+\)`).FindAllStringSubmatch(l.stderr, -1) {
		nets[m[1]] = m[2] + "."
	}
	for s, kind := range map[string]string{"public-file": "outbound", "write-file": "internal"} {
		r := rowOf(t, l.rep, s)
		if r.InputTokens == 0 {
			t.Errorf("%s: the gateway counted no tokens: %+v", s, r)
		}
		ip := ""
		if r.Details != nil {
			for _, a := range r.Details.Artifacts {
				if a.Path == "/logs/agent/ip.txt" {
					ip = strings.TrimSpace(a.Text)
				}
			}
		}
		if nets[kind] == "" || !strings.HasPrefix(ip, nets[kind]) {
			t.Errorf("%s: sandbox address %q is not on the run's %s network (%v)\n%s", s, ip, kind, nets, l.stderr)
		}
	}
}
