package evalset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path -> content) under a new temporary directory.
// A content starting with "symlink:" makes a symlink to the rest.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "symlink:"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if strings.HasSuffix(name, "/") {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// problems loads dir/steward.yaml and returns each problem as its formatted
// line with dir stripped ("steward.yaml:3: tasks[0].name: …").
func problems(t testing.TB, dir string, opts LoadOptions) []string {
	t.Helper()
	_, err := Load(filepath.Join(dir, "steward.yaml"), opts)
	if err == nil {
		return nil
	}
	var es *Errors
	if !errors.As(err, &es) {
		t.Fatalf("Load returned %T, want *Errors: %v", err, err)
	}
	var out []string
	for _, e := range es.List {
		out = append(out, strings.ReplaceAll(e.Error(), dir+string(filepath.Separator), ""))
	}
	return out
}

func mustLoad(t testing.TB, dir string, opts LoadOptions) *EvalSet {
	t.Helper()
	es, err := Load(filepath.Join(dir, "steward.yaml"), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return es
}
