package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/steward-evals/steward/internal/sandbox"
)

// ImageID returns the ID (sha256:…) of the image ref names on the daemon
// now, for the fingerprint: a tag moved to another image must not carry the
// old image's results. An image the daemon does not have is "" (no error):
// Prepare says it is missing.
func (p *Provider) ImageID(ctx context.Context, ref string) (string, error) {
	img, err := p.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", sandbox.InfraError(fmt.Errorf("inspect image %s: %w", ref, err))
	}
	return img.ID, nil
}
