package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"

	"github.com/steward-evals/steward/internal/sandbox"
)

// BuildTagPrefix names images built from build: directories, tagged by content hash.
const BuildTagPrefix = "steward-build:"

// BuildRef is the tag of the image built from a directory whose context
// hash (ContextHash) is sum.
func BuildRef(sum string) string { return BuildTagPrefix + sum[:20] }

type buildOnce struct {
	done chan struct{}
	ref  string
	err  error
}

// ContextHash is the content hash of a build directory: every file's relative
// path, mode and bytes (symlinks by target), in a stable order.
func ContextHash(dir string) (string, error) {
	h := sha256.New()
	err := walkContext(dir, func(rel string, info fs.FileInfo, full string) error {
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(full)
			if err != nil {
				return err
			}
			io.WriteString(h, t)
		case info.Mode().IsRegular():
			f, err := os.Open(full)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash build context %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func walkContext(dir string, fn func(rel string, info fs.FileInfo, full string) error) error {
	var rels []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rels = append(rels, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(rels)
	for _, rel := range rels {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Lstat(full)
		if err != nil {
			return err
		}
		if err := fn(rel, info, full); err != nil {
			return err
		}
	}
	return nil
}

func tarContext(dir string) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := walkContext(dir, func(rel string, info fs.FileInfo, full string) error {
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(full)
			if err != nil {
				return err
			}
			link = t
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = rel
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(full)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &buf, tw.Close()
}

// Build networks (sandbox.Spec.BuildNetwork).
const (
	BuildNetworkNone    = "none"    // RUN steps reach no network (default)
	BuildNetworkDefault = "default" // Docker's default build network: the outside world
)

// buildImage builds dir once per run and once per content hash across runs.
// Its RUN steps reach no network unless network is BuildNetworkDefault.
func (p *Provider) buildImage(ctx context.Context, dir, task, network string) (string, error) {
	return p.buildImageFile(ctx, dir, "", task, network)
}

// BuildSum is the content hash an image built from dir with dockerfile
// (relative to dir; "" = Dockerfile) is tagged by (BuildRef): the context's
// hash, with the Dockerfile's name when it is not the default.
func BuildSum(dir, dockerfile string) (string, error) {
	sum, err := ContextHash(dir)
	if err != nil || dockerfile == "" || dockerfile == "Dockerfile" {
		return sum, err
	}
	h := sha256.Sum256([]byte(sum + "\x00dockerfile=" + dockerfile))
	return hex.EncodeToString(h[:]), nil
}

// buildImageFile is buildImage with a Dockerfile of another name (relative to dir).
func (p *Provider) buildImageFile(ctx context.Context, dir, dockerfile, task, network string) (string, error) {
	df := dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(df))); err != nil {
		return "", fmt.Errorf("build image from %s: no %s: %w", dir, df, err)
	}
	sum, err := BuildSum(dir, dockerfile)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	b, ok := p.builds[sum]
	if !ok {
		b = &buildOnce{done: make(chan struct{})}
		p.builds[sum] = b
	}
	p.mu.Unlock()
	if ok {
		select {
		case <-b.done:
			return b.ref, b.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	b.ref, b.err = p.doBuild(ctx, dir, dockerfile, sum, task, network)
	if b.err != nil {
		p.mu.Lock()
		delete(p.builds, sum) // let a later call try again
		p.mu.Unlock()
	}
	close(b.done)
	return b.ref, b.err
}

func (p *Provider) doBuild(ctx context.Context, dir, dockerfile, sum, task, network string) (string, error) {
	netMode := "none"
	switch network {
	case "", BuildNetworkNone:
	case BuildNetworkDefault:
		netMode = "default"
	default:
		return "", fmt.Errorf("build image from %s: unknown build_network %q (want none or default)", dir, network)
	}
	ref := BuildRef(sum)
	if _, err := p.cli.ImageInspect(ctx, ref); err == nil {
		fmt.Fprintf(p.log, "docker: image %s for %s is up to date\n", ref, dir)
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", sandbox.InfraError(fmt.Errorf("inspect image %s: %w", ref, err))
	}
	fmt.Fprintf(p.log, "docker: building %s from %s\n", ref, dir)
	tarball, err := tarContext(dir)
	if err != nil {
		return "", fmt.Errorf("build image from %s: %w", dir, err)
	}
	labels := p.labels(task, "image", nil)
	labels["dev.steward.context-hash"] = sum
	resp, err := p.cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Labels:      labels,
		Version:     build.BuilderV1,
		// No network for RUN steps unless the task asks (build_network:
		// default), and nothing beyond Docker's default build privileges.
		NetworkMode: netMode,
		Dockerfile:  dockerfile,
	})
	if err != nil {
		return "", sandbox.InfraError(fmt.Errorf("build image from %s: %w", dir, err))
	}
	defer resp.Body.Close()
	var tail []string
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", sandbox.InfraError(fmt.Errorf("build image from %s: read build output: %w", dir, err))
		}
		if msg.Stream != "" {
			tail = append(tail, strings.TrimRight(msg.Stream, "\n"))
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if msg.Error != "" {
			return "", fmt.Errorf("build image from %s: %s\n%s", dir, msg.Error, strings.Join(tail, "\n"))
		}
	}
	if _, err := p.cli.ImageInspect(ctx, ref); err != nil {
		return "", fmt.Errorf("build image from %s: image %s missing after build:\n%s", dir, ref, strings.Join(tail, "\n"))
	}
	return ref, nil
}
