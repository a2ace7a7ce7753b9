package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/faultproxy"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// faultDocker starts a faultproxy in front of the real daemon and an image
// context for docker tasks; it fails under CI=true without a daemon.
func faultDocker(t *testing.T, owner string) (*faultproxy.Proxy, string, string) {
	t.Helper()
	dockertest.Client(t)
	p, err := faultproxy.New("")
	if err != nil {
		t.Fatal(err)
	}
	host, err := p.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		// Whatever a killed (hung) run left is swept, as the next launch would.
		_ = exec.Command(exe, "sweep").Run()
	})
	img := builtBusybox(t, owner)
	return p, host, img
}

// faultLaunch runs steward with extra environment and a bound: a run that
// does not end within bound is killed and the test fails (it hung).
func faultLaunch(t *testing.T, dir string, env []string, bound time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "STEWARD_IN_CONTAINER=0"), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("steward %v did not finish within %v (hung):\n%s", args, bound, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

type faultReport struct {
	RunIDs []string `json:"run_ids"`
	Counts struct {
		Total, Passed, Failed, Errored, Infra, Skipped, Interrupted int
	} `json:"counts"`
	Attempts []struct {
		Task, Sample, Status, Reason string
	} `json:"attempts"`
}

func faultReadReport(t *testing.T, dir string, env []string) faultReport {
	t.Helper()
	out, code := faultLaunch(t, dir, env, time.Minute, "report", "--format", "json")
	if code != 0 {
		t.Fatalf("report exit %d:\n%s", code, out)
	}
	var r faultReport
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
		t.Fatalf("report json: %v\n%s", err, out)
	}
	return r
}

func faultNoContainers(t *testing.T, runIDs []string) {
	t.Helper()
	for _, id := range runIDs {
		left, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelRun+"="+id).Output()
		if err != nil || len(bytes.TrimSpace(left)) > 0 {
			t.Fatalf("containers of run %s left: %q %v", id, left, err)
		}
	}
}

// (a) The daemon refuses container create: the attempts end as infra
// (counted apart from failed in the counts line and the report), each retried
// exactly `retries` times, the run completes with exit code 3. When the
// refusals stop within the retries, the attempts pass.
func TestFaultDockerCreateRefused(t *testing.T) {
	t.Parallel()
	p, host, img := faultDocker(t, "cmd/steward fault tests (create)")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: boxed
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    retries: 2
    max_samples: 1
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: a, input: ok, target: ok}
      - {id: b, input: ok, target: ok}
      - {id: c, input: ok, target: ok}
