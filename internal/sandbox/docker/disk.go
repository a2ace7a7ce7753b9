package docker

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	"github.com/steward-evals/steward/internal/sandbox"
)

// DefaultDisk bounds what a sandbox can write when its spec sets no disk.
const DefaultDisk = 1 << 30

// BinDir holds what Steward copies into a sandbox besides the workdir (the
// steward binary, a grader's scorer files); it is writable in every mode.
const BinDir = "/opt/steward"

// Disk quota modes. The engine's storage option (--storage-opt size=) bounds
// a container's writable layer on the drivers that support it (overlay2 on
// xfs with pquota, btrfs, zfs, devicemapper). Elsewhere (fuse-overlayfs,
// overlay2 on ext4) the root filesystem is made read-only and the paths a
// sandbox writes are size-limited tmpfs: the workdir and BinDir (as tmpfs
// volumes, which the archive API reaches) and /tmp, /var/tmp and /run.
// Nothing the sandbox writes reaches the host's disk; tmpfs pages count
// against the sandbox's memory limit.
const (
	diskUnknown int32 = iota
	diskStorageOpt
	diskTmpfs
	// diskNone (tests only) leaves the root writable and unbounded, as on an
	// engine whose storage option is not enforced, to test what holds then.
	diskNone
)

// tmpfsPaths are the writable scratch paths of a tmpfs-mode sandbox.
var tmpfsPaths = []string{"/tmp", "/var/tmp", "/run"}

// applyDisk sets hc up for a disk quota in the given mode and returns the
// paths the archive API may write to (nil: anywhere). writableRoot
// (sandbox.Spec.WritableRoot) keeps the tmpfs layout's bounded paths (the
// workdir, /tmp, /var/tmp, /run; not BinDir) but leaves the root
// writable: what is written elsewhere lands in the
// container's writable layer, on the daemon's disk, bounded by nothing but
// that disk (docs/harbor.md); the archive API then writes anywhere too.
func applyDisk(mode int32, hc *container.HostConfig, disk int64, workdir string, labels map[string]string, writableRoot bool) []string {
	size := strconv.FormatInt(disk, 10)
	if mode == diskStorageOpt {
		hc.StorageOpt = map[string]string{"size": size}
		return nil
	}
	hc.ReadonlyRootfs = !writableRoot
	hc.Tmpfs = map[string]string{}
	for _, p := range tmpfsPaths {
		if p != workdir {
			hc.Tmpfs[p] = "rw,exec,nosuid,nodev,mode=1777,size=" + size
		}
	}
	vol := func(target string) mount.Mount {
		return mount.Mount{Type: mount.TypeVolume, Target: target, VolumeOptions: &mount.VolumeOptions{
			Labels: labels,
			DriverConfig: &mount.Driver{Name: "local", Options: map[string]string{
				"type": "tmpfs", "device": "tmpfs", "o": "size=" + size,
			}},
		}}
	}
	hc.Mounts = append(hc.Mounts, vol(workdir))
	roots := []string{workdir}
	// A writable root holds BinDir itself: what Steward copies there (its
	// own binary, about 90 MB) does not eat a small task's disk.
	if !writableRoot && workdir != BinDir && !strings.HasPrefix(workdir, BinDir+"/") && !strings.HasPrefix(BinDir, workdir+"/") {
		hc.Mounts = append(hc.Mounts, vol(BinDir))
		roots = append(roots, BinDir)
	}
	return roots
}

// warnUnboundedRoots says, once per Prepare, that writable-root sandboxes
// (sandbox.Spec.WritableRoot) on a daemon without storage quotas write
// outside their bounded paths unbounded by disk.
func (p *Provider) warnUnboundedRoots(ctx context.Context, specs []*sandbox.Spec) {
	n := 0
	for _, s := range specs {
		if s.WritableRoot {
			n++
		}
	}
	if n == 0 {
		return
	}
	mode := atomic.LoadInt32(&p.diskMode)
	if mode == diskUnknown {
		mode = p.guessDiskMode(ctx)
	}
	if mode == diskTmpfs {
		fmt.Fprintf(p.log, "docker: warning: this daemon has no storage quotas: %d sandbox spec(s) with a writable root (Harbor samples) write outside their workdir, /tmp, /var/tmp and /run to the daemon's disk, unbounded by disk (docs/harbor.md#the-sandbox)\n", n)
	}
}

// guessDiskMode reads the storage driver: drivers that never take the
// storage option go straight to tmpfs mode; those that always do take it;
// overlay2 on xfs takes it only with pquota, which the first Create finds out.
func (p *Provider) guessDiskMode(ctx context.Context) int32 {
	info, err := p.cli.Info(ctx)
	if err != nil {
		return diskUnknown
	}
	switch info.Driver {
	case "btrfs", "zfs", "devicemapper", "windowsfilter":
		return diskStorageOpt
	case "overlay2":
		for _, kv := range info.DriverStatus {
			if kv[0] == "Backing Filesystem" && kv[1] == "xfs" {
				return diskUnknown
			}
		}
	}
	return diskTmpfs
}

// storageOptUnsupported tells the daemon's refusal of --storage-opt size=.
func storageOptUnsupported(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "storage-opt") || strings.Contains(m, "storage opt") || strings.Contains(m, "pquota") || strings.Contains(m, "not supported")
}

