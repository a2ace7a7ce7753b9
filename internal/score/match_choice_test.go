package score

import (
	"strings"
	"testing"
)

// Letter answers as models give them, several correct choices, and what is
// no answer at all.
func TestMatchChoice(t *testing.T) {
	for _, c := range []struct {
		answer  string
		targets []string
		want    bool
		expl    string
	}{
		{"A", []string{"A"}, true, "chose A"},
		{"a", []string{"A"}, true, "chose A"},
		{"(d)", []string{"D"}, true, "chose D"},
		{"B.", []string{"B"}, true, "chose B"},
		{"**C**", []string{"C"}, true, "chose C"},
		{"Answer: C", []string{"C"}, true, "chose C"},
		{"ANSWER: C", []string{"B"}, false, "chose C, want B"},
		{"answer:(b)", []string{"B"}, true, "chose B"},
		{"Let me think. 2+2 is 4, so the answer is (B). Done.", []string{"B"}, true, "chose B"},
		{"First I thought ANSWER: A\nbut no.\nANSWER: D", []string{"D"}, true, "chose D"},
		{"ANSWER: C because it is blue", []string{"C"}, true, "chose C"},
		{"ANSWER: A,C", []string{"A", "C"}, true, "chose A, C"},
		{"ANSWER: C, A", []string{"A,C"}, true, "chose A, C"},
		{"A and C", []string{"C", "A"}, true, "chose A, C"},
		{"ANSWER: A", []string{"A", "C"}, false, "chose A, want A, C"},
		{"ANSWER: A, B, C", []string{"A", "C"}, false, "chose A, B, C, want A, C"},
		{"Yes", []string{"A"}, false, `no choice letter in the answer "Yes" (want A)`},
		{"I think it's Paris", []string{"A"}, false, `no choice letter`},
		{"", []string{"A"}, false, `no choice letter`},
	} {
		got, expl, err := MatchAnswer(Choice, false, c.answer, c.targets)
		if err != nil || got != c.want || !strings.HasPrefix(expl, c.expl) {
			t.Errorf("%q vs %q: %v %q %v, want %v %q", c.answer, c.targets, got, expl, err, c.want, c.expl)
		}
	}
	if err := CheckTarget(Choice, false, "Paris"); err == nil || !strings.Contains(err.Error(), "not a choice letter") {
		t.Errorf("CheckTarget(Paris) = %v", err)
	}
	if err := CheckTarget(Choice, false, "a, c"); err != nil {
		t.Errorf("CheckTarget(a, c) = %v", err)
	}
	if _, _, err := MatchAnswer(Choice, false, "A", []string{"12"}); err == nil {
		t.Errorf("a target that is not a letter judged")
	}
}
