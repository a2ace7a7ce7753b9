package docker

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// Two tests' providers building one directory at once leave the first
// image untagged (the tag moves to the second). TestMain's clean-up must
// remove both: removing by tag alone left the untagged one, and CI's
// leftovers check failed on it.
func TestRemoveBuiltImagesTakesOneThatLostItsTag(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY f /f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(r.ID), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := BuildSum(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.P.doBuild(ctx, dir, "", sum, "lost-tag", BuildNetworkNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeBuiltImages(context.Background(), r.P.cli, []string{ref}) })
	first, err := r.P.cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// The concurrent build: another provider's build of the same directory,
	// begun before the first was tagged (doBuild would find the tag now and
	// build nothing, so the daemon is asked as that build asked it).
	other := newRun(t, nil)
	labels := other.P.labels("lost-tag", "image", nil)
	labels["dev.steward.context-hash"] = sum
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY f /f\nLABEL second=1\n"), 0o644); err != nil {
		t.Fatal(err) // a new image, not the first's layers again
	}
	tarball, err := tarContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := other.P.cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{Tags: []string{ref}, Labels: labels, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if second, err := other.P.cli.ImageInspect(ctx, ref); err != nil || second.ID == first.ID {
		t.Fatalf("the second build did not take the tag: %v", err)
	}
	byHash := filters.NewArgs(filters.Arg("label", "dev.steward.context-hash="+sum))
	is, err := r.P.cli.ImageList(ctx, image.ListOptions{Filters: byHash})
	if err != nil {
		t.Fatal(err)
	}
	if len(is) != 2 {
		t.Fatalf("want the untagged first build and the tagged second, got %d images", len(is))
	}
	removeBuiltImages(ctx, r.P.cli, []string{ref})
	left, err := r.P.cli.ImageList(ctx, image.ListOptions{Filters: byHash})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("left %d images built from the directory (the first was %s)", len(left), shortID(first.ID))
	}
}
