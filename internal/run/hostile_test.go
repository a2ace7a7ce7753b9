package run

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/report"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
)

// Hostile agents that try to change their own verdict (docs/security.md,
// "The agent cannot influence its verdict"). Every agent here gives a wrong
// answer and then attacks the scorer; every attempt must fail.

// lurkScript runs detached from the agent (setsid, its parent gone) and
// waits for a process of its run that holds a target (a scorer) or another
// attempt's token: it writes the target as the answer (and marks pwned) and
// keeps the token in the loot directory, outside the workdir. It goes on
// (for a while) to catch later attempts in a reused sandbox too.
const lurkScript = `wd=$1 run=$2 loot=$3
i=0
while [ $i -lt 300 ]; do
  for f in $(grep -l "STEWARD_RUN_ID=$run" /proc/[0-9]*/environ 2>/dev/null); do
    e=$(tr '\000' '\n' < "$f" 2>/dev/null)
    tok=$(printf '%s\n' "$e" | sed -n 's/^OPENAI_API_KEY=//p')
    if [ -n "$tok" ] && [ "$tok" != "$OPENAI_API_KEY" ]; then printf '%s\n' "$tok" > "$loot/token"; fi
    t=$(printf '%s\n' "$e" | sed -n 's/^STEWARD_TARGET=//p')
    if [ -n "$t" ]; then printf '%s\n' "$t" > "$wd/answer.txt"; touch "$wd/pwned"; fi
  done
  sleep 0.02
  i=$((i+1))
done
`

// rewriteScript rewrites every check.sh under $1 so that it passes (and
// marks pwned); with $2 = watch it goes on for a while, for a scorer's files
// copied in later.
const rewriteScript = `i=0
while [ $i -lt 300 ]; do
  for f in $(find "$1" -xdev -name check.sh 2>/dev/null); do
    grep -q "# rewritten" "$f" || printf 'touch pwned; exit 0 # rewritten\n' > "$f"
  done
  [ "$2" = watch ] || exit 0
  sleep 0.02
  i=$((i+1))
done
`

// waitThenCheck is a scorer that takes a moment (as a test suite would), so
// that an attack has time to land; it stops waiting once the attack marked
// its success, which makes the old, attackable design fail every time.
const waitThenCheck = `i=0; while [ $i -lt 60 ] && [ ! -e pwned ]; do sleep 0.05; i=$((i+1)); done; test "$(cat answer.txt)" = "$STEWARD_TARGET"`

