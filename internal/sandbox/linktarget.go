package sandbox

import (
	"path"
	"strings"
)

// SystemLinkTarget reports whether an absolute link target lies in the
// system's program and library directories (/usr, /bin, /sbin, /lib…),
// spelled plainly (no "." or ".." segments): a Python venv's
// bin/python -> /usr/local/bin/python3. Nothing there is the scorer's
// (its files, its environment in /proc, the targets) for a link to read.
func SystemLinkTarget(target string) bool {
	if !strings.HasPrefix(target, "/") || path.Clean(target) != target {
		return false
	}
	for _, p := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}
