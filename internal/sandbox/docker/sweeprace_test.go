package docker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/steward-evals/steward/internal/sandbox"
)

// raceClient is a daemon on which another sweeper is removing a dead run's
// container (and so still holds its volume) when this sweeper gets to it.
type raceClient struct {
	apiClient
	labels      map[string]string
	volumeTries int
}

func (c *raceClient) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return []container.Summary{{ID: "c0ffee0000000000", Names: []string{"/box"}, Labels: c.labels}}, nil
}

func (c *raceClient) ContainerRemove(context.Context, string, container.RemoveOptions) error {
	return fmt.Errorf("%w: removal of container c0ffee is already in progress", cerrdefs.ErrConflict)
}

func (c *raceClient) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return nil, nil
}

func (c *raceClient) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{Volumes: []*volume.Volume{{Name: "vol0", Labels: c.labels}}}, nil
}

func (c *raceClient) ImageList(context.Context, image.ListOptions) ([]image.Summary, error) {
	return nil, nil
}

func (c *raceClient) VolumeRemove(context.Context, string, bool) error {
	c.volumeTries++
	if c.volumeTries == 1 { // the other sweeper's container removal has not finished yet
		return fmt.Errorf("%w: remove vol0: volume is in use - [c0ffee0000000000]", cerrdefs.ErrConflict)
	}
	return nil
}

type deadJudge struct{}

func (deadJudge) Owner() string                      { return "" }
func (deadJudge) Judge(string, string) (bool, error) { return true, nil }

// Two sweepers meeting the same dead run (a launch and `steward sweep`, or
// two launches) must both succeed: a volume still held by the container the
// other sweeper is removing is removed once that removal ends, not reported
// as a failure (seen as `steward sweep` exit 3 when test packages ran side by side).
func TestSweepWaitsForAConcurrentSweepersRemoval(t *testing.T) {
	c := &raceClient{labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelRun: "dead1", LabelLock: "/x/dead1.lock"}}
	var log strings.Builder
	res, err := sweep(context.Background(), c, "host:here", deadJudge{}, &log, true)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, log.String())
	}
	if res.Containers != 1 || res.Volumes != 1 || c.volumeTries != 2 {
		t.Fatalf("sweep result %+v after %d volume removals", res, c.volumeTries)
	}
}

// imageRaceClient lists a dead run's untagged image that another sweeper
// removes first: the daemon's answer is the one engine 20.10 gave in CI.
type imageRaceClient struct {
	raceClient
}

func (c *imageRaceClient) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return nil, nil
}

func (c *imageRaceClient) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{}, nil
}

func (c *imageRaceClient) ImageList(context.Context, image.ListOptions) ([]image.Summary, error) {
	return []image.Summary{{ID: "sha256:c10fa9b668eff9639dbbcf68be86883487", RepoTags: []string{"<none>:<none>"}, Labels: c.labels}}, nil
}

func (c *imageRaceClient) ImageRemove(context.Context, string, image.RemoveOptions) ([]image.DeleteResponse, error) {
	return nil, fmt.Errorf("Error response from daemon: unrecognized image ID sha256:c10fa9b668eff9639dbbcf68be86883487")
}

// Two sweepers meeting the same untagged image: the one that finds it gone
// succeeds (seen as a sweep error when test packages ran side by side).
func TestSweepImageRemovedByAnotherSweeper(t *testing.T) {
	c := &imageRaceClient{raceClient{labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelRun: "dead1", LabelLock: "/x/dead1.lock", labelRole: "image"}}}
	var log strings.Builder
	res, err := sweep(context.Background(), c, "host:here", deadJudge{}, &log, true)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, log.String())
	}
	if res.Images != 0 {
		t.Fatalf("counted %d images removed, want none (the other sweeper removed it)", res.Images)
	}
}
