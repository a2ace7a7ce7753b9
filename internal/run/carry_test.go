package run

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/record"
)

// rowCounts counts what the record holds, with plain SQL (so it reads any
// schema version).
type rowCounts struct {
	runs, attempts int
	logBytes       int64
}

func countRows(t *testing.T, dir string) rowCounts {
	t.Helper()
	db, err := record.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var c rowCounts
	if err := db.SQL().QueryRow(`SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM attempts), (SELECT COALESCE(sum(length(log)),0) FROM attempts)`).Scan(&c.runs, &c.attempts, &c.logBytes); err != nil {
		t.Fatal(err)
	}
	return c
}

// A no-op re-run adds a run row and references to the carried attempts:
// the record's attempt rows and logs do not grow, however many re-runs.
func TestNoOpRerunsAddOnlyReferences(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "helper.txt", "v1")
	path := write(t, dir, "steward.yaml", strings.Replace(basicSet, `agent: 'cat helper.txt >/dev/null; printf "%s" "$STEWARD_INPUT"'`,
		`agent: 'cat helper.txt >/dev/null; head -c 4000 /dev/zero | tr "\0" L >&2; printf "%s" "$STEWARD_INPUT"'`, 1))
	rec := filepath.Join(dir, ".steward")
	r1 := launchSet(t, path, nil)
	if got := statuses(r1.rep); got != "a:p a:p b:f b:f c:p c:p" {
		t.Fatalf("first run %s", got)
	}
	first := countRows(t, rec)
	if first.attempts != 6 || first.logBytes < 6*4000 {
		t.Fatalf("first run recorded %+v", first)
	}
	for i := 0; i < 4; i++ {
		r := launchSet(t, path, nil)
		if got := statuses(r.rep); got != "a=p a=p b=f b=f c=p c=p" || r.created != 0 {
			t.Fatalf("no-op re-run %d: %s, %d sandboxes", i, got, r.created)
		}
		// The report still shows every carried attempt with its log.
		for _, a := range r.rep.Attempts {
			if !strings.Contains(a.Log, "LLLL") {
				t.Fatalf("no-op re-run %d: carried %s/%s#%d lost its log: %q", i, a.Task, a.Sample, a.Attempt, a.Log)
			}
		}
	}
	after := countRows(t, rec)
	if after.runs != first.runs+4 || after.attempts != first.attempts || after.logBytes != first.logBytes {
		t.Fatalf("after 4 no-op re-runs the record grew from %+v to %+v: want only 4 more runs", first, after)
	}
}

// --dry and the report name the run that produced a carried result, not a
// run that only carried it.
func TestCarryNamesTheProducingRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "helper.txt", "v1")
	path := write(t, dir, "steward.yaml", basicSet)
	r1 := launchSet(t, path, nil)
	producer := r1.rep.RunIDs[0]
	r2 := launchSet(t, path, nil)
	if got := statuses(r2.rep); got != "a=p a=p b=f b=f c=p c=p" {
		t.Fatalf("second run %s", got)
	}
	dry := launchSet(t, path, func(o *Options) { o.Dry = true })
	for _, a := range dry.rep.Attempts {
		want := "carry: carried " + map[bool]string{true: "failed", false: "passed"}[a.Sample == "b"] + " from " + producer
		if a.Reason != want {
			t.Fatalf("--dry: %s#%d reason %q, want %q (run %s only carried it)", a.Sample, a.Attempt, a.Reason, want, r2.rep.RunIDs[0])
		}
	}
	r3 := launchSet(t, path, nil)
	for _, a := range r3.rep.Attempts {
		if a.CarriedFrom != producer {
			t.Fatalf("third run: %s#%d carried from %q, want %q", a.Sample, a.Attempt, a.CarriedFrom, producer)
		}
	}
}

