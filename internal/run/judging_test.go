package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	"github.com/steward-evals/steward/internal/status"
)

func attemptOf(t *testing.T, rep *report.Report, sample string) report.AttemptRow {
	t.Helper()
	for _, a := range rep.Attempts {
		if a.Sample == sample {
			return a
		}
	}
	t.Fatalf("no attempt of %s in %+v", sample, rep.Attempts)
	return report.AttemptRow{}
}

// A scorer command that crashes (a missing script, command not found, any
// exit but 0 and 1) or prints a malformed verdict judged nothing: the
// attempt is errored with the scorer's stderr in its reason, and the next
// launch runs it again instead of carrying it. On the old code each was
// "failed" (reason "scorer exited 2", stderr only in the log) and the next
// launch showed "failed (reused)" (issue 30 item 1).
func TestCrashedScorerIsErroredNeverCarried(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: crash
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo 42'
    scorer:
      command: 'case "$STEWARD_SAMPLE_ID" in
        missing) sh "$STEWARD_SCORER_DIR/no-such-check.sh";;
        notfound) no-such-test-runner --verbose;;
        malformed) echo "{\"passed\": \"yes\"}";;
        fails) echo "1 test failed" >&2; exit 1;;
        *) test "$STEWARD_ANSWER" = 42;;
        esac'
    samples:
      - {id: missing, input: x}
      - {id: notfound, input: x}
      - {id: malformed, input: x}
      - {id: fails, input: x}
      - {id: passes, input: x}
`)
	r1 := launchSet(t, path, nil)
	if got := statuses(r1.rep); got != "missing:e notfound:e malformed:e fails:f passes:p" {
		t.Fatalf("statuses %s\n%+v", got, r1.rep.Attempts)
	}
	for sample, want := range map[string]string{
		"missing":   "no-such-check.sh",
		"notfound":  "127: command not found",
		"malformed": "malformed verdict",
	} {
		if a := attemptOf(t, r1.rep, sample); !strings.Contains(a.Reason, want) || !strings.Contains(a.Reason, "no verdict") && sample != "malformed" {
			t.Errorf("%s: reason %q, want it to hold %q", sample, a.Reason, want)
		}
	}
	if a := attemptOf(t, r1.rep, "fails"); !strings.Contains(a.Explanation, "stderr: 1 test failed") {
		t.Errorf("a failing scorer's explanation %q lacks its output", a.Explanation)
	}
	r2 := launchSet(t, path, nil)
	if got := statuses(r2.rep); got != "missing:e notfound:e malformed:e fails=f passes=p" {
		t.Fatalf("second launch %s: an errored attempt was carried, or a judged one was not", got)
	}
}

// An agent's non-zero exit no longer skips a scorer command: the scorer
// judges what the agent left (Harbor's rule), and the agent's exit status
// and output tail stay beside the verdict. judge_failed_agents: false opts
// out; a match scorer has no answer to judge. Every reason carries the tail
// of stdout and stderr. On the old code the harbor task's attempts were
// errored ("agent exited 1: " and stderr only) and never scored.
func TestFailedAgentIsJudgedByItsScorer(t *testing.T) {
	for _, workers := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "workers"}[workers], func(t *testing.T) {
			failedAgentJudged(t, write(t, t.TempDir(), "steward.yaml", failedAgentSet), workers)
		})
	}
}

const failedAgentSet = `
tasks:
  - name: harbor
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo "$STEWARD_INPUT" > out.txt; echo "ran the tests"; echo "2 tests still fail" >&2; exit 1'
    scorer: {command: 'test "$(cat out.txt)" = 42'}
    samples:
      - {id: right, input: "42"}
      - {id: wrong, input: "41"}
  - name: strict
    sandbox: {provider: local}
    exclusive: false
    judge_failed_agents: false
    agent: 'echo 42 > out.txt; echo "2 tests still fail" >&2; exit 1'
    scorer: {command: 'test "$(cat out.txt)" = 42'}
    samples:
      - {id: strict, input: x}
  - name: matched
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo partial answer; echo boom >&2; exit 3'
    scorer: {match: exact}
    samples:
      - {id: matched, input: x, target: "partial answer"}
`

func failedAgentJudged(t *testing.T, path string, workers bool) {
	r := launchSet(t, path, func(o *Options) {
		if workers {
			o.Workers, o.Exe = true, buildSteward(t)
		}
	})
	if got := statuses(r.rep); got != "right:p wrong:f strict:e matched:e" {
		t.Fatalf("statuses %s\n%+v", got, r.rep.Attempts)
	}
	for _, id := range []string{"right", "wrong"} {
		a := attemptOf(t, r.rep, id)
		if a.AgentExit != 1 || a.AgentOutput != "stdout: ran the tests; stderr: 2 tests still fail" {
			t.Errorf("%s: the agent's exit beside the verdict: %d %q", id, a.AgentExit, a.AgentOutput)
		}
	}
	if a := attemptOf(t, r.rep, "strict"); a.Reason != "agent exited 1: stderr: 2 tests still fail" {
		t.Errorf("strict: reason %q", a.Reason)
	}
	if a := attemptOf(t, r.rep, "matched"); a.Reason != "agent exited 3: stdout: partial answer; stderr: boom" || a.AgentExit != 0 {
		t.Errorf("matched: reason %q (agent exit %d)", a.Reason, a.AgentExit)
	}
	var term strings.Builder
	if err := report.Terminal(&term, r.rep, report.TerminalOptions{ReasonWidth: 200}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(term.String(), "agent exited 1: stdout: ran the tests") {
		t.Errorf("the terminal report does not show the agent's exit beside the verdict:\n%s", term.String())
	}
}

// failingUpstream answers every model call with the provider's failure: a
// 501 or an exhausted account (a 429 spend limit), neither retried.
func failingUpstream(t *testing.T, status int, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

// An attempt during which the gateway saw the upstream fail is never a
// judged "failed": its agent swallowed the error and answered nothing,
// which the match scorer would fail; it is infra, and the next launch runs
// it again. On the old code it was failed, and carried.
func TestUpstreamFailureIsNeverJudged(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"5xx", 501, `{"error":{"message":"not implemented","type":"server_error"}}`},
		{"spend limit", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := failingUpstream(t, c.status, c.body)
			dir := t.TempDir()
			path := write(t, dir, "steward.yaml", `