// createWithDisk creates the container, with the storage option where the
// engine takes it and the tmpfs layout elsewhere (learned once per provider).
func (p *Provider) createWithDisk(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, name string, disk int64, workdir string, labels map[string]string, writableRoot bool) (container.CreateResponse, []string, error) {
	mode := atomic.LoadInt32(&p.diskMode)
	if mode == diskNone {
		resp, err := p.cli.ContainerCreate(ctx, cfg, hc, nc, nil, name)
		return resp, nil, err
	}
	if mode == diskUnknown {
		mode = p.guessDiskMode(ctx)
		atomic.StoreInt32(&p.diskMode, mode)
	}
	if mode == diskUnknown || mode == diskStorageOpt {
		h := *hc
		applyDisk(diskStorageOpt, &h, disk, workdir, labels, writableRoot)
		resp, err := p.cli.ContainerCreate(ctx, cfg, &h, nc, nil, name)
		if err == nil {
			atomic.StoreInt32(&p.diskMode, diskStorageOpt)
			return resp, nil, nil
		}
		if !storageOptUnsupported(err) {
			return resp, nil, err
		}
		atomic.StoreInt32(&p.diskMode, diskTmpfs)
	}
	h := *hc
	roots := applyDisk(diskTmpfs, &h, disk, workdir, labels, writableRoot)
	resp, err := p.cli.ContainerCreate(ctx, cfg, &h, nc, nil, name)
	return resp, roots, err
}

// dfScript prints "path available-KiB size-KiB" for each argument.
const dfScript = `for p in "$@"; do df -P -k "$p" 2>/dev/null | while read -r fs size used avail rest; do case $size in *[!0-9]*|'') ;; *) echo "$p $avail $size";; esac; done; done`

// diskFull reports whether a quota'd path of the sandbox is (nearly) full:
// less than 64 KiB or 0.5% of its size left.
func (s *Sandbox) diskFull(ctx context.Context) bool {
	paths := s.roots
	if len(paths) == 0 {
		paths = []string{"/"}
	}
	if s.roots != nil {
		paths = append(append([]string(nil), paths...), tmpfsPaths...)
	}
	out, err := s.run(ctx, dfScript, append([]string{"sh"}, paths...)...)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		avail, err1 := strconv.ParseInt(f[1], 10, 64)
		size, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && size > 0 && (avail < 64 || avail*200 < size) {
			return true
		}
	}
	return false
}

// rootFor returns the writable root that holds full, for the archive API.
func (s *Sandbox) rootFor(full string) (string, error) {
	if s.roots == nil {
		return "/", nil
	}
	for _, r := range s.roots {
		if full == r || strings.HasPrefix(full, r+"/") {
			return r, nil
		}
	}
	if s.writableRoot {
		for _, t := range tmpfsPaths {
			if full == t || strings.HasPrefix(full, t+"/") {
				// A tmpfs mount lives in the container's mount namespace,
				// where the archive API does not write.
				return "", fmt.Errorf("%s is on a tmpfs mount the archive API cannot reach (%s)", full, t)
			}
		}
		return "/", nil
	}
	return "", fmt.Errorf("%s is on the sandbox's read-only root filesystem (writable: %s)", full, strings.Join(s.roots, ", "))
}

func relTo(root, full string) string {
	if root == "/" {
		return strings.TrimPrefix(full, "/")
	}
	return strings.TrimPrefix(strings.TrimPrefix(full, root), "/")
}

// seedWorkdir copies what the image holds at the workdir into sb's tmpfs
// workdir volume (Docker copies an image's files into an ordinary volume,
// not into one with tmpfs options). It reads them from a template: a
// container of the image, created and removed around the copy, never
// started. An image whose workdir is empty is remembered and costs nothing
// after its first sandbox.
func (p *Provider) seedWorkdir(ctx context.Context, image string, sb *Sandbox) error {
	key := image + "\x00" + sb.workdir
	p.tplMu.Lock()
	empty := p.emptyWorkdir[key]
	p.tplMu.Unlock()
	if empty {
		return nil
	}
	resp, err := p.cli.ContainerCreate(ctx, &container.Config{
		Image: image, Cmd: []string{"/bin/sh"}, Entrypoint: []string{}, Labels: p.labels(sb.spec.Task, "template", nil),
	}, &container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"}}, nil, nil, sb.name+"-template")
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("create a template container of %s: %w", image, err))
	}
	defer func() {
		cctx, cancel := cleanupCtx(ctx)
		_ = p.removeContainer(cctx, resp.ID)
		cancel()
	}()
	markEmpty := func() {
		p.tplMu.Lock()
		if p.emptyWorkdir == nil {
			p.emptyWorkdir = map[string]bool{}
		}
		p.emptyWorkdir[key] = true
		p.tplMu.Unlock()
	}
	rc, _, err := p.cli.CopyFromContainer(ctx, resp.ID, sb.workdir+"/.")
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			markEmpty() // the image has no such directory
			return nil
		}
		return sandbox.InfraError(fmt.Errorf("read the image's workdir %s: %w", sb.workdir, err))
	}
	defer rc.Close()
	// The archive starts with the directory's own header; a second block of
	// zeros right after it is the end: the directory is empty.
	br := bufio.NewReaderSize(rc, 64<<10)
	if head, _ := br.Peek(1024); len(head) < 1024 || allZero(head[512:]) {
		markEmpty()
		return nil
	}
	if err := p.cli.CopyToContainer(ctx, sb.id, sb.workdir, br, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy the image's workdir %s into sandbox %s (does it fit the disk quota?): %w", sb.workdir, sb.name, err)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
