package score

import (
	"strings"
	"testing"
)

func TestMatchAnswer(t *testing.T) {
	for _, c := range []struct {
		kind       Match
		ignoreCase bool
		answer     string
		targets    []string
		want       bool
		expl       string
		err        string
	}{
		{Exact, false, " 42\n", []string{"42"}, true, "exact match", ""},
		{"", false, "42", []string{"42"}, true, "exact match", ""},
		{Exact, false, "Paris", []string{"paris"}, false, `answer "Paris" does not match target "paris"`, ""},
		{Exact, true, "Paris", []string{"paris"}, true, "exact match", ""},
		{Exact, false, "b", []string{"a", "b"}, true, "exact match", ""},
		{Includes, false, "the answer is 42.", []string{"42"}, true, "answer includes the target", ""},
		{Includes, true, "THE ANSWER", []string{"answer"}, true, "answer includes the target", ""},
		{Includes, false, "THE ANSWER", []string{"answer"}, false, `answer "THE ANSWER" does not match target "answer"`, ""},
		{Regex, false, "order 1234", []string{`\d{4}`}, true, "regex match", ""},
		{Regex, true, "ABC", []string{`^abc$`}, true, "regex match", ""},
		{Regex, false, "x", []string{`(`}, false, "", "target regex"},
		{Numeric, false, "1,000.0", []string{"1000"}, true, "numeric match", ""},
		{Numeric, false, "0.30000000000000004", []string{"0.3"}, true, "numeric match", ""},
		{Numeric, false, "0.31", []string{"0.3"}, false, `answer "0.31" does not match target "0.3"`, ""},
		{Numeric, false, "abc", []string{"1"}, false, `answer "abc" does not match target "1"`, ""},
		{Exact, false, "x", nil, false, "", "no target"},
		{"fuzzy", false, "x", []string{"x"}, false, "", `unknown match "fuzzy"`},
	} {
		got, expl, err := MatchAnswer(c.kind, c.ignoreCase, c.answer, c.targets)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q vs %q: err %v, want %q", c.kind, c.answer, c.targets, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || expl != c.expl {
			t.Errorf("%s %q vs %q: %v %q %v, want %v %q", c.kind, c.answer, c.targets, got, expl, err, c.want, c.expl)
		}
	}
}

func TestMatchVocabulary(t *testing.T) {
	if got := strings.Join(MatchNames(), ","); got != "exact,includes,regex,numeric,choice" {
		t.Fatalf("MatchNames = %s", got)
	}
	for _, m := range Matches {
		if !m.Valid() {
			t.Errorf("%s not valid", m)
		}
	}
	if Match("Exact").Valid() || Match("").Valid() || !DefaultMatch.Valid() {
		t.Error("Valid accepts what MatchAnswer does not name")
	}
}

func TestCheckTarget(t *testing.T) {
	for _, c := range []struct {
		kind   Match
		target string
		bad    bool
	}{
		{Regex, `a+`, false}, {Regex, `(`, true}, {Numeric, " 3.5 ", false}, {Numeric, "three", true},
		{Exact, "(", false}, {Includes, "x", false},
	} {
		if err := CheckTarget(c.kind, false, c.target); (err != nil) != c.bad {
			t.Errorf("CheckTarget(%s, %q) = %v, want bad %v", c.kind, c.target, err, c.bad)
		}
	}
}

func TestTailNeverCutsACharacter(t *testing.T) {
	s := Tail([]byte(strings.Repeat("é", 10)), 5)
	if s != "…éé" {
		t.Fatalf("Tail = %q", s)
	}
	if got := OutputTail([]byte(" out \n"), []byte("err"), 10); got != "stdout: out; stderr: err" {
		t.Fatalf("OutputTail = %q", got)
	}
	if OutputTail(nil, []byte("\n"), 10) != "" {
		t.Fatal("OutputTail of nothing is not empty")
	}
}
