package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/report"
)

// `steward report --format`, `merge --format`'s help, `launch --report-dir`
// and the refusal of an unknown format all read report.Formats: a format
// added there is offered, rendered and written with no change here.
func TestCommandsReadTheFormatTable(t *testing.T) {
	saved := report.Formats
	t.Cleanup(func() { report.Formats = saved })
	report.Formats = append(append([]report.Format(nil), saved...), report.Format{Name: "probe", Aliases: []string{"pr"}, File: "probe.txt",
		Help: "a test's format", Render: func(w io.Writer, rep *report.Report) error {
			_, err := fmt.Fprintf(w, "probe: %d attempts, %d passed\n", rep.Counts.Total, rep.Counts.Passed)
			return err
		}})

	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), mixedSet)
	rec := filepath.Join(dir, "rec")
	reports := filepath.Join(dir, "reports")
	s := newStreams()
	s.must(t, ExitFailed, "launch", "--record", rec, "--report-dir", reports, set)
	if b, err := os.ReadFile(filepath.Join(reports, "probe.txt")); err != nil || string(b) != "probe: 2 attempts, 1 passed\n" {
		t.Errorf("launch --report-dir: probe.txt %q, %v", b, err)
	}
	for _, name := range []string{"report.md", "report.json", "junit.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(reports, name)); err != nil {
			t.Errorf("launch --report-dir: %v", err)
		}
	}
	for _, f := range []string{"probe", "pr"} {
		s.must(t, ExitOK, "report", "--record", rec, "--format", f)
		if s.stdout.String() != "probe: 2 attempts, 1 passed\n" {
			t.Errorf("report --format %s: %q", f, s.stdout.String())
		}
	}
	s.must(t, ExitBadInput, "report", "--record", rec, "--format", "pdf")
	if want := `--format "pdf": want ` + report.FormatNames(false, false); !strings.Contains(s.stderr.String(), want) || !strings.HasSuffix(want, " or probe") {
		t.Errorf("stderr %q, want %q", s.stderr.String(), want)
	}
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"report", "--help"}, "probe (a test's format)"},
		{[]string{"merge", "--help"}, "junit, comment, html"},
		{[]string{"merge", "--help"}, " or probe"},
		{[]string{"launch", "--help"}, "report.md, report.json, junit.xml, report.html"},
		{[]string{"launch", "--help"}, " and probe.txt here"},
	} {
		s.must(t, ExitOK, c.cmd...)
		if !strings.Contains(s.stdout.String(), c.want) {
			t.Errorf("%s: no %q in\n%s", strings.Join(c.cmd, " "), c.want, s.stdout.String())
		}
	}
}