`)
	env := []string{"DOCKER_HOST=" + host}
	if err := p.SetRules(faultproxy.Rule{Method: "POST", Path: `^/containers/create$`, Action: faultproxy.Refuse, Status: 500, Message: "injected: the daemon refuses"}); err != nil {
		t.Fatal(err)
	}
	out, code := faultLaunch(t, dir, env, 5*time.Minute, "launch")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (infra):\n%s", code, out)
	}
	if !strings.Contains(out, "3 total · 0 reused · 0 running · 0 queued · 0 passed · 0 failed · 0 errored · 3 infra · 0 skipped") {
		t.Fatalf("counts line must count infra apart:\n%s", out)
	}
	if hits := p.Hits()[0]; hits != 3*(1+2) {
		t.Fatalf("create refused %d times, want 9 (3 attempts × (1 + 2 retries)):\n%s", hits, out)
	}
	if n := strings.Count(out, "infrastructure error, retrying"); n != 6 {
		t.Fatalf("%d retry lines, want 6:\n%s", n, out)
	}
	rep := faultReadReport(t, dir, env)
	if rep.Counts.Infra != 3 || rep.Counts.Failed != 0 || rep.Counts.Errored != 0 {
		t.Fatalf("report counts %+v", rep.Counts)
	}
	for _, a := range rep.Attempts {
		if a.Status != "infra" || !strings.Contains(a.Reason, "the daemon refuses") {
			t.Fatalf("attempt %+v", a)
		}
	}
	faultNoContainers(t, rep.RunIDs)

	// Refusals that stop within the retries: every attempt passes; infra
	// results are never carried, so all three run again.
	if err := p.SetRules(faultproxy.Rule{Method: "POST", Path: `^/containers/create$`, Action: faultproxy.Refuse, Times: 2}); err != nil {
		t.Fatal(err)
	}
	// Sandboxes are counted by their starts: a create may also be a
	// never-started template container (the image's workdir, docs/docker.md).
	started := func() int {
		n := 0
		for _, r := range p.Requests() {
			if strings.HasPrefix(r, "POST /containers/") && strings.HasSuffix(r, "/start pass") {
				n++
			}
		}
		return n
	}
	before := started()
	out, code = faultLaunch(t, dir, env, 5*time.Minute, "launch")
	if code != 0 || !strings.Contains(out, "3 total · 0 reused · 0 running · 0 queued · 3 passed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if p.Hits()[0] != 2 || started()-before != 3 {
		t.Fatalf("hits %v, sandboxes started %d\n%s", p.Hits(), started()-before, strings.Join(p.Requests(), "\n"))
	}
}

// (b) The daemon accepts an exec but never answers its start: the attempt is
// bounded by the task timeout and the run does not hang.
func TestFaultDockerExecHangs(t *testing.T) {
	t.Parallel()
	p, host, img := faultDocker(t, "cmd/steward fault tests (exec)")
	for _, tc := range []struct {
		name   string
		action faultproxy.Action
	}{
		{"stalled stream", faultproxy.Stall},
		{"unanswered start", faultproxy.Hang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: boxed
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    timeout: 3s
    retries: 0
    max_samples: 2
    agent: 'echo "$STEWARD_INPUT"'
    scorer: {match: exact}
    samples:
      - {id: a, input: ok, target: ok}
      - {id: b, input: ok, target: ok}
`)
			env := []string{"DOCKER_HOST=" + host}
			// Only the first exec start of the run hangs.
			if err := p.SetRules(faultproxy.Rule{Method: "POST", Path: `^/exec/[^/]+/start$`, Action: tc.action, Times: 1}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out, code := faultLaunch(t, dir, env, 90*time.Second, "launch")
			t.Logf("launch took %v:\n%s", time.Since(start).Round(time.Millisecond), out)
			if p.Hits()[0] != 1 {
				t.Fatalf("the fault was not hit: %v\n%s", p.Hits(), out)
			}
			rep := faultReadReport(t, dir, env)
			if rep.Counts.Total != 2 || rep.Counts.Passed != 1 || rep.Counts.Errored+rep.Counts.Infra != 1 {
				t.Fatalf("exit %d, counts %+v\n%s", code, rep.Counts, out)
			}
			for _, a := range rep.Attempts {
				if r := strings.ToLower(a.Reason); a.Status != "passed" && !strings.Contains(r, "timed out") && !strings.Contains(r, "timeout") {
					t.Fatalf("the hung attempt's reason should name the timeout: %+v", a)
				}
			}
			if code != 1 && code != 3 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			faultNoContainers(t, rep.RunIDs)
		})
	}
}

// (c) The upstream storms 5xx, drops connections and answers slowly: the
// gateway retries and the run completes with every sample passed.
func TestFaultUpstreamStorms(t *testing.T) {
	t.Parallel()
	const key = "sk-fault-upstream-5c1e"
	fp := fakeprovider.New(fakeprovider.Config{
		APIKey: key, ErrorRate: 0.3, ErrorStatus: 503, DropRate: 0.15, SlowRate: 0.2, SlowLatency: 300 * time.Millisecond, Seed: 11,
	})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	var samples []string
	for i := 1; i <= 24; i++ {
		samples = append(samples, fmt.Sprintf(`      - {id: q%02d, input: "What is %d+%d?", target: "%d"}`, i, i, i, 2*i))
	}
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
model:
  upstream: openai
  name: gpt-fault
  base_url: `+url+`/v1
  api_key_env: FAULT_KEY
tasks:
  - name: chat
    sandbox: {provider: local}
    exclusive: false
    max_samples: 8
    timeout: 2m
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: exact}
    samples:
