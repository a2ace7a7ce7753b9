package report

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// The format table: names and files unique, every renderer renders, and
// the lists the commands' help and errors read come from it.
func TestFormatsTable(t *testing.T) {
	names, files := map[string]bool{}, map[string]bool{}
	for _, f := range Formats {
		for _, n := range append([]string{f.Name}, f.Aliases...) {
			if names[n] {
				t.Errorf("format name %q twice", n)
			}
			names[n] = true
			if g, ok := LookupFormat(n); !ok || g.Name != f.Name {
				t.Errorf("LookupFormat(%q) = %q, %v; want %q", n, g.Name, ok, f.Name)
			}
		}
		if f.File != "" {
			if files[f.File] {
				t.Errorf("file %q twice", f.File)
			}
			files[f.File] = true
		}
		if f.Render == nil {
			if f.File != "" {
				t.Errorf("%s has a file but no renderer", f.Name)
			}
			continue
		}
		var b bytes.Buffer
		if err := f.Render(&b, fixture()); err != nil || b.Len() == 0 {
			t.Errorf("%s: rendered %d bytes, %v", f.Name, b.Len(), err)
		}
	}
	if _, ok := LookupFormat("pdf"); ok {
		t.Error("LookupFormat found pdf")
	}
	for _, c := range []struct{ got, want string }{
		{FormatNames(false, false), "terminal, markdown, json, junit, comment, html or inspect"},
		{FormatNames(false, true), "terminal, markdown, json, junit, comment or html"},
		{FormatNames(true, false), "terminal, markdown, json, junit, comment, html (one self-contained page with transcripts) or inspect (one Inspect log per task in --log-dir)"},
		{FormatFiles(), "report.md, report.json, junit.xml and report.html"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// WriteFiles writes each format's file with what its renderer writes, but
// the ones skipped.
func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reports")
	rep := fixture()
	if err := WriteFiles(dir, rep, "markdown"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	sort.Strings(got)
	if want := []string{"junit.xml", "report.html", "report.json"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	var want bytes.Buffer
	if err := JUnit(&want, rep); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "junit.xml")); !bytes.Equal(b, want.Bytes()) {
		t.Errorf("junit.xml is not JUnit's output:\n%s", b)
	}
}
