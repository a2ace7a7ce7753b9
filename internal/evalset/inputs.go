package evalset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// maxInputWalk bounds how many directory entries one inputs glob may visit.
const maxInputWalk = 200000

// checkGlob reports whether pattern is a valid inputs glob: slash-separated,
// relative, inside the eval set directory (no ".."), each segment a
// path.Match pattern or "**" (any number of directories).
func checkGlob(pattern string) error {
	if pattern == "" {
		return errors.New("empty glob")
	}
	if filepath.IsAbs(pattern) || strings.HasPrefix(pattern, "/") {
		return errors.New("must be relative to the eval set directory")
	}
	for _, seg := range strings.Split(filepath.ToSlash(pattern), "/") {
		if seg == ".." {
			return errors.New("must stay inside the eval set directory (no ..)")
		}
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return fmt.Errorf("** must be a whole path segment, as in dir/**/*.py")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad glob %q: %w", pattern, err)
		}
	}
	return nil
}

// matchGlob matches a slash-separated relative name against a checked pattern.
func matchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(p, n []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(n); i++ {
				if matchSegs(p[1:], n[i:]) {
					return true
				}
			}
			return false
		}
		if len(n) == 0 {
			return false
		}
		if ok, _ := path.Match(p[0], n[0]); !ok {
			return false
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}

// ExpandInputs expands inputs globs relative to dir into the regular files
// they match: slash-separated paths relative to dir, sorted, without
// duplicates. "**" matches any number of directories; .git and .steward
// (record) directories are skipped; symlinked directories are not followed.
func ExpandInputs(dir string, globs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		files, err := expandGlob(dir, g)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// InputFiles expands a task's inputs (see ExpandInputs).
func (es *EvalSet) InputFiles(t *Task) ([]string, error) {
	return ExpandInputs(es.Dir, t.Inputs)
}

func expandGlob(dir, g string) ([]string, error) {
	if err := checkGlob(g); err != nil {
		return nil, fmt.Errorf("expand inputs %q: %w", g, err)
	}
	pat := path.Clean(filepath.ToSlash(g))
	// Walk from the longest literal prefix of the pattern.
	segs := strings.Split(pat, "/")
	base := ""
	for len(segs) > 1 && !hasMeta(segs[0]) {
		base = path.Join(base, segs[0])
		segs = segs[1:]
	}
	root := filepath.Join(dir, filepath.FromSlash(base))
	var out []string
	visited := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		visited++
		if visited > maxInputWalk {
			return fmt.Errorf("more than %d files under %s", maxInputWalk, root)
		}
		if e.IsDir() {
			if (e.Name() == ".git" || e.Name() == DefaultRecordDir) && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !matchGlob(pat, rel) {
			return nil
		}
		if !e.Type().IsRegular() {
			// A symlink counts when it leads to a regular file.
			if st, err := filepath.EvalSymlinks(p); err != nil {
				return nil
			} else if fi, err := os.Stat(st); err != nil || !fi.Mode().IsRegular() {
				return nil
			}
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expand inputs %q: %w", g, err)
	}
	return out, nil
}

func hasMeta(s string) bool { return s == "**" || strings.ContainsAny(s, `*?[\`) }