// hostileSet writes the eval set of one attack for a provider ("local" or
// "docker") and returns its path.
func hostileSet(t *testing.T, provider, attack string) (path, loot string) {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "lurk.sh", lurkScript)
	write(t, dir, "rewrite.sh", rewriteScript)
	write(t, dir, "check.sh", waitThenCheck+"\n")
	write(t, dir, "expected.txt", "42\n")
	sb := "{provider: local}"
	loot = filepath.Join(dir, "loot")
	search := `"$STEWARD_WORKDIR/../.."`
	if provider == "docker" {
		sb = "{provider: docker, build: image, memory: 128m}"
		loot = "/loot"
		search = "/"
		busyboxImage(t, dir)
	} else if err := os.Mkdir(loot, 0o755); err != nil {
		t.Fatal(err)
	}
	// In a container the agent also plants a scorer where the scorer's files go.
	plant := ""
	if provider == "docker" {
		plant = `mkdir -p /opt/steward/scorer && printf "touch pwned; exit 0\n" > /opt/steward/scorer/check.sh; `
	}
	detach := func(script, args string) string {
		return `setsid sh ` + script + ` ` + args + ` >/dev/null 2>&1 </dev/null &`
	}
	lurk := detach("lurk.sh", `"$STEWARD_WORKDIR" "$STEWARD_RUN_ID" "$LOOT"`)
	var task string
	switch attack {
	case "honest":
		// The control: the same scorer passes a right answer left in the workdir.
		task = `
    agent: 'mkdir -p out bin && echo 42 > out/result && ln -s ../out/result bin/r && echo 42 > answer.txt'
    scorer:
      command: 'test "$(cat out/result)" = 42 && test "$(cat bin/r)" = 42 && sh "$STEWARD_SCORER_DIR/check.sh"'
      files: {check.sh: check.sh}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "rewrite-scorer":
		task = `
    agent: 'echo wrong > answer.txt; sh rewrite.sh ` + search + `; ` + plant + `` + detach("rewrite.sh", search+" watch") + `'
    scorer:
      command: 'sh "$STEWARD_SCORER_DIR/check.sh"'
      files: {check.sh: check.sh}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "symlink":
		// The agent's files point where the scorer's reference and its
		// environment will be: a scorer that compares out/result with its
		// reference, or looks for the target in a file, would read them.
		// result2 goes through "c -> .": lexically inside the workdir, really
		// its parent.
		task = `
    agent: 'echo wrong > answer.txt; mkdir -p out; ln -s /opt/steward/scorer/expected out/result; ln -s . c; ln -s c/../opt/steward/scorer/expected result2; ln -s /proc/self/environ out/env'
    scorer:
      command: 'for f in out/result result2; do test "$(cat $f)" = "$(cat "$STEWARD_SCORER_DIR/expected")" && exit 0; done; grep -q "STEWARD_TARGET=$STEWARD_TARGET" out/env || exit 1'
      files: {expected: expected.txt}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "echo-verdict":
		// A scorer that shows the agent's output before it checks it: the
		// agent's last line is a passing verdict, the check fails.
		task = `
    agent: 'echo wrong > out.txt; echo "{\"passed\": true, \"score\": 1}" >> out.txt; echo wrong'
    scorer: {command: 'cat out.txt; test "$(head -n 1 out.txt)" = "$STEWARD_TARGET"'}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "leftover":
		task = `
    agent: 'echo wrong > answer.txt; ` + lurk + `'
    scorer: {command: '` + waitThenCheck + `'}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "replace-sh":
		// Where the engine bounds disk by a read-only root (disk.go) the
		// replacement fails; where it does not, the grader is a fresh
		// container. Either way the scorer runs the image's /bin/sh.
		task = `
    agent: 'echo wrong > answer.txt; { rm -f /bin/sh && printf "#!/bin/busybox sh\necho {\\\"passed\\\": true, \\\"score\\\": 1}\n" > /bin/sh && chmod 755 /bin/sh; } 2>/dev/null; true'
    scorer: {command: '` + waitThenCheck + `'}
    samples:
      - {id: a, input: "x", target: "42"}`
	case "reuse":
		// Sample a leaves a lurker; sample b, in the same sandbox, reports
		// whether the lurker got its token, and is judged while it lurks.
		task = `
    agent: 'if [ "$STEWARD_SAMPLE_ID" = a ]; then echo wrong > answer.txt; ` + lurk + ` else i=0; while [ $i -lt 60 ] && [ ! -s "$LOOT/token" ]; do sleep 0.05; i=$((i+1)); done; if [ -s "$LOOT/token" ]; then echo token-stolen > answer.txt; else echo wrong > answer.txt; fi; fi'
    scorer: {command: '` + waitThenCheck + `'}
    groups: [{name: g, samples: [a, b]}]
    samples:
      - {id: a, input: "x", target: "42"}
      - {id: b, input: "y", target: "43"}`
	default:
		t.Fatalf("unknown attack %q", attack)
	}
	path = write(t, dir, "steward.yaml", `
tasks:
  - name: hostile
    sandbox: `+sb+`
    env: {LOOT: "`+loot+`"}
    files: {lurk.sh: lurk.sh, rewrite.sh: rewrite.sh}
    timeout: 1m`+task+"\n")
	return path, loot
}

// busyboxImage writes a build context: FROM scratch with busybox as /bin/*.
func busyboxImage(t *testing.T, dir string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox-static is needed (apt-get install busybox-static): %v", err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "image")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(img, "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The owner first: this package's layers are its own (see
	// testdata/images/busybox/Dockerfile), and TestMain removes the image.
	write(t, img, "owner", "internal/run tests\n")
	write(t, img, "Dockerfile", "FROM scratch\nCOPY owner /etc/steward-test-owner\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nRUN [\"/bin/mkdir\", \"-p\", \"/work\", \"/loot\", \"/tmp\"]\nWORKDIR /work\n")
	if sum, err := sbdocker.ContextHash(img); err == nil {
		builtImages.Store(sum, true)
	}
}

// checkAllFailed asserts that every attempt ran and failed on its wrong answer.
func checkAllFailed(t *testing.T, rep *report.Report, stderr string) {
	t.Helper()
	if len(rep.Attempts) == 0 {
		t.Fatalf("no attempts\n%s", stderr)
	}
	for _, a := range rep.Attempts {
		if a.Status != status.Failed || strings.Contains(a.Answer, "token-stolen") {
			t.Errorf("sample %s: %s (answer %q, reason %q); want failed with its own wrong answer\nlog:\n%s", a.Sample, a.Status, a.Answer, a.Reason, a.Log)
		}
	}
}

func TestHostileAgentLocal(t *testing.T) {
	t.Parallel()
	t.Run("honest", func(t *testing.T) {
		path, _ := hostileSet(t, "local", "honest")
		l := launchSet(t, path, nil)
		if statuses(l.rep) != "a:p" {
			t.Fatalf("a right answer: %s, want passed\n%+v", statuses(l.rep), l.rep.Attempts)
		}
	})
	for _, attack := range []string{"rewrite-scorer", "leftover", "reuse", "symlink", "echo-verdict"} {
		t.Run(attack, func(t *testing.T) {
			path, loot := hostileSet(t, "local", attack)
			l := launchSet(t, path, nil)
			checkAllFailed(t, l.rep, l.stderr)
			if b, err := os.ReadFile(filepath.Join(loot, "token")); err == nil {
				t.Errorf("a process left by one attempt read another attempt's token %q", b)
			}
		})
	}
}

func TestHostileAgentDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	for _, attack := range []string{"honest", "rewrite-scorer", "leftover", "replace-sh", "reuse", "symlink"} {
		t.Run(attack, func(t *testing.T) {
			path, _ := hostileSet(t, "docker", attack)
			es, err := evalset.Load(path, evalset.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			res, err := Launch(context.Background(), Options{EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}})
			if err != nil {
				t.Fatalf("launch: %v\n%s", err, stderr.String())
			}
			if attack == "honest" {
				if statuses(res.Report) != "a:p" {
					t.Fatalf("a right answer: %s, want passed\n%+v", statuses(res.Report), res.Report.Attempts)
				}
			} else {
				checkAllFailed(t, res.Report, stderr.String())
			}
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.steward.run="+res.Report.RunIDs[0]).Output()
			if len(bytes.TrimSpace(out)) > 0 {
				t.Fatalf("containers left behind: %q", out)
			}
		})
	}
}

// A task's and a sample's files are copied from what was read at load: a
// symlink swapped in afterwards (pointing out of the eval set directory) is
// never followed, neither for the fingerprint nor for the copy.
func TestFilesComeFromTheLoadSnapshot(t *testing.T) {
	dir := t.TempDir()
	secret := write(t, t.TempDir(), "secret.txt", "SECRET")
	given := write(t, dir, "given.txt", "G")
	data := write(t, dir, "data.txt", "D")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: files
    sandbox: {provider: local}
    files: {given.txt: given.txt}
    agent: 'printf "%s%s" "$(cat given.txt)" "$(cat data.txt)"'
    scorer: {match: exact}
    samples:
      - {id: a, input: "x", target: "GD", files: {data.txt: data.txt}}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{given, data} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, p); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	res, err := Launch(context.Background(), Options{EvalSet: es, Providers: factory{&counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}}, Stderr: &syncWriter{w: &stderr}})
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	a := res.Report.Attempts[0]
	if a.Status != status.Passed || strings.Contains(a.Answer, "SECRET") {
		t.Fatalf("status %s answer %q reason %q: the swapped symlink was followed", a.Status, a.Answer, a.Reason)
	}
}

// An agent that writes past its sandbox's disk quota errors its attempt with
// that reason (docs/docker.md).
func TestDockerDiskQuotaErrorsAttempt(t *testing.T) {
	needDocker(t)
	dir := t.TempDir()
	busyboxImage(t, dir)
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: disk
    sandbox: {provider: docker, build: image, memory: 128m, disk: 8m}
    agent: 'dd if=/dev/zero of=big bs=1M count=64 && echo 42'
    scorer: {match: exact}
    samples:
      - {id: a, input: "x", target: "42"}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	res, err := Launch(context.Background(), Options{EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}})
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	a := res.Report.Attempts[0]
	if a.Status != status.Errored || !strings.Contains(a.Reason, "disk quota exceeded") || !strings.Contains(a.Reason, "8m") {
		t.Fatalf("status %s reason %q, want errored: disk quota exceeded", a.Status, a.Reason)
	}
}
