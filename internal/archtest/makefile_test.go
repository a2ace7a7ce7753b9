package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// recipe returns the first `$(GO) build|run …` line of a Makefile target.
func recipe(t *testing.T, makefile, target string) string {
	t.Helper()
	lines := strings.Split(makefile, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, target+":") {
			continue
		}
		for _, r := range lines[i+1:] {
			if !strings.HasPrefix(r, "\t") {
				break
			}
			if strings.Contains(r, "$(GO) build") || strings.Contains(r, "$(GO) run") {
				return strings.TrimSpace(r)
			}
		}
	}
	t.Fatalf("no go build/run line under %s:", target)
	return ""
}

// compileFlags are a go build/run line's flags that enter every package's
// build cache key (-ldflags and -o only change the link).
func compileFlags(line string) []string {
	line = regexp.MustCompile(`-ldflags "[^"]*"`).ReplaceAllString(line, "")
	var out []string
	fields := strings.Fields(line)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "-o":
			i++
		case strings.HasPrefix(f, "-"):
			out = append(out, f)
		}
	}
	return out
}

// Issue 23 item 11: `make build` after the quickstart recompiled every
// package, because -trimpath (and only it: CGO_ENABLED changes a handful
// of cgo packages, -ldflags only the link) is part of each package's cache
// key. The developer build shares the cache with `go run`, `make
// quickstart` and `go test`; only the release builds trim paths.
func TestDeveloperBuildSharesTheQuickstartCache(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := string(b)
	build, quick := compileFlags(recipe(t, mk, "build")), compileFlags(recipe(t, mk, "quickstart"))
	if strings.Join(build, " ") != strings.Join(quick, " ") {
		t.Fatalf("make build compiles with %q, make quickstart with %q: every package is compiled twice", build, quick)
	}
	if !strings.Contains(recipe(t, mk, "release-dry-run"), "-trimpath") {
		t.Fatal("the release build lost -trimpath")
	}
}
