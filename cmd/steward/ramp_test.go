package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/record"
)

// The sample ramp end to end (issue 5): real `steward launch` processes, the
// built-in chat agent as host processes (local provider, exclusive: false),
// the fake provider on loopback behind Steward's gateway. The assertions are
// on the shape of the ramp history the supervisor stores in the record, never
// on wall-clock time or exact numbers.

const rampKey = "sk-ramp-e2e-5b1f0c"

// rampEvalSet writes an eval set of n arithmetic samples whose agent is
// agent, against the fake provider at url (empty: the built-in mock).
func rampEvalSet(t *testing.T, dir, url, agent string, n int, ramp string) {
	t.Helper()
	var b strings.Builder
	if url != "" {
		fmt.Fprintf(&b, "model:\n  upstream: openai\n  name: gpt-fake\n  base_url: %s/v1\n  api_key_env: RAMP_FAKE_KEY\n", url)
	}
	fmt.Fprintf(&b, "tasks:\n  - name: arith\n    sandbox: {provider: local}\n    exclusive: false\n    agent: '%s'\n    scorer: {match: numeric}\n    timeout: 5m\n    samples:\n", agent)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "      - {id: s%04d, input: \"What is %d+%d?\", target: \"%d\"}\n", i, i, 17, i+17)
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), b.String())
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "samples_ramp: "+ramp+"\ntend_interval: 1s\n")
}

type launched struct {
	cmd  *exec.Cmd
	out  *syncBuf
	done chan error
	ev   *launchEvents // what the launch says as it happens (--events)
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startLaunch(t testing.TB, dir, rec string) *launched { return startLaunchAs(t, dir, rec, false) }

// startKillableLaunch starts a launch whose workers share its process group,
// for tests that kill the whole tree at once (killGroup): a runner that dies.
func startKillableLaunch(t testing.TB, dir, rec string) *launched {
	return startLaunchAs(t, dir, rec, true)
}

func startLaunchAs(t testing.TB, dir, rec string, group bool) *launched {
	t.Helper()
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--record", rec, "--events", ev.path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RAMP_FAKE_KEY="+rampKey, "CI=true")
	if group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	l := &launched{cmd: cmd, out: &syncBuf{}, done: make(chan error, 1), ev: ev}
	cmd.Stdout, cmd.Stderr = l.out, l.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			if group {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_ = cmd.Process.Kill()
			}
			<-l.done
		}
	})
	return l
}

// killGroup kills a killable launch the way a dying runner does: the launch
// and every worker (each in a process group of its own) at once, so that
// nobody cleans up. Everything is stopped first (SIGSTOP) and then killed:
// a worker that outlived its supervisor by a moment would remove its pods
// itself (the workers' supervisor-gone cleanup) and leave the sweep nothing
// to prove.
func (l *launched) killGroup(t testing.TB) {
	t.Helper()
	pid := l.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	groups := []int{pid}
	// children are listed per thread (a Go program forks from any of them)
	var children []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	for _, f := range children {
		if c, err := strconv.Atoi(f); err == nil {
			if pg, err := syscall.Getpgid(c); err == nil && pg != pid {
				_ = syscall.Kill(-pg, syscall.SIGSTOP)
				groups = append(groups, pg)
			}
		}
	}
	for _, pg := range groups {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
	<-l.done
}

// wait waits for the launch to end (a generous bound: the test fails, never hangs).
func (l *launched) wait(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case err := <-l.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(bound):
		_ = l.cmd.Process.Kill()
		<-l.done
		t.Fatalf("launch did not finish within %s:\n%s", bound, l.out.String())
		return -1
	}
}

