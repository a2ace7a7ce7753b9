package run

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/status"
)

// What an agent leaves in its workdir is its own outcome, never an
// infrastructure error that buys a re-roll (issue 23 items 2 and 3), with
// retries: 3 to buy:
//   - fifo: a hard link to a FIFO (the copy to the grader failed as infra,
//     and was retried: 4/4 passed after hidden retries);
//   - sparse: a 20 GiB sparse file in a 64 MiB sandbox (20 GiB of zeros
//     streamed to the grader past the timeout, then infra, then retried).
//
// Each attempt runs once and is judged: the FIFO is left out and the
// scorer fails the wrong answer; the sparse workdir is the agent's failure,
// naming the bound. On the old code both were infra, retried three times.
func TestAgentWorkdirNeverBuysARetry(t *testing.T) {
	t.Parallel()
	needDocker(t)
	dir := t.TempDir()
	busyboxImage(t, dir)
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: workdir
    sandbox: {provider: docker, build: image, memory: 128m, disk: 64m}
    retries: 3
    timeout: 2m
    agent: 'echo "try $STEWARD_ATTEMPT" >> /tmp/tries; echo wrong > answer.txt;
      case "$STEWARD_SAMPLE_ID" in
        fifo) mkfifo p && ln p hard;;
        sparse) truncate -s 20G huge;;
      esac'
    scorer: {command: 'test "$STEWARD_ANSWER" = "$STEWARD_TARGET"'}
    samples:
      - {id: fifo, input: x, target: "42"}
      - {id: sparse, input: x, target: "42"}
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
	if got := statuses(res.Report); got != "fifo:f sparse:f" {
		t.Fatalf("statuses %s, want both failed\n%+v\n%s", got, res.Report.Attempts, stderr.String())
	}
	if strings.Contains(stderr.String(), "retrying") {
		t.Fatalf("an attempt was retried:\n%s", stderr.String())
	}
	for _, a := range res.Report.Attempts {
		if a.Tries > 1 || a.Status != status.Failed {
			t.Errorf("%s: %s after %d tries", a.Sample, a.Status, a.Tries)
		}
	}
	if a := attemptOf(t, res.Report, "sparse"); !strings.Contains(a.Explanation, "disk quota of 64.0 MiB") || !strings.Contains(a.Explanation, "huge") {
		t.Errorf("sparse: explanation %q does not name the bound and the file", a.Explanation)
	}
}