// Carried rows keep the tokens and cost of the run that produced them; the
// carrying run spends nothing and reports what carry saved.
func TestCarriedRowsKeepSpend(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model:
  upstream: mock
  prices: {input_per_mtok: 1000, output_per_mtok: 2000}
tasks:
  - name: spend
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - {id: "1", input: "What is 1+1?", target: "2"}
      - {id: "2", input: "What is 2+2?", target: "4"}
`)
	exe := buildSteward(t)
	r1 := launchSet(t, path, func(o *Options) { o.Exe = exe })
	if got := statuses(r1.rep); got != "1:p 2:p" || r1.rep.Spend.USD <= 0 || r1.rep.Spend.InputTokens <= 0 {
		t.Fatalf("first run %s spend %+v\n%s", got, r1.rep.Spend, r1.stderr)
	}
	r2 := launchSet(t, path, func(o *Options) { o.Exe = exe })
	if got := statuses(r2.rep); got != "1=p 2=p" {
		t.Fatalf("second run %s", got)
	}
	for i, a := range r2.rep.Attempts {
		p := r1.rep.Attempts[i]
		if a.CostUSD != p.CostUSD || a.InputTokens != p.InputTokens || a.OutputTokens != p.OutputTokens || a.CostUSD <= 0 {
			t.Fatalf("carried %s: cost %v tokens %d/%d, the producing run's: cost %v tokens %d/%d", a.Sample, a.CostUSD, a.InputTokens, a.OutputTokens, p.CostUSD, p.InputTokens, p.OutputTokens)
		}
	}
	s := r2.rep.Spend
	if s.USD != 0 || s.Requests != 0 || s.SavedUSD != r1.rep.Spend.USD || s.SavedInputTokens != r1.rep.Spend.InputTokens {
		t.Fatalf("carrying run spend %+v, want 0 spent and %v saved", s, r1.rep.Spend.USD)
	}
}

// Early exit (S4): a re-run whose passes are carried runs nothing new; the
// skipped attempts are carried too (task early_exit and --early-exit).
func TestEarlyExitSkipsCarry(t *testing.T) {
	for _, viaFlag := range []bool{false, true} {
		t.Run(fmt.Sprint("flag=", viaFlag), func(t *testing.T) {
			dir := t.TempDir()
			ee := "early_exit: true"
			if viaFlag {
				ee = ""
			}
			path := write(t, dir, "steward.yaml", `
tasks:
  - name: flaky
    sandbox: {provider: local}
    max_samples: 1
    `+ee+`
    attempts: 5
    agent: 'if [ "$STEWARD_ATTEMPT" -ge 2 ]; then echo ok; else echo no; fi'
    scorer: {match: exact}
    samples: [{id: s, input: "", target: ok}, {id: t, input: "", target: ok}]
`)
			mod := func(o *Options) { o.EarlyExit = viaFlag }
			r1 := launchSet(t, path, mod)
			if got := statuses(r1.rep); got != "s:f s:p s:s s:s s:s t:f t:p t:s t:s t:s" {
				t.Fatalf("first run %s", got)
			}
			before := countRows(t, filepath.Join(dir, ".steward"))
			r2 := launchSet(t, path, mod)
			if got := statuses(r2.rep); got != "s=f s=p s=s s=s s=s t=f t=p t=s t=s t=s" || r2.created != 0 {
				t.Fatalf("re-run %s created %d sandboxes: want every attempt carried, nothing run", got, r2.created)
			}
			if after := countRows(t, filepath.Join(dir, ".steward")); after.attempts != before.attempts {
				t.Fatalf("re-run added %d attempt rows", after.attempts-before.attempts)
			}
			// Without early exit the skipped attempts run.
			if !viaFlag {
				return
			}
			r3 := launchSet(t, path, nil)
			if got := statuses(r3.rep); got != "s=f s=p s:p s:p s:p t=f t=p t:p t:p t:p" {
				t.Fatalf("re-run without early exit %s", got)
			}
		})
	}
}

// A tag moved to another image does not carry the old image's results: the
// image's ID is in the fingerprint (resolved through the docker provider).
func TestRetaggedImageDoesNotCarry(t *testing.T) {
	t.Parallel()
	needDocker(t)
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox-static is needed (apt-get install busybox-static): %v", err)
	}
	dir := t.TempDir()
	tag := "steward-test-retag:" + record.NewID("")[:8]
	build := func(version string) {
		t.Helper()
		img := filepath.Join(dir, "image-"+version)
		data, _ := os.ReadFile(bb)
		write(t, img, "busybox", string(data))
		os.Chmod(filepath.Join(img, "busybox"), 0o755)
		write(t, img, "version", version)
		// version first: each build's layer chain is its own, so removing
		// one with its parents never deletes a layer another build reuses.
		write(t, img, "Dockerfile", "FROM scratch\nCOPY version /version\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nWORKDIR /work\n")
		if out, err := exec.Command("docker", "build", "-q", "-t", tag, img).CombinedOutput(); err != nil {
			t.Fatalf("docker build: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	build("v1")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: img
    sandbox: {provider: docker, image: `+tag+`, memory: 64m}
    agent: 'cat /version'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: v1}]
`)
	dockerRun := func() launched {
		t.Helper()
		return launchSet(t, path, func(o *Options) { o.Providers = dockerFactory{t} })
	}
	if got := statuses(dockerRun().rep); got != "a:p" {
		t.Fatalf("first run %s", got)
	}
	if got := statuses(dockerRun().rep); got != "a=p" {
		t.Fatalf("unchanged image: %s, want carried", got)
	}
	old, _ := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", tag).Output()
	build("v2")
	if now, _ := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", tag).Output(); string(now) == string(old) {
		t.Fatal("the rebuilt image has the same ID")
	}
	_ = exec.Command("docker", "rmi", strings.TrimSpace(string(old))).Run()
	dry := launchSet(t, path, func(o *Options) { o.Providers = dockerFactory{t}; o.Dry = true })
	if r := dry.rep.Attempts[0].Reason; r != "run: image changed" {
		t.Fatalf("--dry after the retag: %q, want run: image changed", r)
	}
	if got := statuses(dockerRun().rep); got != "a:f" {
		t.Fatalf("retagged image: %s, want the attempt run again (and fail: the image now says v2)", got)
	}
}
