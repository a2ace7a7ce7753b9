package runnerlog

import (
	"slices"
	"strings"
	"testing"
)

// The runner's reading: masks apply to later lines only; commands are
// ignored (shown as text) while stopped; only the exact token resumes.
func TestParse(t *testing.T) {
	out := strings.Join([]string{
		"early s3cret-early",
		"::add-mask::s3cret-early",
		"  ::add-mask::tok-1234",
		"uses tok-1234 and s3cret-early",
		"::error file=a.yaml,line=3,title=T%3A x::bad%0Anext",
		"::stop-commands::abc123",
		"::add-mask::late-secret",
		"::warning::fake",
		"::wrong-token::",
		"  ::abc123::  ",
		"::notice::real",
		"late-secret shows",
		"::unknown::text",
	}, "\n")
	l := Parse(out)
	if !slices.Equal(l.MasksBeforeStop, []string{"s3cret-early", "tok-1234"}) || len(l.Masks) != 2 {
		t.Errorf("masks %v before stop %v", l.Masks, l.MasksBeforeStop)
	}
	if got := l.Leaks("s3cret-early", "tok-1234", "late-secret"); !slices.Equal(got, []string{"s3cret-early", "late-secret"}) {
		t.Errorf("leaks %v", got)
	}
	if len(l.Annotations) != 2 || l.Annotations[0].Properties["title"] != "T: x" || l.Annotations[0].Properties["line"] != "3" ||
		l.Annotations[0].Message != "bad\nnext" || l.Annotations[1].Message != "real" {
		t.Errorf("annotations %+v", l.Annotations)
	}
	if len(l.IgnoredCommands) != 3 || l.Stops != 1 || l.Unresumed {
		t.Errorf("ignored %q stops %d unresumed %v", l.IgnoredCommands, l.Stops, l.Unresumed)
	}
	if !strings.Contains(l.Text(), "uses *** and ***") || !strings.Contains(l.Text(), "::unknown::text") {
		t.Errorf("displayed:\n%s", l.Text())
	}
}
