package run

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker"
)

// egressFactory is dockerFactory with the egress proxies run from a real
// steward binary (in process, os.Executable is this test binary).
type egressFactory struct{ exe string }

func (f egressFactory) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	return docker.New(ctx, docker.Options{RunID: ri.RunID, LockPath: ri.LockPath, Log: ri.Stderr, EgressBinary: f.exe})
}
func (f egressFactory) Available(ctx context.Context, name string) bool {
	return name == docker.Name && docker.Available(ctx)
}

// rememberEgressImage has TestMain remove the proxy image built from exe
// (the context the provider builds it from: exe as steward, a Dockerfile).
func rememberEgressImage(t *testing.T, exe, stderr string) {
	t.Helper()
	dir := t.TempDir()
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "Dockerfile", "FROM scratch\nCOPY steward /steward\n")
	if err := os.WriteFile(filepath.Join(dir, "steward"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := docker.ContextHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	builtImages.Store(sum, true)
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", docker.BuildRef(sum)).CombinedOutput()
	switch {
	case err != nil && strings.Contains(strings.ToLower(string(out)), "no such image") && !strings.Contains(stderr, "building steward-build:"):
		// Go builds are reproducible: another package's tests, running
		// beside these, build the same binary into the same image and
		// remove it when they end (a CI run saw it gone here). When this
		// run built it, its log names the ref, checked below instead.
		t.Logf("the egress proxy image %s was already removed by another package's tests", docker.BuildRef(sum))
	case err != nil && !strings.Contains(stderr, "building "+docker.BuildRef(sum)+" "):
		t.Errorf("the egress proxy image is not %s: %v %s", docker.BuildRef(sum), err, out)
	}
}

// A Harbor task with network_mode = "allowlist" runs end to end on Docker:
// its sandbox reaches the model gateway directly (the agent completes a
// chat with its token, bound to its address), has HTTP_PROXY naming its
// egress proxy, and the proxy refuses a host not on allowed_hosts (before
// any lookup: nothing leaves the machine). The run leaves no container and
// no network. (TestEgressAllowlist in internal/sandbox/docker shows allowed
// hosts reached, private addresses and direct connections refused.)
func TestHarborAllowlistRunsThroughTheEgressProxy(t *testing.T) {
	t.Parallel()
	needDocker(t)
	ds := harborDataset(t, t.TempDir(), map[string]map[string]string{
		"allow-file": writeFileWithNetwork(t, "network_mode = \"allowlist\"\nallowed_hosts = [\"good.upstream.test\"]"),
	})
	keepTasks(t, ds, "allow-file")
	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model: {upstream: mock, name: mock-model}
tasks:
  - name: harbor
    sandbox: {provider: docker}
    agent: '"$STEWARD_BIN" agent chat > /logs/agent/answer.txt && echo hello > /app/hello.txt; echo "$HTTP_PROXY" > /logs/agent/proxy.txt; wget -q -O- http://denied.upstream.test/ > /logs/agent/denied.txt 2>&1; echo "exit $?" >> /logs/agent/denied.txt'
    tasks_from: {harbor: `+ds+`}
`)
	exe := buildSteward(t)
	l := launchSet(t, path, func(o *Options) { o.Providers, o.Exe = egressFactory{exe: exe}, exe })
	runID := l.rep.RunIDs[0]
	rememberEgressImage(t, exe, l.stderr)
	if got := statuses(l.rep); got != "allow-file:p" {
		t.Fatalf("statuses %s\n%s\n%+v", got, l.stderr, l.rep.Attempts)
	}
	r := rowOf(t, l.rep, "allow-file")
	if r.InputTokens == 0 {
		t.Errorf("the gateway counted no tokens: %+v", r)
	}
	art := map[string]string{}
	if r.Details != nil {
		for _, a := range r.Details.Artifacts {
			art[a.Path] = a.Text
		}
	}
	if p := strings.TrimSpace(art["/logs/agent/proxy.txt"]); !strings.HasPrefix(p, "http://") || !strings.HasSuffix(p, ":3128") {
		t.Errorf("HTTP_PROXY %q", p)
	}
	if d := art["/logs/agent/denied.txt"]; !strings.Contains(d, "403") || strings.Contains(d, "exit 0") {
		t.Errorf("a host not on allowed_hosts: %q", d)
	}
	if out, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label=dev.steward.run="+runID).Output(); len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("networks left behind: %q", out)
	}
}