model: {upstream: openai, name: m, base_url: `+url+`, api_key_env: FAKE_KEY}
tasks:
  - name: chat
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat 2>/dev/null || true'
    scorer: {match: exact}
    samples:
      - {id: a, input: "What is 6*7?", target: "42"}
`)
			exe := buildSteward(t)
			mod := func(o *Options) {
				o.Exe = exe
				o.Getenv = func(k string) string {
					if k == "FAKE_KEY" {
						return "real-key"
					}
					return ""
				}
			}
			r := launchSet(t, path, mod)
			a := attemptOf(t, r.rep, "a")
			if a.Status != status.Infra || !strings.Contains(a.Reason, "the model provider failed 1 of the attempt's 1 calls") || !strings.Contains(a.Reason, "would have been failed") {
				t.Fatalf("status %s reason %q, want infra naming the provider", a.Status, a.Reason)
			}
			if a.Score != nil {
				t.Fatalf("an unjudged attempt has a score %v", *a.Score)
			}
			r2 := launchSet(t, path, mod)
			if got := statuses(r2.rep); got != "a:i" {
				t.Fatalf("second launch %s: the provider's failure was carried", got)
			}
		})
	}
}

// flaky wraps the local provider: its first Create fails with an
// infrastructure error, and graderFails makes every Grader fail so.
type flaky struct {
	*local.Provider
	creates     atomic.Int64
	graderFails bool
}

func (f *flaky) Create(ctx context.Context, s sandbox.Spec) (sandbox.Sandbox, error) {
	if f.creates.Add(1) == 1 {
		return nil, sandbox.InfraError(errors.New("the daemon hung up"))
	}
	sb, err := f.Provider.Create(ctx, s)
	if err != nil || !f.graderFails {
		return sb, err
	}
	return failingGrader{sb}, nil
}

type failingGrader struct{ sandbox.Sandbox }

func (g failingGrader) Grader(ctx context.Context, files []sandbox.File) (sandbox.Sandbox, string, error) {
	return nil, "", sandbox.InfraError(fmt.Errorf("copy the workdir: the daemon hung up"))
}

type flakyFactory struct{ p *flaky }

func (f flakyFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return f.p, nil
}
func (f flakyFactory) Available(ctx context.Context, name string) bool { return false }

// A retried attempt says so in its row and every report (how many tries,
// why); a try whose agent ran to its end is never retried, whatever broke
// after it (issue 23 item 2: infra errors bought re-rolls). On the old code
// the row said nothing of its retry, and the grader's failure was retried.
func TestRetriesAreVisibleAndNeverAfterTheAgent(t *testing.T) {
	for _, graderFails := range []bool{false, true} {
		t.Run(fmt.Sprint("grader fails ", graderFails), func(t *testing.T) {
			path := write(t, t.TempDir(), "steward.yaml", `
tasks:
  - name: t
    sandbox: {provider: local}
    retries: 3
    agent: 'echo 42 > out.txt'
    scorer: {command: 'test "$(cat out.txt)" = 42'}
    samples:
      - {id: a, input: x}
`)
			p := &flaky{Provider: local.New(local.Options{BaseDir: t.TempDir()}), graderFails: graderFails}
			r := launchSet(t, path, func(o *Options) { o.Providers = flakyFactory{p} })
			a := attemptOf(t, r.rep, "a")
			if a.Tries != 2 || len(a.RetryReasons) != 1 || !strings.Contains(a.RetryReasons[0], "create sandbox: the daemon hung up") {
				t.Fatalf("tries %d reasons %q: the retry before the agent ran is not shown", a.Tries, a.RetryReasons)
			}
			want := status.Passed
			if graderFails {
				want = status.Infra // and not retried: the agent's work was done
			}
			if a.Status != want || p.creates.Load() != 2 {
				t.Fatalf("status %s after %d creates, want %s after 2: %q", a.Status, p.creates.Load(), want, a.Reason)
			}
			var md strings.Builder
			if err := report.Markdown(&md, r.rep, report.MarkdownOptions{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(md.String(), "2 tries (retried: create sandbox: the daemon hung up)") {
				t.Fatalf("the markdown report does not show the retry:\n%s", md.String())
			}
		})
	}
}
