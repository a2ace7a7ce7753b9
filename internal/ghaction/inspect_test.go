package ghaction_test

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/report"
)

// The action writes the run as Inspect logs under report-dir/inspect and
// names the directory in the inspect-dir output; inspect: json and false
// change the encoding or turn them off; anything else is bad input.
func TestActionWritesInspectLogs(t *testing.T) {
	for _, c := range []struct{ input, ext, dir string }{
		{"", ".eval", "out/reports/inspect"},
		{"json", ".json", "out/reports/inspect"},
		{"false", "", ""},
	} {
		e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
		e.vars["GITHUB_EVENT_NAME"] = "push"
		e.vars["INPUT_REPORT-DIR"] = "out/reports"
		e.vars["INPUT_INSPECT"] = c.input
		stub := &stubLaunch{rep: func() *report.Report { return fixedReport(1) }}
		ghaction.Run(context.Background(), e.env(), stub.launch)
		if got := e.outputs()["inspect-dir"]; got != c.dir {
			t.Errorf("inspect %q: inspect-dir %q, want %q", c.input, got, c.dir)
		}
		files, _ := filepath.Glob(filepath.Join(e.workspace, "out/reports/inspect/*"))
		if c.ext == "" {
			if len(files) != 0 {
				t.Errorf("inspect false wrote %v", files)
			}
			continue
		}
		if len(files) == 0 {
			t.Fatalf("inspect %q: no logs written", c.input)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, c.ext) {
				t.Errorf("inspect %q: %s", c.input, f)
			}
			if c.ext == ".eval" {
				zr, err := zip.OpenReader(f)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if _, err := zr.Open("header.json"); err != nil {
					t.Errorf("%s: %v", f, err)
				}
				zr.Close()
			} else if b, _ := os.ReadFile(f); !strings.Contains(string(b), `"samples"`) {
				t.Errorf("%s has no samples", f)
			}
		}
	}

	e := newActionEnv(t, "http://127.0.0.1:9", writeTok)
	e.vars["INPUT_INSPECT"] = "yaml"
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(1) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitBadInput || len(stub.calls) != 0 {
		t.Errorf("inspect yaml: exit %d after %d launches\n%s", code, len(stub.calls), e.stdout.String())
	}
	if !strings.Contains(e.stdout.String(), `input inspect: \"yaml\"`) && !strings.Contains(e.stdout.String(), `input inspect: "yaml"`) {
		t.Errorf("the log does not name the input:\n%s", e.stdout.String())
	}
}
