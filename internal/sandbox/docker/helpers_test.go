package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/docker/dockertest"
)

const testOwner = "internal/sandbox/docker tests"

var (
	builtMu  sync.Mutex
	builtRef []string
)

func TestMain(m *testing.M) {
	if os.Getenv("STEWARD_DOCKER_HELPER") != "" {
		os.Exit(helperMain())
	}
	code := m.Run()
	builtMu.Lock()
	refs := builtRef
	builtMu.Unlock()
	if len(refs) > 0 {
		if c, err := NewClient(); err == nil {
			removeBuiltImages(context.Background(), c, refs)
			c.Close()
		}
	}
	os.Exit(code)
}

// removeBuiltImages removes the images the tests built and tagged refs,
// and those that lost one of these tags to a concurrent build of the same
// directory (each test has a provider of its own, so two tests can build
// one context at once; the first build's image is left untagged, and a CI
// run found it left behind). Both carry the context's hash as a label.
func removeBuiltImages(ctx context.Context, c apiClient, refs []string) {
	want := map[string]bool{}
	for _, r := range refs {
		want[r] = true
	}
	is, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.steward.context-hash"))})
	if err == nil {
		for _, im := range is {
			if sum := im.Labels["dev.steward.context-hash"]; len(sum) >= 20 && want[BuildRef(sum)] {
				_, _ = c.ImageRemove(ctx, im.ID, image.RemoveOptions{PruneChildren: true})
			}
		}
	}
	for _, r := range refs {
		_, _ = c.ImageRemove(ctx, r, image.RemoveOptions{PruneChildren: true})
	}
}

func rememberImage(ref string) {
	builtMu.Lock()
	defer builtMu.Unlock()
	for _, r := range builtRef {
		if r == ref {
			return
		}
	}
	builtRef = append(builtRef, ref)
}

// testRun is one "run": a lock, a provider and cleanup of all it made.
type testRun struct {
	P    *Provider
	Lock *runlock.Lock
	ID   string
	Log  *strings.Builder
}

func newRun(t testing.TB, mod func(*Options)) *testRun {
	t.Helper()
	cli := dockertest.Client(t)
	lock, err := runlock.Acquire(filepath.Join(t.TempDir(), "run.lock"))
	if err != nil {
		t.Fatal(err)
	}
	id := "t" + randomID(5)
	log := &strings.Builder{}
	opts := Options{RunID: id, LockPath: lock.Path(), Log: &syncWriter{w: log}, Client: cli,
		Labels: map[string]string{"dev.steward.test": "true"}, Liveness: runlock.Liveness{}}
	if mod != nil {
		mod(&opts)
	}
	p, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRun{P: p, Lock: lock, ID: id, Log: log}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := p.Finalize(ctx); err != nil {
			t.Errorf("finalize: %v", err)
		}
		removeRun(t, cli, id)
		lock.Release()
	})
	return r
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// removeRun force-removes whatever carries run label id, and reports leftovers as failures.
func removeRun(t testing.TB, cli *client.Client, id string) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+id))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		_ = cli.NetworkRemove(ctx, n.ID)
	}
}

// countRun counts containers and networks carrying run label id.
func countRun(t testing.TB, cli *client.Client, id string) (containers, networks int) {
	t.Helper()
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelRun+"="+id))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(cs), len(ns)
}

var imageOnce sync.Once
var imageRef string
var imageErr error

// testImage builds the busybox test image once per test binary.
func testImage(t testing.TB) string {
	t.Helper()
	dockertest.Client(t)
	imageOnce.Do(func() {
		p, err := New(context.Background(), Options{RunID: "img" + randomID(3), Liveness: runlock.Liveness{}})
		if err != nil {
			imageErr = err
			return
		}
		spec := &sandbox.Spec{Task: "image", Build: dockertest.BusyboxContext(t, testOwner)}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		imageRef, imageErr = p.buildImage(ctx, spec.Build, "image", spec.BuildNetwork)
		if imageErr == nil {
			rememberImage(imageRef)
		}
	})
	if imageErr != nil {
		t.Fatalf("build test image: %v", imageErr)
	}
	return imageRef
}

func spec(t testing.TB, task string) sandbox.Spec {
	return sandbox.Spec{Task: task, Image: testImage(t), Memory: 128 << 20, CPUs: 0.5, PIDs: 128}
}

func mustCreate(t testing.TB, r *testRun, s sandbox.Spec) *Sandbox {
	t.Helper()
	ctx := context.Background()
	sb, err := r.P.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*Sandbox)
}

func mustExec(t testing.TB, sb sandbox.Sandbox, shell string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecSpec{Shell: shell, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	return res
}

func prepare(t testing.TB, r *testRun, specs ...*sandbox.Spec) {
	t.Helper()
	if err := r.P.Prepare(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
}

var _ = fmt.Sprint
