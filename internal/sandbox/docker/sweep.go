package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/steward-evals/steward/internal/sandbox"
)

// SweepResult counts what Sweep removed and kept.
type SweepResult struct {
	Containers, Networks, Volumes int // removed
	Images                        int // untagged built images removed
	Kept                          int // resources of live runs, untouched
	Runs                          []string
	// Unproven are the runs left alone because nothing proves them dead,
	// each with the reason ("run 2024…: it runs in container …").
	Unproven []string
}

// Sweep removes every Steward-labelled container, network and volume whose
// run is dead (D4); a live run's resources are never touched. A run is dead
// when its lock file is not held. Lock paths are judged only where they mean
// something: in this process's own scope; a run that lived in another
// container is dead when that container no longer runs, and is otherwise left
// to its own sweeper; a run of another host scope is left alone. Resources
// without a lock label are left alone too (nothing proves them dead).
func (p *Provider) Sweep(ctx context.Context, w io.Writer) (SweepResult, error) {
	return sweep(ctx, p.cli, p.scope, p.live, w, true)
}

// deadRun decides whether the run that labelled a resource is dead, as seen
// from scope and identity here. A run that cannot be proven dead is alive;
// the error says why it could not be judged.
func deadRun(ctx context.Context, cli apiClient, scope string, live Liveness, labels map[string]string) (bool, error) {
	lock, ok := labels[LabelLock]
	if !ok || lock == "" {
		return false, fmt.Errorf("%w: its resources name no lock", ErrUnproven)
	}
	other, hasScope := labels[LabelLockScope]
	if id, ok := strings.CutPrefix(other, "container:"); ok && other != scope {
		ins, err := cli.ContainerInspect(ctx, id)
		if cerrdefs.IsNotFound(err) {
			return true, nil
		}
		if err == nil && ins.State != nil && !ins.State.Running && !ins.State.Restarting {
			return true, nil
		}
		return false, nil // its container runs: it is its own sweeper's
	}
	if hasScope && other != scope {
		return false, fmt.Errorf("%w: it ran on %s, this is %s", ErrUnproven, other, scope)
	}
	return live.Judge(lock, labels[LabelOwner])
}

// sweep removes what dead runs left; with images, also their built images
// that lost their tag (sweepUntaggedImages).
func sweep(ctx context.Context, cli apiClient, scope string, live Liveness, w io.Writer, images bool) (SweepResult, error) {
	if w == nil {
		w = io.Discard
	}
	var res SweepResult
	var errs []error
	f := filters.NewArgs(filters.Arg("label", sandbox.LabelManaged+"=true"))
	said := map[string]bool{}
	dead := func(labels map[string]string) bool {
		d, err := deadRun(ctx, cli, scope, live, labels)
		if err != nil {
			r := labels[sandbox.LabelRun]
			if !said[r] {
				said[r] = true
				res.Unproven = append(res.Unproven, fmt.Sprintf("run %s: %v", r, err))
				fmt.Fprintf(w, "sweep: left docker resources of run %s alone: %v\n", r, err)
			}
			return false
		}
		return d
	}
	seen := map[string]bool{}
	note := func(labels map[string]string) {
		r := labels[sandbox.LabelRun]
		if !seen[r] {
			seen[r] = true
			res.Runs = append(res.Runs, r)
		}
	}
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return res, sandbox.InfraError(fmt.Errorf("sweep: list containers: %w", err))
	}
	for _, c := range cs {
		if !dead(c.Labels) {
			res.Kept++
			continue
		}
		note(c.Labels)
		// Several sweepers may meet the same dead run (a launch and `steward
		// sweep` at once): a removal already in progress is one that succeeds.
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
			continue
		}
		res.Containers++
		fmt.Fprintf(w, "sweep: removed container %s of dead run %s\n", trimName(c.Names), c.Labels[sandbox.LabelRun])
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return res, sandbox.InfraError(fmt.Errorf("sweep: list networks: %w", err))
	}
	for _, n := range ns {
		if !dead(n.Labels) {
			res.Kept++
			continue
		}
		note(n.Labels)
		ins, err := cli.NetworkInspect(ctx, n.ID, network.InspectOptions{})
		if err == nil {
			for cid := range ins.Containers {
				// Anything still attached belongs to the dead run (or was
				// connected by it, e.g. Steward's own container): detach it.
				_ = cli.NetworkDisconnect(ctx, n.ID, cid, true)
			}
		}
		var err2 error
		for try := 0; try < 5; try++ {
			// Another sweeper may still be removing the network's containers.
			if err2 = cli.NetworkRemove(ctx, n.ID); err2 == nil || cerrdefs.IsNotFound(err2) {
				err2 = nil
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
			}
		}
		if err2 != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err2))
			continue
		}
		res.Networks++
		fmt.Fprintf(w, "sweep: removed network %s of dead run %s\n", n.Name, n.Labels[sandbox.LabelRun])
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return res, sandbox.InfraError(fmt.Errorf("sweep: list volumes: %w", err))
	}
	for _, v := range vs.Volumes {
		if !dead(v.Labels) {
			res.Kept++
			continue
		}
		note(v.Labels)
		var err2 error
		for try := 0; try < 5; try++ {
			// Another sweeper may still be removing the container that holds
			// it (its removal "already in progress" counted as done above).
			if err2 = cli.VolumeRemove(ctx, v.Name, true); err2 == nil || cerrdefs.IsNotFound(err2) {
				err2 = nil
				break
			}
			if !cerrdefs.IsConflict(err2) && !strings.Contains(err2.Error(), "in use") {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(try+1) * 200 * time.Millisecond):
			}
		}
		if err2 != nil {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err2))
			continue
		}
		res.Volumes++
	}
	if images {
		n, err := sweepUntaggedImages(ctx, cli, dead, w)
		res.Images = n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}