// history reads the newest run's ramp history and attempts from the record.
func history(t testing.TB, rec string) ([]record.RampPoint, []record.Attempt, record.Run) {
	t.Helper()
	ctx := context.Background()
	db, err := record.Open(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(ctx)
	if err != nil || len(runs) == 0 {
		return nil, nil, record.Run{}
	}
	pts, err := db.Ramp(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	as, err := db.Attempts(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return pts, as, runs[0]
}

func fmtHistory(pts []record.RampPoint) string {
	var b strings.Builder
	for i, p := range pts {
		fmt.Fprintf(&b, "%3d %-5s sp=%-3d ceil=%-3d limit=%-3d push=%-5v sat=%-5v err=%d retries=%d  %s\n",
			i, p.Decision, p.Setpoint, p.Ceiling, p.ConnLimit, p.Pushback, p.Saturated, p.Errored, p.Retries, p.Reason)
	}
	return b.String()
}

// otherClientCall sends one call to the fake provider's handler h with the
// run's key, as another client sharing the quota would, and returns the
// status it got.
func otherClientCall(h http.Handler) int {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-fake","messages":[{"role":"user","content":"What is 1+1?"}]}`))
	req.Header.Set("Authorization", "Bearer "+rampKey)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

// drain takes n requests from the fake provider's RPM bucket before the run,
// through its own handler, as another client sharing the quota would: the
// bucket starts full (a whole minute's worth), and without this the run would
// spend its first minute on the burst before it ever meets the limit.
func drain(t *testing.T, fp *fakeprovider.Server, n int) {
	t.Helper()
	h := fp.Handler()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []int
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := otherClientCall(h); code != http.StatusOK {
				mu.Lock()
				bad = append(bad, code)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("draining the bucket: %d requests refused (%v)", len(bad), bad[:1])
	}
	fp.ResetStats()
}

// A real launch climbs while the provider keeps up, meets its RPM limit,
// reverses after two windows of pushback, and settles below the top; no
// sample is interrupted or errored on the way.
func TestRampEndToEndClimbsBacksOffSettles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	// 180 requests/min (3/s) and 2 s per answer: the provider sustains about
	// 6 samples in flight. The ramp starts at 4 (below), steps by 20 to 24
	// and 40 (above), and must come back down. The rate is low enough that
	// even a heavily loaded runner starts agents faster than the provider
	// admits them, so the provider stays the bottleneck.
	const rpm, n = 180, 90
	fp := fakeprovider.New(fakeprovider.Config{APIKey: rampKey, RPM: rpm, BaseLatency: 20 * time.Second, TimeScale: 0.1, Seed: 5})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	drain(t, fp, rpm*85/100) // 15 % left: above the gateway's "remaining low" mark (10 %)

	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	rampEvalSet(t, dir, url, `"$STEWARD_BIN" agent chat`, n, "[4, 40]")
	l := startLaunch(t, dir, rec)
	// The gateway paces at the rate the provider announces, so it meets no
	// pushback at a steady limit, and it follows a lower limit without any
	// (the ramp does not climb meanwhile: the gateway, not the sample limit,
	// holds work back). Once the ramp has climbed, another client starts
	// sharing the key: 10 requests a second, more than three times what the
	// key refills, so it takes the bucket as fast as it refills and the
	// provider takes nothing more from the gateway however it paces. The
	// gateway yields its share down to its floor (2 % of the rate) and
	// reports the key over as pushback in every window its requests wait
	// (gateway.md "One key, many gateways", item 13): sustained, and the
	// ramp must reverse, and stay down while the other client holds the
	// key. The other client leaves once the ramp has stepped down and five
	// windows in a row since have been pushback (or after a minute: a ramp
	// that never reverses, or climbs back while the key is taken, fails
	// below); the gateway finds the key its own at its next request, and
	// the ramp settles.
	const heldDown = 5
	other := make(chan struct{})
	left := -1 // how many tends there were when the other client left
	// reverseErr: the ramp did not step down and hold five windows of
	// pushback within a minute of the other client's start (read after
	// other is closed, which waits for it).
	var reverseErr error
	go func() {
		defer close(other)
		if l.ev.until(5*time.Minute, func(e *launchEvents) bool { return atTop(e.tends, 24) }) != nil {
			return
		}
		from := len(l.ev.tendsNow())
		reversed := make(chan struct{})
		go func() {
			defer close(reversed)
			reverseErr = l.ev.until(time.Minute, func(e *launchEvents) bool {
				pts := e.tends[from:]
				down := slices.IndexFunc(pts, func(p record.RampPoint) bool { return p.Decision == "down" })
				return down >= 0 && len(pts)-down >= heldDown &&
					!slices.ContainsFunc(pts[len(pts)-heldDown:], func(p record.RampPoint) bool { return !p.Pushback })
			})
		}()
		h := fp.Handler()
		var wg sync.WaitGroup
		for {
			select {
			case <-reversed:
				left = len(l.ev.tendsNow())
				wg.Wait()
				return
			default:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				otherClientCall(h)
			}()
			time.Sleep(100 * time.Millisecond) // the other client's pace (10 a second): the load under test
		}
	}()
	code := l.wait(t, 5*time.Minute)
	<-other
	t.Logf("provider: %+v", fp.Stats())
	pts, as, run := history(t, rec)
	hist := fmtHistory(pts)
	if code != 0 {
		t.Fatalf("launch exit %d\n%s\nhistory:\n%s", code, l.out.String(), hist)
	}
	t.Logf("ramp history:\n%s", hist)

	// No running sample was interrupted; every attempt was judged and passed.
	if len(as) != n {
		t.Fatalf("%d attempts in the record, want %d", len(as), n)
	}
	for _, a := range as {
		if a.Status != "passed" {
			t.Fatalf("attempt %s: %s (%s %s)\n%s", a.Sample, a.Status, a.Reason, a.Explanation, hist)
		}
	}
	if run.Status != "finished" {
		t.Fatalf("run status %q", run.Status)
	}

	// The provider's limit was met: it answered 429s, or the gateway saw the
	// remaining quota run low (both are pushback in the history).
	st := fp.Stats()
	if st.Succeeded < n {
		t.Fatalf("the provider served %d requests, want ≥ %d", st.Succeeded, n)
	}
	if len(st.APIKeys) != 1 || st.APIKeys[0] != rampKey || st.Unauthorized != 0 || st.BadRequests != 0 {
		t.Fatalf("the provider saw keys %v, %d unauthorized, %d bad requests", st.APIKeys, st.Unauthorized, st.BadRequests)
	}

	if len(pts) < 10 {
		t.Fatalf("only %d tends recorded:\n%s", len(pts), hist)
	}
	firstUp, firstPush, firstDown := -1, -1, -1
	top := 0
	for i, p := range pts {
		if p.Task != "arith" {
			t.Fatalf("ramp point for task %q", p.Task)
		}
		if p.Setpoint < 4 || p.Setpoint > 40 {
			t.Fatalf("setpoint %d outside samples_ramp [4, 40] at %d:\n%s", p.Setpoint, i, hist)
		}
		top = max(top, p.Setpoint)
		switch {
		case p.Decision == "up" && firstUp < 0:
			firstUp = i
		case p.Pushback && firstUp >= 0 && firstPush < 0:
			firstPush = i // the first pushback after the climb began
		}
		if p.Decision == "down" && firstDown < 0 {
			firstDown = i
		}
		// R1: a climb only on a clean, saturated window.
		if p.Decision == "up" && (p.Pushback || !p.Saturated || p.Errored > 0) {
			t.Fatalf("climbed on a window that failed a gate (%d):\n%s", i, hist)
		}
	}
	// It climbs first, while the provider keeps up.
	if firstUp < 0 || pts[0].Setpoint > 24 || top < 24 {
		t.Fatalf("the ramp never climbed from its start (first up %d, top %d):\n%s", firstUp, top, hist)
	}
	if firstPush < 0 {
		t.Fatalf("no pushback after the climb (first up %d, first pushback %d):\n%s", firstUp, firstPush, hist)
	}
	// R2: it backs off, and only after two consecutive windows of pushback.
	if firstDown < 0 {
		t.Fatalf("the ramp never backed off:\n%s", hist)
	}
	// While the other client held the key, the provider took nothing more
	// from the gateway: once down, the ramp stayed down.
	if left < 0 {
		t.Fatalf("the other client never started:\n%s", hist)
	}
	if reverseErr != nil || firstDown >= left {
		t.Fatalf("the ramp did not step down and hold while the other client held the key (first down at %d, the client left after %d tends: %v):\n%s", firstDown, left, reverseErr, hist)
	}
	for i := firstDown; i < min(left, len(pts)); i++ {
		if pts[i].Decision == "up" {
			t.Fatalf("climbed at %d, after the reversal at %d, while the other client held the key (it left after %d tends):\n%s", i, firstDown, left, hist)
		}
	}
	for i, p := range pts {
		if p.Decision == "down" && (i == 0 || !p.Pushback || !pts[i-1].Pushback) {
			t.Fatalf("stepped down at %d without two consecutive windows of pushback:\n%s", i, hist)
		}
		if p.Decision == "down" && i > 0 && p.Setpoint >= pts[i-1].Setpoint {
			t.Fatalf("a down decision at %d did not lower the setpoint:\n%s", i, hist)
		}
	}
	// It settles. Back-offs come in episodes (runs of consecutive "down"
	// decisions); a ramp that cycles floor -> top -> floor every few windows
	// would show many. The setpoint never jumps by more than one step, and the
	// gateway's connection limit (which the reversal clamps) ends near what
	// the provider sustains (about 6 in flight), far below the top of 40.
	episodes, swings := 0, 0
	for i, p := range pts {
		if p.Decision == "down" && (i == 0 || pts[i-1].Decision != "down") {
			episodes++
		}
		if i > 0 && abs(p.Setpoint-pts[i-1].Setpoint) > 20 {
			swings++
		}
	}
	if episodes > max(3, len(pts)/10) {
		t.Fatalf("%d back-off episodes in %d windows: the ramp never settled:\n%s", episodes, len(pts), hist)
	}
	if swings > 0 {
		t.Fatalf("the setpoint jumped by more than one step %d times:\n%s", swings, hist)
	}
	if last := pts[len(pts)-1].ConnLimit; last < 1 || last > 30 {
		t.Fatalf("the connection limit ended at %d, not near the provider's ~6 in flight:\n%s", last, hist)
	}

	// The report carries the same history (R6).
	out, code := steward(t, dir, "report", "--record", rec, "--format", "json")
	if code != 0 {
		t.Fatalf("report exit %d:\n%s", code, out)
	}
	var rep struct {
		Ramp []struct {
			Task     string `json:"task"`
			Setpoint int    `json:"setpoint"`
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		} `json:"ramp"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report json: %v\n%s", err, out)
	}
	if len(rep.Ramp) != len(pts) {
		t.Fatalf("report has %d ramp points, the record %d", len(rep.Ramp), len(pts))
	}
	downs := 0
	for _, p := range rep.Ramp {
		if p.Decision == "down" {
			downs++
			if !strings.Contains(p.Reason, "pushback") {
				t.Fatalf("down decision without its reason: %+v", p)
			}
		}
	}
	if downs == 0 {
		t.Fatal("the report's ramp history has no down decision")
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// `steward ramp hold` from another process holds a live run's climb with the
// reason in the history and the report; `resume` releases it; narrowing
// samples_ramp in _steward.yaml lands at the next tend.
func TestRampHoldResumeNarrowLive(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	gate := filepath.Join(dir, "release")
	// Every agent waits for the release file, so the task stays saturated
	// (samples queued, its limiter full) for as long as the test needs, and no
	// model call is made: no pushback, the climb is up to the gates alone.
	// The agent computes the answer itself: "What is 3+17?" -> 20.
	rampEvalSet(t, dir, "", `until [ -e `+gate+` ]; do sleep 1; done; echo $(( $(echo "$STEWARD_INPUT" | tr -dc 0-9+) ))`, 80, "[4, 64]")
	l := startLaunch(t, dir, rec)

	// Climb once (4 -> 24), then hold from another process (it lands at the
	// next tend, so the task may have climbed once more by then).
	l.ev.waitTends(t, "a first climb", func(p []record.RampPoint) bool { return count(p, "up") >= 1 })
	if out, code := steward(t, dir, "ramp", "hold", "--record", rec, "--reason", "quota review 42"); code != 0 || !strings.Contains(out, "quota review 42") {
		t.Fatalf("ramp hold exit %d:\n%s", code, out)
	}
	pts := l.ev.waitTends(t, "three held tends", func(p []record.RampPoint) bool { return countReason(p, "hold", "quota review 42") >= 3 })
	// While held, the setpoint never moved up.
	heldAt := -1
	for i, p := range pts {
		if strings.Contains(p.Reason, "quota review 42") {
			if heldAt < 0 {
				heldAt = i
			}
			if p.Decision != "hold" || p.Setpoint != pts[heldAt].Setpoint {
				t.Fatalf("moved while held at %d:\n%s", i, fmtHistory(pts))
			}
		}
	}
	// `steward tend --json` shows the hold live.
	if out, code := steward(t, dir, "tend", "--record", rec, "--json"); code != 0 || !strings.Contains(out, "quota review 42") {
		t.Fatalf("tend --json exit %d does not show the hold:\n%s", code, out)
	}
	if out, code := steward(t, dir, "ramp", "resume", "--record", rec); code != 0 {
		t.Fatalf("ramp resume exit %d:\n%s", code, out)
	}
	// Released: it climbs again (or, had it reached the top before the hold
	// landed, says it is at the top), and no decision is held any more.
	pts = l.ev.waitTends(t, "a climb after resume", func(p []record.RampPoint) bool {
		last := p[len(p)-1]
		return len(p) > heldAt && !strings.Contains(last.Reason, "held") &&
			((last.Decision == "up" && last.Setpoint > p[heldAt].Setpoint) || strings.Contains(last.Reason, "at the top"))
	})
	n := len(pts)
	before := pts[n-1].Setpoint
	if before <= 24 {
		t.Fatalf("setpoint %d after resume, want above 24:\n%s", before, fmtHistory(pts))
	}

	// Narrow the range on the live run: the setpoint comes down to the new top
	// at the next tend (R4).
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "samples_ramp: [4, 24]\ntend_interval: 1s\n")
	pts = l.ev.waitTends(t, "the narrowed top", func(p []record.RampPoint) bool { return len(p) > n && p[len(p)-1].Setpoint == 24 })
	for i := n; i < len(pts); i++ {
		if pts[i].Setpoint == 24 {
			if pts[i].Decision != "cap" || !strings.Contains(pts[i].Reason, "24") {
				t.Fatalf("the narrowing landed as %q %q:\n%s", pts[i].Decision, pts[i].Reason, fmtHistory(pts))
			}
			break
		}
		if pts[i].Setpoint < before {
			t.Fatalf("setpoint %d between the narrowing and its tend:\n%s", pts[i].Setpoint, fmtHistory(pts))
		}
	}
	// Let the samples finish; nothing running was interrupted by the hold or
	// the lower setpoint.
	writeFile(t, gate, "")
	if code := l.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("launch exit %d:\n%s", code, l.out.String())
	}
	pts, as, _ := history(t, rec)
	if len(as) != 80 {
		t.Fatalf("%d attempts, want 80", len(as))
	}
	for _, a := range as {
		if a.Status != "passed" {
			t.Fatalf("attempt %s: %s (%s %s)", a.Sample, a.Status, a.Reason, a.Explanation)
		}
	}
	for _, p := range pts[n:] {
		if p.Setpoint > 24 {
			t.Fatalf("setpoint above the narrowed top:\n%s", fmtHistory(pts))
		}
	}
	t.Logf("ramp history:\n%s", fmtHistory(pts))
	// The report shows the hold and its reason.
	out, code := steward(t, dir, "report", "--record", rec, "--format", "json")
	if code != 0 || !strings.Contains(out, "quota review 42") {
		t.Fatalf("report exit %d lacks the hold reason:\n%s", code, out)
	}
}

func count(pts []record.RampPoint, decision string) int {
	n := 0
	for _, p := range pts {
		if p.Decision == decision {
			n++
		}
	}
	return n
}

func countReason(pts []record.RampPoint, decision, reason string) int {
	n := 0
	for _, p := range pts {
		if p.Decision == decision && strings.Contains(p.Reason, reason) {
			n++
		}
	}
	return n
}

// A run in which no task ramps (max_samples on every task) must still get
// the gateway's adaptive connections, not one connection: 8 samples in
// flight against a slow provider must reach it concurrently.
//
// Known defect: internal/run/tend.go calls gw.SetCeiling(ctl.Ceiling()) at
// the start of the tend loop, and Ceiling() is 0 when no ramp is active; the
// gateway raises 0 to its minimum of 1, so such runs get one upstream
// connection. Remove the skip with the fix (apply the ceiling only when > 0).
func TestFixedSamplesKeepAdaptiveConnections(t *testing.T) {
	t.Parallel()
	fp := fakeprovider.New(fakeprovider.Config{APIKey: rampKey, BaseLatency: 500 * time.Millisecond, Seed: 9})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	rampEvalSet(t, dir, url, `"$STEWARD_BIN" agent chat`, 16, "[4, 40]")
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(string(mustRead(t, filepath.Join(dir, "steward.yaml"))), "    timeout: 5m\n", "    timeout: 5m\n    max_samples: 8\n", 1))
	l := startLaunch(t, dir, rec)
	if code := l.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("launch exit %d:\n%s", code, l.out.String())
	}
	if st := fp.Stats(); st.Succeeded != 16 || st.MaxInFlight < 4 {
		t.Fatalf("the provider served %d requests, at most %d at once; want 16, with at least 4 at once", st.Succeeded, st.MaxInFlight)
	}
}

// atTop reports whether a tend decision in pts reached setpoint top.
func atTop(pts []record.RampPoint, top int) bool {
	for _, p := range pts {
		if p.Setpoint >= top {
			return true
		}
	}
	return false
}
