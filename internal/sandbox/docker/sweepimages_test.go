package docker

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Two runs building the same directory at once both tag BuildRef; the
// older image loses the tag and nothing could ever name or remove it (seen
// as a leftover after the leak test, whose two launches build one
// directory). The sweep removes such an image once its run is dead, and
// leaves alone one a container still uses, one of a live run (untagged for
// a moment between its build's commit and its tag) and every tagged image
// (the build cache).
func TestSweepRemovesUntaggedImagesOfDeadRuns(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	ctx := context.Background()
	cli := r.P.cli
	// The "dead" run lives while its images are built, as a real run does:
	// a sweep beside this test (another test's, or a launch's) must not
	// take an image between its build's commit and its tag. It dies (its
	// lock released) before this test's sweep.
	doomed, err := runlock.Acquire(filepath.Join(t.TempDir(), "doomed.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer doomed.Release()
	deadLabels := map[string]string{
		sandbox.LabelManaged: "true", sandbox.LabelRun: "dead-" + r.ID, labelRole: "image",
		LabelLock: doomed.Path(), LabelLockScope: r.P.scope, LabelOwner: runlock.Here().Encode(),
	}
	liveLabels := r.P.labels("sweep-images", "image", nil)
	n := 0
	buildAs := func(tag string, labels map[string]string) string {
		t.Helper()
		n++
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY f /f\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(r.ID+tag+strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
		tarball, err := tarContext(dir)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{Tags: []string{tag}, Labels: labels, Remove: true, ForceRemove: true, Version: build.BuilderV1})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var msg struct{ Error string }
		for _, line := range strings.Split(string(out), "\n") {
			if json.Unmarshal([]byte(line), &msg) == nil && msg.Error != "" {
				t.Fatalf("build %s: %s", tag, msg.Error)
			}
		}
		ins, err := cli.ImageInspect(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = cli.ImageRemove(context.Background(), ins.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		})
		return ins.ID
	}
	tag := func(name string) string { return BuildTagPrefix + "sweep-" + name + "-" + strings.ToLower(r.ID) }

	lost := buildAs(tag("lost"), deadLabels) // its tag moves to the next build
	cache := buildAs(tag("lost"), deadLabels)
	used := buildAs(tag("used"), deadLabels)
	// Not Steward's container (it would inherit the image's labels, and the
	// sweep would remove it as the dead run's first).
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: used, Cmd: []string{"/f"}, Labels: map[string]string{sandbox.LabelManaged: "false", "dev.steward.test": "true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	buildAs(tag("used"), deadLabels)
	live := buildAs(tag("live"), liveLabels)
	buildAs(tag("live"), liveLabels)

	if err := doomed.Release(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := r.P.Sweep(ctx, &log)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, log.String())
	}
	exists := func(id string) bool { _, err := cli.ImageInspect(ctx, id); return err == nil }
	// (Another test's sweep, running beside this one, may be the one that
	// removed it.)
	if exists(lost) {
		t.Errorf("the dead run's untagged image is still there (removed %d):\n%s", res.Images, log.String())
	}
	if !exists(cache) {
		t.Error("the sweep removed a tagged image: the build cache")
	}
	if !exists(used) {
		t.Error("the sweep removed an image a container uses")
	}
	if !exists(live) {
		t.Error("the sweep removed a live run's image")
	}
}
