package run

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/testlock"
)

type dockerFactory struct{ t *testing.T }

func (f dockerFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return docker.New(ctx, docker.Options{RunID: ri.RunID, LockPath: ri.LockPath, Log: ri.Stderr})
}
func (f dockerFactory) Available(ctx context.Context, name string) bool {
	return name == docker.Name && docker.Available(ctx)
}

func needDocker(t *testing.T) {
	t.Helper()
	testlock.Shared(t, testlock.Docker) // packages run side by side (internal/testlock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if docker.Available(ctx) {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no Docker daemon answers: Docker tests must run in CI")
	}
	t.Skip("no Docker daemon answers")
}

// An attempt in a real Docker sandbox reaches the model gateway with its
// token, while the real key is absent from its environment, its files, the
// record, the logs and the report.
//
// Each attempt's token is bound to its container's address (12.5): the
// agent's own calls must still go through, in process and from workers.
func TestDockerAgentReachesGatewayKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	needDocker(t)
	for _, workers := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "workers"}[workers], func(t *testing.T) {
			dockerAgentKeyNeverLeaks(t, workers)
		})
	}
}

func dockerAgentKeyNeverLeaks(t *testing.T, workers bool) {
	const key = "sk-real-key-d0cker-7f3a91"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	ctx := context.Background()
	url, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	busyboxImage(t, dir)
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-test
  base_url: `+url+`/v1
  api_key_env: TEST_REAL_KEY
tasks:
  - name: chat
    sandbox: {provider: docker, build: image, memory: 128m}
    agent: 'env > env.txt; grep -rl "`+key+`" /work /tmp /etc /opt /root /home 2>/dev/null | grep -v leak.txt > leak.txt; mkdir -p out; ln -s /etc/hostname out/host; echo "note of $STEWARD_SAMPLE_ID" > out/note.txt; "$STEWARD_BIN" agent chat'
    artifacts: [env.txt, out/*]
    scorer:
      command: 'test ! -s leak.txt && ! grep -q "`+key+`" env.txt && grep -q OPENAI_API_KEY env.txt && test "$STEWARD_ANSWER" = "$STEWARD_TARGET"'
    samples:
      - {id: a, input: "What is 6*7?", target: "42"}
      - {id: b, input: "What is 1+2?", target: "3"}
`)
	es, err := evalset.Load(path, evalset.LoadOptions{Getenv: func(k string) string {
		if k == "TEST_REAL_KEY" {
			return key
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	res, err := Launch(ctx, Options{
		EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}, Exe: buildSteward(t), Workers: workers,
		Getenv: func(k string) string {
			if k == "TEST_REAL_KEY" {
				return key
			}
			return ""
		},
	})
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	if res.Report.Counts.Passed != 2 {
		t.Fatalf("counts %+v\n%s\n%+v", res.Report.Counts, stderr.String(), res.Report.Attempts)
	}
	st := fp.Stats()
	if len(st.APIKeys) != 1 || st.APIKeys[0] != key {
		t.Fatalf("the provider saw keys %v, want only the real one", st.APIKeys)
	}
	// Each attempt's transcript holds its one model call; its artifacts were
	// copied out of the container, the symlink refused, the token in env.txt redacted.
	for _, a := range res.Report.Attempts {
		d := a.Details
		if d == nil || d.Transcript == nil || len(d.Transcript.Calls) != 1 || d.Transcript.Calls[0].Status != 200 || d.Transcript.Calls[0].Response == nil {
			t.Errorf("%s: transcript %+v", a.Sample, d)
			continue
		}
		got := map[string]report.Artifact{}
		for _, f := range d.Artifacts {
			got[f.Path] = f
		}
		if got["out/note.txt"].Text != "note of "+a.Sample+"\n" || got["out/host"].Note != "a symlink: refused" ||
			!strings.Contains(got["env.txt"].Text, "OPENAI_API_KEY=[redacted]") || strings.Contains(got["env.txt"].Text, "stw-") {
			t.Errorf("%s: artifacts %+v", a.Sample, d.Artifacts)
		}
	}
	var js bytes.Buffer
	report.JSON(&js, res.Report)
	for name, text := range map[string]string{"report": js.String(), "log": stderr.String(), "record": dumpRecord(t, filepath.Join(dir, ".steward", "record.sqlite"))} {
		if strings.Contains(text, key) {
			t.Fatalf("the real key is in the %s", name)
		}
	}
	// Nothing of the run is left in Docker.
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+sandbox.LabelRun+"="+res.Report.RunIDs[0]).Output()
	nets, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label="+sandbox.LabelRun+"="+res.Report.RunIDs[0]).Output()
	if len(bytes.TrimSpace(out)) > 0 || len(bytes.TrimSpace(nets)) > 0 {
		t.Fatalf("left behind: containers %q networks %q", out, nets)
	}
}

// dumpRecord reads every text column of every table.
func dumpRecord(t *testing.T, path string) string {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, table := range []string{"runs", "attempts", "ramp", "leases", "controls", "live", "transcripts", "artifacts"} {
		rows, err := db.Query("SELECT * FROM " + table)
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
			rows.Scan(ptrs...)
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

// A task's files: are in the workdir for every attempt in a reused Docker
// sandbox (a group lane, and a sandbox_reuse pool, each reset between
// attempts). (They used to be copied only when the sandbox was made.)
func TestDockerReusedSandboxesKeepTaskFiles(t *testing.T) {
	t.Parallel()
	needDocker(t)
	dir := t.TempDir()
	busyboxImage(t, dir)
	write(t, dir, "run.sh", `echo "ran $STEWARD_SAMPLE_ID"`+"\n")
	path := write(t, dir, "steward.yaml", `
tasks:
  - name: lane
    sandbox: {provider: docker, build: image, memory: 64m}
    files: {run.sh: run.sh}
    agent: 'sh run.sh'
    scorer: {match: regex}
    groups: [{name: g, samples: [l1, l2, l3]}]
    samples:
      - {id: l1, input: "", target: "^ran l1$"}
      - {id: l2, input: "", target: "^ran l2$"}
      - {id: l3, input: "", target: "^ran l3$"}
  - name: pool
    sandbox: {provider: docker, build: image, memory: 64m}
    sandbox_reuse: true
    max_samples: 1
    files: {run.sh: run.sh}
    agent: 'sh run.sh'
    scorer: {match: regex}
    samples:
      - {id: p1, input: "", target: "^ran p1$"}
      - {id: p2, input: "", target: "^ran p2$"}
      - {id: p3, input: "", target: "^ran p3$"}
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
	if got := statuses(res.Report); got != "l1:p l2:p l3:p p1:p p2:p p3:p" {
		t.Fatalf("statuses %s\n%+v\n%s", got, res.Report.Attempts, stderr.String())
	}
	// One sandbox per lane and one for the serial pool: the attempts reused them.
	db, err := record.Open(context.Background(), filepath.Join(dir, ".steward"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Attempts(context.Background(), res.Report.RunIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, a := range rows {
		ids[a.Task+"/"+a.Sandbox] = true
	}
	if len(ids) != 2 {
		t.Fatalf("%d sandboxes for 6 attempts, want 2 (reused): %v", len(ids), ids)
	}
}

// A model-graded scorer calls the gateway with the attempt's token from the
// grader, a fresh container with an address of its own: the token is bound
// to that address too, so the call is served (and still refused to any
// other container).
func TestDockerModelGradedScorerReachesGateway(t *testing.T) {
	t.Parallel()
	needDocker(t)
	const key = "sk-real-key-grader-55e1c0"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	ctx := context.Background()
	url, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fp.Close()
	dir := t.TempDir()
	busyboxImage(t, dir)
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-test
  base_url: `+url+`/v1
  api_key_env: TEST_REAL_KEY
tasks:
  - name: judged
    sandbox: {provider: docker, build: image, memory: 128m}
    agent: 'echo "$STEWARD_INPUT"'
    scorer:
      command: 'wget -O /tmp/models.json --header "Authorization: Bearer $OPENAI_API_KEY" "$OPENAI_BASE_URL/models" 2>&1 && grep -q "\"data\"" /tmp/models.json && test "$STEWARD_ANSWER" = "$STEWARD_TARGET"'
    samples:
      - {id: a, input: "42", target: "42"}
`)
	getenv := func(k string) string {
		if k == "TEST_REAL_KEY" {
			return key
		}
		return ""
	}
	es, err := evalset.Load(path, evalset.LoadOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	res, err := Launch(ctx, Options{EvalSet: es, Providers: dockerFactory{t}, Stderr: &syncWriter{w: &stderr}, Exe: buildSteward(t), Getenv: getenv})
	if err != nil {
		t.Fatalf("launch: %v\n%s", err, stderr.String())
	}
	if res.Report.Counts.Passed != 1 {
		t.Fatalf("the model-graded scorer did not pass: %+v\n%s\n%+v", res.Report.Counts, stderr.String(), res.Report.Attempts)
	}
}
