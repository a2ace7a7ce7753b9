package cli

import (
	"strings"
	"testing"
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