// sweepUntaggedImages removes the built images of dead runs that no tag
// names any more. A build's tag (BuildRef) moves to the newest build of the
// same directory, so two runs that built it at once leave the older image
// untagged: no run can name it again, and it would stay for good. Tagged
// images are the build cache and stay. A live run's image is never touched
// (it is untagged for a moment between its build's commit and its tag), and
// one a container still uses is kept (the daemon refuses; not an error).
func sweepUntaggedImages(ctx context.Context, cli apiClient, dead func(map[string]string) bool, w io.Writer) (int, error) {
	is, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", sandbox.LabelManaged+"=true"), filters.Arg("label", labelRole+"=image"), filters.Arg("dangling", "true"))})
	if err != nil {
		return 0, sandbox.InfraError(fmt.Errorf("list images: %w", err))
	}
	n := 0
	var errs []error
	for _, im := range is {
		if tagged(im.RepoTags) || !dead(im.Labels) {
			continue // tagged after all, or its run lives (or cannot be judged)
		}
		if _, err := cli.ImageRemove(ctx, im.ID, image.RemoveOptions{PruneChildren: true}); err != nil {
			if !cerrdefs.IsConflict(err) && !imageGone(err) {
				errs = append(errs, fmt.Errorf("remove image %s: %w", shortID(im.ID), err))
			}
			continue
		}
		n++
		fmt.Fprintf(w, "sweep: removed untagged image %s (built by run %s)\n", shortID(im.ID), im.Labels[sandbox.LabelRun])
	}
	return n, errors.Join(errs...)
}

// imageGone says whether a removal failed because the image is gone
// already: another sweeper (a launch's, `steward sweep`) removed it first.
// Engines before 23 say so without a not-found status ("unrecognized image
// ID", from a removal racing another).
func imageGone(err error) bool {
	msg := err.Error()
	return cerrdefs.IsNotFound(err) || strings.Contains(msg, "No such image") || strings.Contains(msg, "unrecognized image ID")
}

// tagged says whether an image has a tag (the API lists an untagged one as
// "<none>:<none>" on older engines).
func tagged(tags []string) bool {
	for _, t := range tags {
		if t != "<none>:<none>" {
			return true
		}
	}
	return false
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func trimName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	n := names[0]
	if len(n) > 0 && n[0] == '/' {
		n = n[1:]
	}
	return n
}

// apiClient is the part of the Docker client Sweep uses.
type apiClient interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerRemove(ctx context.Context, id string, options container.RemoveOptions) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkInspect(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, error)
	NetworkDisconnect(ctx context.Context, id, container string, force bool) error
	NetworkRemove(ctx context.Context, id string) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, id string, force bool) error
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageRemove(ctx context.Context, id string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}
