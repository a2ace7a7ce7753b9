package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/steward-evals/steward/internal/sandbox"
)

// confineLinks copies the tar stream of an agent's workdir (entries relative
// to workdir, as CopyFromContainer writes them) from r to w, keeping a
// symbolic link only when it resolves inside workdir: through the archive's
// own links, never above workdir on the way, and an absolute target only
// under workdir. A link out of it (/proc/self/environ, the scorer's files
// at ScorerDir, "c -> ." then "c/../opt/…") would let the agent's files read
// the grader's secrets when the scorer opens them; such links are dropped
// and their names returned, with FIFOs and devices. Links are written after every other entry (a
// link may point at an entry that comes later). A hard link to an entry
// that was dropped is dropped with it (a hard link to a FIFO would make the
// grader's extraction fail: issue 23 item 2).
//
// limit bounds the workdir's logical size (the sum of its files' sizes,
// sparse files counted in full: what the archive would stream); a workdir
// over it ends the copy at once with an error marked
// sandbox.ErrAgentWorkdir: the agent's outcome, not the infrastructure's
// (issue 23 item 3). 0 = no bound.
func confineLinks(r io.Reader, w io.Writer, workdir string, limit int64) (dropped []string, err error) {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	links := map[string]string{} // name (clean, relative to workdir) -> target
	gone := map[string]bool{}    // entries not written (hard links to them go too)
	var linkHdrs, hardToLinks []*tar.Header
	held := 0
	var size int64
	goneBytes, goneFull := 0, false
	// drop leaves name out and remembers it, up to maxLinkBytes of names:
	// past that (an agent's millions of FIFOs), every hard link to anything
	// but a held symlink is dropped too, so none can name a missing entry.
	drop := func(name string) {
		if len(dropped) < maxDroppedNames {
			dropped = append(dropped, name)
		}
		if goneBytes += len(name) + 64; goneBytes > maxLinkBytes {
			goneFull = true
			return
		}
		gone[name] = true
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the workdir's archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		switch {
		case h.Typeflag == tar.TypeSymlink:
			// Links are held until the end: at most maxLinkBytes of them (an
			// agent can make millions of links in a few bytes of quota each).
			held += len(name) + len(h.Linkname) + 256
			if held > maxLinkBytes {
				drop(name)
				continue
			}
			links[name] = h.Linkname
			linkHdrs = append(linkHdrs, h)
			continue
		case h.Typeflag == tar.TypeFifo || h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock:
			// A FIFO would hang a scorer that reads it (an error instead of
			// a failure); a device is never evidence.
			drop(name)
			continue
		case h.Typeflag == tar.TypeLink:
			target := path.Clean(strings.TrimPrefix(h.Linkname, "./"))
			_, isLink := links[target]
			if gone[target] || (goneFull && !isLink) {
				drop(name)
				continue
			}
			if _, ok := links[target]; ok {
				if held += len(name) + len(h.Linkname) + 256; held <= maxLinkBytes {
					hardToLinks = append(hardToLinks, h)
				}
				continue
			}
		}
		if size += max(h.Size, 0); limit > 0 && size > limit {
			return dropped, sandbox.AgentWorkdirError(fmt.Errorf("the workdir's files add up to more than the sandbox's disk quota of %s (at %s, %s; sparse files count at their full size): not handed to the scorer", sizeOf(limit), name, sizeOf(h.Size)))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write the workdir's archive: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, fmt.Errorf("copy the workdir's archive: %w", err)
		}
	}
	root := splitPath(workdir)
	for _, h := range linkHdrs {
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if !linkInside(links, root, name) {
			gone[name] = true
			if len(dropped) < maxDroppedNames {
				dropped = append(dropped, name)
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write the workdir's archive: %w", err)
		}
	}
	for _, h := range hardToLinks {
		if gone[path.Clean(strings.TrimPrefix(h.Linkname, "./"))] {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write the workdir's archive: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write the workdir's archive: %w", err)
	}
	return dropped, nil
}

// sizeOf shows a byte count in the largest binary unit that keeps it whole-ish.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// The links confineLinks holds (names and targets), and the dropped names
// it reports, are bounded.
const (
	maxLinkBytes    = 16 << 20
	maxDroppedNames = 1000
)

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// linkInside resolves the link name (relative to the workdir root, an
// absolute path split in components) through links and reports whether
// every step stays inside root, or the link ends at a system path
// (sandbox.SystemLinkTarget) with nothing resolved after it.
func linkInside(links map[string]string, root []string, name string) bool {
	hops := 0
	// resolve walks target from dir (components relative to root); system
	// is true when it ended at a system path outside root.
	var resolve func(dir []string, target string) (cur []string, system, ok bool)
	resolve = func(dir []string, target string) ([]string, bool, bool) {
		hops++
		if hops > 40 { // a loop, or too deep to judge: refuse
			return nil, false, false
		}
		cur := append([]string(nil), dir...)
		comps := strings.Split(target, "/")
		if strings.HasPrefix(target, "/") {
			abs := splitPath(target)
			// Only the workdir's own components, verbatim (no "..", no detour).
			inside := len(abs) >= len(root)
			for i := 0; inside && i < len(root); i++ {
				inside = abs[i] == root[i]
			}
			if !inside {
				return nil, true, sandbox.SystemLinkTarget(target)
			}
			cur, comps = nil, abs[len(root):]
		}
		for i, c := range comps {
			switch c {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, false, false
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, c)
			if t, ok := links[strings.Join(cur, "/")]; ok {
				next, system, ok := resolve(cur[:len(cur)-1], t)
				if !ok {
					return nil, false, false
				}
				if system {
					// A system path may only end the walk.
					for _, rest := range comps[i+1:] {
						if rest != "" && rest != "." {
							return nil, false, false
						}
					}
					return nil, true, true
				}
				cur = next
			}
		}
		return cur, false, true
	}
	_, _, ok := resolve(splitPath(path.Dir(name)), links[name])
	return ok
}