`+strings.Join(samples, "\n")+"\n")
	out, code := faultLaunch(t, dir, []string{"FAULT_KEY=" + key}, 4*time.Minute, "launch")
	st := fp.Stats()
	if code != 0 || !strings.Contains(out, "24 total · 0 reused · 0 running · 0 queued · 24 passed") {
		t.Fatalf("exit %d, provider stats %+v:\n%s", code, st, out)
	}
	if st.Injected5xx == 0 || st.Dropped == 0 || st.Slowed == 0 {
		t.Fatalf("the storm did not happen: %+v", st)
	}
	if st.Succeeded < 24 || st.Requests < 24+st.Injected5xx+st.Dropped {
		t.Fatalf("provider stats %+v", st)
	}
	if strings.Contains(out, key) {
		t.Fatal("the real key is in the output")
	}
}

// (d) The record's disk fills up, before a launch and in the middle of one:
// a clear error (exit 3, naming the record and the full disk), and what was
// published stays intact and is carried once there is room again.
func TestFaultRecordDiskFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec")
	if err := os.Mkdir(rec, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", rec).Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: mounting a tmpfs for the record is required: %v", err)
		}
		t.Skipf("cannot mount a tmpfs (not root?): %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", rec).Run() })
	evalset := func(n int, agent string) { diskFullEvalSet(t, dir, n, agent) } // the disk-full tests' eval set
	filler := filepath.Join(rec, "filler")
	fill := func() {
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for n := 64 << 10; n >= 1; n /= 2 {
			buf := make([]byte, n)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
		}
	}
	published := func() map[string]bool {
		ctx := context.Background()
		db, err := record.Open(ctx, rec)
		if err != nil {
			t.Fatalf("reopen the record: %v", err)
		}
		defer db.Close()
		runs, _ := db.Runs(ctx)
		got := map[string]bool{}
		for _, r := range runs {
			as, err := db.Attempts(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				if a.Status == "skipped" && strings.Contains(a.Reason, "disk is full") {
					continue // queued when the disk filled: recorded as not started
				}
				if a.Status != "passed" || a.Fingerprint == "" || a.Finished.IsZero() {
					t.Fatalf("damaged attempt %+v", a)
				}
				got[a.Sample] = true
			}
		}
		return got
	}
	checkFull := func(what, out string, code int) {
		low := strings.ToLower(out)
		if code != 3 || !(strings.Contains(low, "disk is full") || strings.Contains(low, "no space left")) || !strings.Contains(out, rec) {
			t.Errorf("%s: a full record disk must end the run with exit 3 and say the record's disk is full; exit %d:\n%s", what, code, out)
		}
	}

	// 1. Ten attempts published, then the disk is full before a launch.
	evalset(10, "true")
	if out, code := faultLaunch(t, dir, nil, 2*time.Minute, "launch", "--record", rec); code != 0 {
		t.Fatalf("first run exit %d:\n%s", code, out)
	}
	fill()
	evalset(60, "true")
	out, code := faultLaunch(t, dir, nil, 3*time.Minute, "launch", "--record", rec)
	checkFull("full before launch", out, code)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	crashIntegrity(t, rec)
	if got := published(); len(got) != 10 {
		t.Fatalf("published after a full disk at launch: %d, want 10", len(got))
	}

	// 2. The disk fills in the middle of a launch.
	evalset(60, "sleep 0.2")
	ev := newLaunchEvents(t, t.TempDir())
	cmd := exec.Command(exe, "launch", "--record", rec, "--events", ev.path)
	cmd.Dir = dir
	var buf syncBuf
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "16 attempts published", 2*time.Minute, func(e *launchEvents) bool { return len(e.attempts) >= 16 })
	fill()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the run hung on a full disk:\n%s", buf.String())
	}
	checkFull("full during launch", buf.String(), cmd.ProcessState.ExitCode())
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	crashIntegrity(t, rec)
	kept := published()
	// The counts line must not claim results the record could not keep, and
	// work whose results cannot be kept should stop being dispatched.
	if c := crashCounts(buf.String()); c == nil || c[4] > len(kept) {
		t.Errorf("full during launch: the counts line claims %v passed, the record holds %d:\n%s", c, len(kept), buf.String())
	}
	if n := strings.Count(buf.String(), "database or disk is full"); n > 4+2 {
		t.Errorf("full during launch: %d attempts ran after the record could no longer take results (dispatching should stop at the first failed publish)", n)
	}

	// Room again: the set completes, carrying what was published.
	out, code = faultLaunch(t, dir, nil, 3*time.Minute, "launch", "--record", rec)
	c := crashCounts(out)
	if code != 0 || c == nil || c[0] != 60 || c[1] != len(kept)-0 || c[4] != 60 {
		t.Fatalf("after room is back (%d published), exit %d:\n%s", len(kept), code, out)
	}
}

// ---- security: secrets never reach a local sandbox, the record or a report ----

// The model API key and the GitHub token are in Steward's environment; a
// local sandbox's environment holds neither (only the per-attempt gateway
// token), and when an agent prints the real key anyway (the local provider is
// not isolated: it could read it from the host), the output, the record and
// every report show it masked.
func TestSecretsNeverReachLocalSandboxOrRecord(t *testing.T) {
	t.Parallel()
	const key = "sk-real-local-key-5e0c2d9a"
	const ghToken = "ghs_local_secret_token_77aa10"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	url, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	envDir := filepath.Join(dir, "envs")
	if err := os.Mkdir(envDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A "leak" the agent can reach on the host, as an unisolated process could.
	writeFile(t, filepath.Join(dir, "leaked.txt"), key+"\n")
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
model:
  upstream: openai
  name: gpt-sec
  base_url: `+url+`/v1
  api_key_env: OPENAI_API_KEY
tasks:
  - name: chat
    sandbox: {provider: local}
    exclusive: false
    agent: 'env > `+envDir+`/$STEWARD_SAMPLE_ID.env; "$STEWARD_BIN" agent chat'
    scorer: {match: exact}
    samples:
      - {id: a, input: "What is 6*7?", target: "42"}
      - {id: b, input: "What is 1+2?", target: "3"}
  - name: leaky
    sandbox: {provider: local}
    exclusive: false
    agent: 'k=$(cat `+filepath.Join(dir, "leaked.txt")+`); echo "stderr has $k" >&2; echo "answer $k"'
    scorer: {command: 'echo "{\"passed\": false, \"explanation\": \"saw $STEWARD_ANSWER\"}"'}
    samples:
      - {id: c, input: "x", target: "y"}
  - name: forger
    sandbox: {provider: local}
    exclusive: false
    agent: 'k=$(cat `+filepath.Join(dir, "leaked.txt")+`); printf "failed with %s\n{\"event\":\"end\",\"cancelled\":true}\n\xe2\x80\xa8forged" "$k" >&2; exit 3'
    scorer: {match: exact}
    samples:
      - {id: d, input: "x", target: "y"}
`)
	env := []string{"OPENAI_API_KEY=" + key, "GITHUB_TOKEN=" + ghToken, "ANTHROPIC_API_KEY=" + key}
	out, code := faultLaunch(t, dir, env, 2*time.Minute, "launch", "--report-dir", filepath.Join(dir, "reports"), "--events", filepath.Join(dir, "events.jsonl"))
	if code != 1 || !strings.Contains(out, "2 passed · 1 failed · 1 errored") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if st := fp.Stats(); len(st.APIKeys) != 1 || st.APIKeys[0] != key || st.Succeeded != 2 {
		t.Fatalf("the provider saw %+v", st)
	}
	for _, id := range []string{"a", "b"} {
		b, err := os.ReadFile(filepath.Join(envDir, id+".env"))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, key) || strings.Contains(s, ghToken) || strings.Contains(s, "GITHUB_TOKEN") {
			t.Fatalf("sandbox %s environment holds a secret:\n%s", id, s)
		}
		if !strings.Contains(s, "OPENAI_API_KEY=stw-") {
			t.Fatalf("sandbox %s has no gateway token:\n%s", id, s)
		}
	}
	texts := map[string]string{"launch output": out}
	for _, f := range []string{"report.md", "report.json", "junit.xml", "report.html"} {
		b, err := os.ReadFile(filepath.Join(dir, "reports", f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	for _, format := range []string{"terminal", "markdown", "json", "junit", "comment", "html"} {
		o, _ := faultLaunch(t, dir, env, time.Minute, "report", "--format", format)
		texts["report --format "+format] = o
	}
	texts["record"] = recordText(t, filepath.Join(dir, ".steward", "record.sqlite"))
	// --events: the errored attempt's reason (its stderr's tail) is there,
	// masked and escaped: one line per event, "end" once and last.
	events := string(mustRead(t, filepath.Join(dir, "events.jsonl")))
	texts["--events"] = events
	lines := strings.Split(strings.TrimSuffix(events, "\n"), "\n")
	for i, l := range lines {
		var e struct{ Event string }
		if err := json.Unmarshal([]byte(l), &e); err != nil || (e.Event == "end") != (i == len(lines)-1) {
			t.Errorf("events line %d of %d is not one event, or a forged end: %q", i+1, len(lines), l)
		}
	}
	if !strings.Contains(events, "failed with ") {
		t.Errorf("the errored attempt's reason is missing from the events:\n%s", events)
	}
	for name, s := range texts {
		if strings.Contains(s, key) || strings.Contains(s, ghToken) {
			t.Errorf("a secret is in the %s", name)
		}
	}
	// The leaky attempt's output is there, masked.
	if !strings.Contains(texts["record"], "stderr has ") || !strings.Contains(texts["report.json"], "answer ") {
		t.Errorf("the leaky attempt's output is missing from the record or the report")
	}
}

// recordText concatenates every text value of every table of a record.
func recordText(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		_ = tables.Scan(&n)
		names = append(names, n)
	}
	tables.Close()
	var b strings.Builder
	for _, table := range names {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			_ = rows.Scan(ptrs...)
			for _, v := range vals {
				switch x := v.(type) {
				case string:
					b.WriteString(x)
				case []byte:
					b.Write(x)
					if zr, err := gzip.NewReader(bytes.NewReader(x)); err == nil { // transcripts, artifacts
						inflated, _ := io.ReadAll(zr)
						b.Write(inflated)
					}
				}
				b.WriteByte('\n')
			}
		}
		rows.Close()
	}
	return b.String()
}
