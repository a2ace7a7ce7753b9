package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/report"
)

// Issue 23 item 11: an unknown subcommand exits 2 everywhere, with a
// suggestion, and prints nothing on stdout (`steward agent caht` printed
// the help on stdout and exited 0, and the help became an agent's answer).
func TestUnknownSubcommandsExit2Everywhere(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"agent", "caht"}, []string{`unknown command "caht" for "steward agent"`, "Did you mean this?", "chat"}},
		{[]string{"ramp", "hlod"}, []string{`unknown command "hlod" for "steward ramp"`, "hold"}},
		{[]string{"lease", "inspct", "k"}, []string{`unknown command "inspct" for "steward lease"`, "inspect"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{[]string{"completion", "bsh"}, []string{`unknown command "bsh" for "steward completion"`, "bash"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			s := newStreams()
			s.must(t, ExitBadInput, c.args...)
			for _, w := range c.want {
				if !strings.Contains(s.stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, s.stderr.String())
				}
			}
			if s.stdout.Len() != 0 {
				t.Errorf("stdout:\n%s", s.stdout.String())
			}
		})
	}
	// Without a subcommand, the group prints its help.
	s := newStreams()
	s.must(t, ExitOK, "agent")
	if !strings.Contains(s.stdout.String(), "chat") {
		t.Errorf("steward agent printed no help:\n%s", s.stdout.String())
	}
}

// Issue 23 item 11: `steward report EVALSET` and `steward runs EVALSET`
// read the runs of that eval set only: two eval sets beside each other share
// the directory's record, and each showed the other's newest run.
func TestReportAndRunsFilterByEvalSet(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, filepath.Join(dir, "a.yaml"), strings.Replace(mixedSet, "name: mixed", "name: set-a", 1))
	b := writeFile(t, filepath.Join(dir, "b.yaml"), strings.Replace(strings.Replace(mixedSet, "name: mixed", "name: set-b", 1), "name: echo", "name: other", 1))
	s := newStreams()
	s.must(t, ExitFailed, "launch", a)
	s.must(t, ExitFailed, "launch", b) // the newest run of the record
	s.must(t, ExitOK, "report", "--format", "json", a)
	var rep report.Report
	if err := json.Unmarshal(s.stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tasks) != 1 || rep.Tasks[0].Name != "echo" {
		t.Fatalf("steward report a.yaml showed tasks %+v: another eval set's run", rep.Tasks)
	}
	s.must(t, ExitOK, "runs", "--json", a)
	var rows []runRow
	if err := json.Unmarshal(s.stdout.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != rep.RunIDs[0] {
		t.Fatalf("steward runs a.yaml listed %+v, want a's run %s only", rows, rep.RunIDs[0])
	}
	s.must(t, ExitOK, "runs", "--json", "--record", filepath.Join(dir, ".steward"))
	if err := json.Unmarshal(s.stdout.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("steward runs without an eval set listed %d runs (%v), want both", len(rows), err)
	}
}
