package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
)

// An agent's workdir reaches the grader without the links that lead out of
// it, however they are spelled; links inside it (node_modules/.bin style)
// and regular files arrive as they were.
func TestConfineLinks(t *testing.T) {
	t.Parallel()
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "./out/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "./out/result", Typeflag: tar.TypeReg, Mode: 0o644}, "42\n")
	keep := map[string]string{
		"bin/r":           "../out/result",
		"abs":             "/work/out/result",
		"dot":             ".",
		"viadot":          "dot/out/result",
		"chain":           "bin/r",
		"dangle":          "missing/file",
		"out/up":          "..",
		"out/upr":         "../out/result",
		"venv/bin/python": "/usr/local/bin/python3",
		"venv/lib64":      "/usr/lib64",
		"py":              "venv/bin/python",
	}
	drop := map[string]string{
		"environ":    "/proc/self/environ",
		"reference":  "/opt/steward/scorer/expected",
		"escape":     "../opt/steward/scorer/expected",
		"detour":     "dot/../opt/steward/scorer/expected",
		"viaup":      "out/up/../etc/passwd",
		"absdetour":  "/work/../opt/x",
		"prefix":     "/workdir/x",
		"loop1":      "loop2",
		"loop2":      "loop1",
		"tochain":    "environ",
		"usrdotdot":  "/usr/../proc/self/environ",
		"throughsys": "venv/lib64/../../proc/self/environ",
		"devfd":      "/dev/fd/../environ",
		"etc":        "/etc/mtab",
	}
	for name, target := range keep {
		add(&tar.Header{Name: "./" + name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, "")
	}
	for name, target := range drop {
		add(&tar.Header{Name: "./" + name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, "")
	}
	add(&tar.Header{Name: "./hard", Typeflag: tar.TypeLink, Linkname: "./environ"}, "")
	add(&tar.Header{Name: "./fifo", Typeflag: tar.TypeFifo, Mode: 0o644}, "")

	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	dropped, err := confineLinks(&in, &out, "/work", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = h.Linkname + string(b)
	}
	for name, target := range keep {
		if got["./"+name] != target {
			t.Errorf("link %s -> %s: got %q, want kept", name, target, got["./"+name])
		}
	}
	for name := range drop {
		if _, ok := got["./"+name]; ok {
			t.Errorf("link %s -> %s kept, want dropped", name, drop[name])
		}
		if !slices.Contains(dropped, name) {
			t.Errorf("%s not named as dropped (%v)", name, dropped)
		}
	}
	if _, ok := got["./hard"]; ok {
		t.Error("a hard link to a dropped link was kept")
	}
	if _, ok := got["./fifo"]; ok || !slices.Contains(dropped, "fifo") {
		t.Error("a FIFO reached the grader (a scorer reading it would hang)")
	}
	if got["./out/result"] != "42\n" {
		t.Errorf("out/result = %q", got["./out/result"])
	}
}

// A workdir of 400 000 links (a few bytes of quota each) costs the worker
// a bounded amount of memory: past the bound, links are dropped.
//
// Not parallel: it reads the process's heap, which parallel tests would
// grow too (67 MiB once, in a loaded run).
func TestConfineLinksBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := 0; i < 400_000; i++ {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("./l%07d", i), Typeflag: tar.TypeSymlink, Linkname: "target-in-the-workdir", Mode: 0o777}); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	// The heap read after the call holds what the call kept and what it
	// threw away since the last collection. At the default GOGC a heap of
	// tens of MiB left by earlier tests lets as much garbage (the tar
	// headers of 400 000 entries) stand uncollected: 70 MiB read in a
	// loaded CI run. Collect often, so what is read is what was held.
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var kept int
	r, w := io.Pipe()
	go func() {
		tr := tar.NewReader(r)
		for {
			if _, err := tr.Next(); err != nil {
				break
			}
			kept++
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	dropped, err := confineLinks(pr, w, "/work", 0)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(dropped) == 0 || len(dropped) > maxDroppedNames {
		t.Fatalf("%d names dropped, want some and at most %d", len(dropped), maxDroppedNames)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 4*maxLinkBytes {
		t.Fatalf("the heap grew by %d MiB for 400 000 links", grew>>20)
	}
	t.Logf("the heap grew by %.1f MiB for 400 000 links (%d dropped)", float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), len(dropped))
}
