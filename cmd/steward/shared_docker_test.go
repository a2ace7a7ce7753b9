package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/sandbox"
	sbdocker "github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

// A 2-task Docker run (two worker processes, W1) makes one gateway network
// and builds its one build: directory once: the supervisor prepares them
// and the workers adopt them. Nothing is left afterwards: no network of the
// run, no dangling image. (Each worker used to make its own network and
// build the directory itself.)
func TestDockerRunSharesOneNetworkAndOneBuild(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	ctx := context.Background()
	img := builtBusybox(t, fmt.Sprintf("cmd-steward-shared-%d", time.Now().UnixNano()))
	sum, err := sbdocker.ContextHash(img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
tasks:
  - name: one
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}]
  - name: two
    sandbox: {provider: docker, build: `+img+`, memory: 64m}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: c, input: "", target: ok}, {id: d, input: "", target: ok}]
`)
	out, code := steward(t, dir, "launch", "--max-concurrency", "4")
	if code != 0 || !strings.Contains(out, "4 passed") {
		t.Fatalf("launch exit %d:\n%s", code, out)
	}
	if n := strings.Count(out, "docker: created network"); n != 1 {
		t.Fatalf("the run created %d networks, want 1:\n%s", n, out)
	}
	builds := strings.Count(out, "docker: building ") + strings.Count(out, "is up to date")
	if builds != 1 {
		t.Fatalf("the run prepared its one build: directory %d times, want 1:\n%s", builds, out)
	}
	m := regexp.MustCompile(`created network (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no network name in:\n%s", out)
	}
	runID := strings.Split(strings.TrimPrefix(m[1], "steward-"), "-gw-")[0]
	nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+runID))})
	if err != nil || len(nets) != 0 {
		t.Fatalf("%d networks of run %s left after the run (%v)", len(nets), runID, err)
	}
	dangling, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("dangling", "true"),
		filters.Arg("label", "dev.steward.context-hash="+sum))})
	if err != nil || len(dangling) != 0 {
		t.Fatalf("%d dangling images of the build left (%v)", len(dangling), err)
	}
}
