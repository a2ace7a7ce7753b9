package run

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/status"
)

// graceAgent is told its deadline and asks the gateway what it has left
// (curl on the host, busybox wget in the test image), keeps both as its
// answer, then waits for SIGTERM: its trap writes partial.txt during the
// grace and exits 0.
const graceAgent = `|
      trap 'echo "left at the deadline" > partial.txt; exit 0' TERM
      auth="Authorization: Bearer $OPENAI_API_KEY"
      r=$(curl -sf -H "$auth" "$STEWARD_REMAINING_URL" 2>/dev/null || wget -q -O - --header "$auth" "$STEWARD_REMAINING_URL")
      printf '%s\n%s\n' "$STEWARD_DEADLINE" "$r" > answer.txt
      sleep 600 &
      wait`

// stubbornAgent ignores SIGTERM: it is killed when its grace ends, and
// judged on what it left before.
const stubbornAgent = `|
      trap '' TERM
      echo "written before the deadline" > partial.txt
      while :; do sleep 1; done`

// deadlineSet is an eval set of the graceful agent (and, on local, the
// stubborn one); the scorer passes an attempt whose partial.txt exists, so
// a pass says the agent's work at its deadline was judged.
func deadlineSet(sandbox, agentTimeout string, stubborn bool) string {
	s := `
model: {upstream: mock}
tasks:
  - name: graceful
    sandbox: ` + sandbox + `
    agent_timeout: ` + agentTimeout + `
    agent_grace: 2m
    agent: ` + graceAgent + `
    scorer: {command: 'grep -q "left at the deadline" partial.txt'}
    samples: [{id: graceful, input: "work until told to stop"}]
`
	if stubborn {
		s += `  - name: stubborn
    sandbox: ` + sandbox + `
    agent_timeout: 1s
    agent_grace: 1s
    agent: ` + stubbornAgent + `
    scorer: {command: 'grep -q "written before" partial.txt'}
    samples: [{id: stubborn, input: "ignore SIGTERM"}]
`
	}
	return s
}

// checkDeadline checks the rows of deadlineSet: each attempt was stopped
// at its deadline and judged on what it left (passed, timed_out, limit
// agent_time, not within budget), and the graceful agent saw its deadline
// in STEWARD_DEADLINE and the same deadline at STEWARD_REMAINING_URL.
func checkDeadline(t *testing.T, rep *report.Report, want string, stderr string) {
	t.Helper()
	if got := statuses(rep); got != want {
		t.Fatalf("statuses %s, want %s\n%+v\n%s", got, want, rep.Attempts, stderr)
	}
	for _, a := range rep.Attempts {
		if !a.TimedOut || a.Limit != gateway.LimitAgentTime || a.Score == nil || *a.Score != 1 {
			t.Errorf("%s: timed out %v, limit %q, score %v; want timed out at agent_time and judged\nlog:\n%s", a.Sample, a.TimedOut, a.Limit, a.Score, a.Log)
		}
	}
	if w := rep.PassWithinBudget; w == nil || w.Passed != 0 || w.Limited != len(rep.Attempts) {
		t.Errorf("pass within budget %+v: a pass at the deadline is not within budget", w)
	}
	a := attemptOf(t, rep, "graceful")
	env, remaining, _ := strings.Cut(a.Answer, "\n")
	deadline, err := time.Parse(time.RFC3339, env)
	if err != nil {
		t.Fatalf("STEWARD_DEADLINE %q: %v (answer %q)", env, err, a.Answer)
	}
	var r gateway.Remaining
	if err := json.Unmarshal([]byte(remaining), &r); err != nil || r.Deadline == nil || r.SecondsLeft == nil {
		t.Fatalf("the remaining endpoint answered %q (%v): want the deadline and the seconds left", remaining, err)
	}
	if !r.Deadline.Truncate(time.Second).Equal(deadline) {
		t.Errorf("the remaining endpoint's deadline %s is not STEWARD_DEADLINE %s", r.Deadline, deadline)
	}
	if r.TokensLeft != nil || r.CallsLeft != nil || r.USDLeft != nil {
		t.Errorf("remaining %+v: the task sets no model-side limit, so every bound is null", r)
	}
}

// Issue 30 item 4, on the local provider, in process and in worker
// processes (as real launches run attempts): at the agent's deadline it
// gets SIGTERM and its grace; what it writes then is judged (timed_out:
// true), and one that ignores SIGTERM is killed when the grace ends and
// judged on what it left. The agent knew the deadline: STEWARD_DEADLINE
// and the gateway's remaining endpoint, reached through the worker's
// deadline message to the supervisor, agree.
func TestDeadlineGraceIsJudgedLocal(t *testing.T) {
	exe := buildSteward(t)
	for _, workers := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "workers"}[workers], func(t *testing.T) {
			path := write(t, t.TempDir(), "steward.yaml", deadlineSet("{provider: local}\n    exclusive: false", "3s", true))
			r := launchSet(t, path, func(o *Options) { o.Exe, o.Workers = exe, workers })
			checkDeadline(t, r.rep, "graceful:p stubborn:p", r.stderr)
		})
	}
}

// The same on docker (a container of a local busybox image): SIGTERM
// reaches the agent's process group inside the container, its grace is
// honoured, and the scorer's fresh container sees what it wrote.
func TestDeadlineGraceIsJudgedDocker(t *testing.T) {
	t.Parallel()
	needDocker(t)
	exe := buildSteward(t)
	for _, workers := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "workers"}[workers], func(t *testing.T) {
			dir := t.TempDir()
			busyboxImage(t, dir)
			path := write(t, dir, "steward.yaml", deadlineSet("{provider: docker, build: image, memory: 128m}", "5s", false))
			es, err := evalset.Load(path, evalset.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			res, err := Launch(context.Background(), Options{EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}, Exe: exe, Workers: workers})
			if err != nil {
				t.Fatalf("launch: %v\n%s", err, stderr.String())
			}
			checkDeadline(t, res.Report, "graceful:p", stderr.String())
			if a := attemptOf(t, res.Report, "graceful"); a.Status != status.Passed {
				t.Errorf("graceful: %s", a.Status)
			}
		})
	}
}
