package sandbox

import (
	"archive/tar"
	"fmt"
	"io"
)

// MaxCopyOut bounds what a provider's CopyOut reads from one file.
const MaxCopyOut = 64 << 20

// ReadTarFile returns the first regular file of the tar stream r, which a
// provider's CopyOut of the sandbox path full produced (docker's archive
// API, tar over exec in a pod). A file larger than MaxCopyOut is refused;
// truncated says that r was already cut at the provider's own cap, so a
// broken archive is the size, not the sandbox's fault. A broken stream is an
// infra error.
func ReadTarFile(r io.Reader, full string, truncated bool) ([]byte, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("copy %s out of sandbox: empty archive", full)
		}
		if err != nil {
			if truncated {
				return nil, fmt.Errorf("copy %s out of sandbox: more than the %d-byte limit", full, MaxCopyOut)
			}
			return nil, InfraError(fmt.Errorf("copy %s out of sandbox: %w", full, err))
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > MaxCopyOut {
			return nil, fmt.Errorf("copy %s out of sandbox: %d bytes is more than the %d limit", full, h.Size, MaxCopyOut)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, InfraError(fmt.Errorf("copy %s out of sandbox: %w", full, err))
		}
		return data, nil
	}
}
