package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// firstRound is an agent that marks itself in dir, waits until n attempts
// are marked (giving up after ~10 s) and answers with the marks it saw: the
// attempts of the first dispatch round, when the budget is n.
func firstRound(dir string, n int) string {
	return `touch "` + dir + `/$STEWARD_SAMPLE_ID"; i=0; while [ "$(ls "` + dir + `" | wc -l)" -lt ` + itoa(n) + ` ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; ls "` + dir + `" | tr "\n" " "`
}

// Issue 23 item 6: the first dispatch follows the shares the PLAN line
// states, not the order tasks happen to become ready. With 3 slots, fast
// (6 attempts, listed first, ready at once) and slow (max_samples: 1, its
// lease taken first, so ready a moment later), slow holds one lane from
// the first round and fast two. (The old dispatcher gave fast all three
// slots before slow was ready: the first round was f1 f2 f3, in about
// half the launches; eight launches make that a near certainty.)
func TestFirstDispatchFollowsTheShares(t *testing.T) {
	for range 8 {
		firstDispatch(t)
	}
}

func firstDispatch(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	sync := filepath.Join(dir, "sync")
	if err := os.Mkdir(sync, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := firstRound(sync, 3)
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: fast
    sandbox: {provider: local}
    exclusive: false
    agent: '`+agent+`'
    scorer: {match: includes}
    samples:
      - {id: f1, input: "", target: f}
      - {id: f2, input: "", target: f}
      - {id: f3, input: "", target: f}
      - {id: f4, input: "", target: f}
      - {id: f5, input: "", target: f}
      - {id: f6, input: "", target: f}
  - name: slow
    sandbox: {provider: local}
    exclusive: false
    max_samples: 1
    shared_state: {key: slow-state}
    agent: '`+agent+`'
    scorer: {match: includes}
    samples:
      - {id: s1, input: "", target: s}
      - {id: s2, input: "", target: s}
      - {id: s3, input: "", target: s}
`)
	r := launchSet(t, path, func(o *Options) { o.Concurrency = 3 })
	if !strings.Contains(r.stderr, "setpoints fast 2, slow 1") {
		t.Fatalf("PLAN line does not say fast 2, slow 1:\n%s", r.stderr)
	}
	for _, a := range r.rep.Attempts {
		if a.Sample == "f1" {
			if !strings.Contains(a.Answer, "s1") {
				t.Fatalf("the first round was %q: fast took slow's share before slow was ready\n%s", a.Answer, r.stderr)
			}
			return
		}
	}
	t.Fatalf("no attempt f1 in %s", statuses(r.rep))
}

// Issue 23 item 8: with a long tend_interval the live state `steward tend`
// shows follows the run between tends (it said "0 running", written once
// before anything started, until the first tend an hour later).
func TestLiveStateFollowsTheRunBetweenTends(t *testing.T) {
	dir := t.TempDir()
	gofile := filepath.Join(dir, "go")
	write(t, dir, "_steward.yaml", "tend_interval: 1h\n")
	agent := `i=0; while [ ! -e ` + gofile + ` ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo ok`
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: w
    sandbox: {provider: local}
    exclusive: false
    agent: '`+agent+`'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}, {id: c, input: "", target: ok}]
`)
	release := func() { _ = os.WriteFile(gofile, nil, 0o644) }
	defer release()
	done := make(chan launched, 1)
	w := newWatch()
	go func() { done <- launchSet(t, path, func(o *Options) { o.Concurrency = 3; o.Observe = w.observe }) }()
	evs := w.until(t, "a live state with 3 running before the first tend (tend_interval 1h)", func(evs []Event) bool {
		for _, lv := range lives(evs, false) {
			if lv.Counts.Running == 3 {
				return true
			}
		}
		return false
	})
	for _, lv := range lives(evs, false) {
		if lv.Tended {
			t.Fatal("tended within a 1h window")
		}
		if lv.Counts.Running == 3 && (len(lv.Running) != 1 || lv.Running[0] != 3) {
			t.Fatalf("the task rows %v disagree with the counts %+v", lv.Running, lv.Counts)
		}
	}
	release()
	if r := <-done; r.rep.Counts.Passed != 3 {
		t.Fatalf("counts %+v\n%s", r.rep.Counts, r.stderr)
	}
}

// Issue 23 item 8: after an early-exit re-run the live panel and the
// report agree on what was reused (the panel said 4, the table 10: the
// early-exit skips it refers to were counted as reused), and the report
// says what early exit saved.
func TestEarlyExitRerunPanelAndReportAgree(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: flaky
    sandbox: {provider: local}
    max_samples: 1
    early_exit: true
    attempts: 5
    agent: 'if [ "$STEWARD_ATTEMPT" -ge 2 ]; then echo ok; else echo no; fi'
    scorer: {match: exact}
    samples: [{id: s, input: "", target: ok}, {id: t, input: "", target: ok}]
`)
	launchSet(t, path, nil)
	r := launchSet(t, path, nil)
	if r.rep.Counts.Reused != 4 || r.rep.Counts.Skipped != 6 {
		t.Fatalf("report counts %+v: want 4 reused (the judged attempts) and 6 skipped", r.rep.Counts)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "4 reused") || !strings.Contains(last, "6 skipped") {
		t.Fatalf("the panel's last line %q disagrees with the report %+v", last, r.rep.Counts)
	}
	if n, _ := r.rep.EarlyExitSaving(); n != 6 {
		t.Fatalf("early exit saved %d attempts, want 6", n)
	}
}
