package run

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
)

type dockerFactory struct{ t *testing.T }

func (f dockerFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return docker.New(ctx, docker.Options{RunID: ri.RunID, LockPath: ri.LockPath, Log: ri.Stderr})
}
func (f dockerFactory) DockerAvailable(ctx context.Context) bool { return docker.Available(ctx) }

func needDocker(t *testing.T) {
	t.Helper()
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
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox-static is needed (apt-get install busybox-static): %v", err)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "image")
	os.MkdirAll(img, 0o755)
	data, _ := os.ReadFile(bb)
	os.WriteFile(filepath.Join(img, "busybox"), data, 0o755)
	write(t, img, "Dockerfile", "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nWORKDIR /work\n")
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-test
  base_url: `+url+`/v1
  api_key_env: TEST_REAL_KEY
tasks:
  - name: chat
    sandbox: {provider: docker, build: image, memory: 128m}
    agent: 'env > env.txt; grep -rl "`+key+`" /work /tmp /etc /opt /root /home 2>/dev/null | grep -v leak.txt > leak.txt; "$STEWARD_BIN" agent chat'
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
	for _, table := range []string{"runs", "attempts", "ramp", "leases", "controls", "live"} {
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
				}
				b.WriteByte('\n')
			}
		}
		rows.Close()
	}
	return b.String()
}
