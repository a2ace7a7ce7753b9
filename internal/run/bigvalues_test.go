package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/status"
)

// bigScorer passes only when the answer, the target, the targets and the
// input are in their files (STEWARD_*_FILE), and in the environment exactly
// when small: the 300 000-byte answer only in its file.
const bigScorer = `n=$(wc -c < "$STEWARD_ANSWER_FILE"); ` +
	`if [ "$STEWARD_SAMPLE_ID" = big ]; then test -z "$STEWARD_ANSWER" && test "$n" -ge 300000; ` +
	`else test "$STEWARD_ANSWER" = "$(cat "$STEWARD_ANSWER_FILE")"; fi && ` +
	`test "$(cat "$STEWARD_TARGET_FILE")" = "$STEWARD_TARGET" && grep -q "$STEWARD_TARGET" "$STEWARD_TARGETS_FILE" && ` +
	`test "$(cat "$STEWARD_INPUT_FILE")" = "$STEWARD_INPUT"`

// bigValuesSandbox is the sandbox: setting of a big-values test on prov
// (docker: testdata's busybox image with dockerfile's lines added) and the
// providers it runs on.
func bigValuesSandbox(t *testing.T, dir, prov, dockerfile string) (string, ProviderFactory) {
	t.Helper()
	if prov != "docker" {
		return "{provider: local}\n    exclusive: false", sandbox.Factory{}
	}
	needDocker(t)
	busyboxImage(t, dir)
	if dockerfile != "" {
		b, err := os.ReadFile(filepath.Join(dir, "image", "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "image"), "Dockerfile", string(b)+dockerfile)
		if sum, err := sbdocker.ContextHash(filepath.Join(dir, "image")); err == nil {
			builtImages.Store(sum, true)
		}
	}
	return "{provider: docker, build: image, memory: 128m}", dockerFactory{t}
}

// allPassed fails t for every attempt of l that did not pass.
func allPassed(t *testing.T, l launched) {
	t.Helper()
	for _, a := range l.rep.Attempts {
		if a.Status != status.Passed {
			t.Errorf("%s: %s (%s)\n%s", a.Sample, a.Status, a.Reason, a.Log)
		}
	}
}

// TestBigAnswerReachesTheScorer: a 300 000-byte answer (past Linux's 128 KiB
// limit on one environment string, which made the scorer's exec fail with
// "argument list too long") reaches the scorer in STEWARD_ANSWER_FILE; a
// small one is in both. In real Docker sandboxes and local ones.
func TestBigAnswerReachesTheScorer(t *testing.T) {
	for _, prov := range []string{"docker", "local"} {
		t.Run(prov, func(t *testing.T) {
			dir := t.TempDir()
			sb, factory := bigValuesSandbox(t, dir, prov, "")
			path := write(t, dir, "steward.yaml", `
tasks:
  - name: big
    sandbox: `+sb+`
    agent: 'if [ "$STEWARD_SAMPLE_ID" = big ]; then head -c 300000 /dev/zero | tr "\0" a; else echo 42; fi'
    scorer: {command: '`+bigScorer+`'}
    samples:
      - {id: big, input: "write a lot", target: "42"}
      - {id: small, input: "write 42", target: "42"}
`)
			l := launchSet(t, path, func(o *Options) { o.Providers = factory })
			allPassed(t, l)
		})
	}
}

// bigInputAgent prints 42 only when the instruction is in its files
// (STEWARD_INPUT_FILE, STEWARD_INPUT_JSON_FILE: outside the workdir,
// readable by anyone, as a non-root agent needs) and in the environment
// exactly when small: the 200 000-byte input only in its files.
const bigInputAgent = `for f in "$STEWARD_INPUT_FILE" "$STEWARD_INPUT_JSON_FILE"; do ` +
	`case "$f" in "$STEWARD_WORKDIR"/*|"") exit 3;; esac; ` +
	`test "$(stat -c %A "$f" | cut -c8)" = r || exit 4; test "$(stat -c %A "$(dirname "$f")" | cut -c10)" != - || exit 5; done; ` +
	`n=$(wc -c < "$STEWARD_INPUT_FILE"); ` +
	`if [ "$STEWARD_SAMPLE_ID" = big ]; then test -z "${STEWARD_INPUT+x}" && test -z "${STEWARD_INPUT_JSON+x}" && test "$n" -eq 200000 && grep -q "^\"bbbb" "$STEWARD_INPUT_JSON_FILE" || exit 6; ` +
	`else test "$(cat "$STEWARD_INPUT_FILE")" = "$STEWARD_INPUT" && test "$(cat "$STEWARD_INPUT_JSON_FILE")" = "$STEWARD_INPUT_JSON" || exit 7; fi; echo 42`

// TestBigInputReachesTheAgent: the agent's instruction is in files as well
// as its environment (issue 24 item 6), and a 200 000-byte input (past
// Linux's 128 KiB limit on one environment string, which made the agent's
// exec fail with "argument list too long") is only in the files; the
// scorer still gets all of it in its own. In real Docker sandboxes (as a
// non-root user) and local ones.
func TestBigInputReachesTheAgent(t *testing.T) {
	for _, prov := range []string{"docker", "local"} {
		t.Run(prov, func(t *testing.T) {
			dir := t.TempDir()
			sb, factory := bigValuesSandbox(t, dir, prov, "USER 65534\n") // docker: the same image, run as nobody
			big := strings.Repeat("b", 200000)
			path := write(t, dir, "steward.yaml", `
tasks:
  - name: big
    sandbox: `+sb+`
    agent: '`+bigInputAgent+`'
    scorer: {command: 'n=$(wc -c < "$STEWARD_INPUT_FILE"); test "$STEWARD_ANSWER" = 42 && if [ "$STEWARD_SAMPLE_ID" = big ]; then test "$n" -eq 200000; else test "$(cat "$STEWARD_INPUT_FILE")" = "write 42"; fi'}
    samples:
      - {id: big, input: "`+big+`", target: "42"}
      - {id: small, input: "write 42", target: "42"}
`)
			l := launchSet(t, path, func(o *Options) { o.Providers = factory })
			if len(l.rep.Attempts) != 2 {
				t.Fatalf("%d attempts\n%s", len(l.rep.Attempts), l.stderr)
			}
			allPassed(t, l)
		})
	}
}
