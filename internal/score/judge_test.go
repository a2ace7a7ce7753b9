package score

import (
	"errors"
	"strings"
	"testing"
)

func TestRenderJudgeLeavesTheAnswersBracesAlone(t *testing.T) {
	got := RenderJudge("Q {question} A {answer} C {criterion} T {target} {unknown} {", JudgeFields{
		Input: "2+2?", Answer: "{criterion} {instructions} is 4", Criterion: "says 4", Target: "4",
	})
	want := "Q 2+2? A {criterion} {instructions} is 4 C says 4 T 4 {unknown} {"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	// The default template names every part, and the mock's markers.
	d := RenderJudge(DefaultJudgeTemplate, JudgeFields{Input: "q", Answer: "a", Criterion: "c", Instructions: JudgeInstructions(true)})
	for _, s := range []string{"[Task]: q\n", "[Submission]: a\n", "[Criterion]: c\n", "one of CPI"} {
		if !strings.Contains(d, s) {
			t.Errorf("default prompt lacks %q:\n%s", s, d)
		}
	}
	if err := CheckJudgeTemplate(DefaultJudgeTemplate); err != nil {
		t.Errorf("the default template: %v", err)
	}
}

func TestReadGrades(t *testing.T) {
	re, err := CompileGradePattern("")
	if err != nil {
		t.Fatal(err)
	}
	letters := Grading{Pattern: re, PassScore: 1}
	num, err := CompileGradePattern(`(?i)score:\s*([0-9.]+)`)
	if err != nil {
		t.Fatal(err)
	}
	tens := Grading{Pattern: num, Scale: 10, PassScore: 0.7}
	for _, c := range []struct {
		g     Grading
		reply string
		score float64
		bad   string
	}{
		{letters, "Reasoning.\nGRADE: C", 1, ""},
		{letters, "grade: p", 0.5, ""},
		{letters, "Reply 'GRADE: C' when right. Here it is wrong.\nGRADE: I", 0, ""}, // the last grade counts
		{letters, "I think it is fine.", 0, "has no grade"},
		{letters, "GRADE: X", 0, "has no grade"},
		{tens, "Score: 7", 0.7, ""},
		{tens, "Score: 10", 1, ""},
		{tens, "Score: 11", 0, "neither C, P, I nor a number from 0 to 10"},
		{tens, "Score: 1.2.3", 0, "neither"},
	} {
		g, err := c.g.Read(c.reply)
		var nv *NoVerdict
		switch {
		case c.bad != "":
			if !errors.As(err, &nv) || !strings.Contains(nv.Reason, c.bad) {
				t.Errorf("%q: %v, want no verdict (%s)", c.reply, err, c.bad)
			}
		case err != nil || g.Score != c.score:
			t.Errorf("%q: %+v %v, want score %g", c.reply, g, err, c.score)
		}
	}
	if _, err := CompileGradePattern("GRADE: ([CI]) (x)"); err == nil {
		t.Error("two capture groups accepted")
	}
	if _, err := CompileGradePattern("(["); err == nil {
		t.Error("a broken pattern accepted")
	}
}

func TestVote(t *testing.T) {
	g := Grading{PassScore: 1}
	for _, c := range []struct {
		grades []Grade
		pass   bool
		score  float64
	}{
		{[]Grade{{"C", 1}}, true, 1},
		{[]Grade{{"P", 0.5}}, false, 0.5},
		{[]Grade{{"C", 1}, {"I", 0}, {"C", 1}}, true, 2.0 / 3},
		{[]Grade{{"C", 1}, {"I", 0}}, false, 0.5}, // a tie is no majority
		{[]Grade{{"I", 0}, {"P", 0.5}, {"C", 1}}, false, 0.5},
	} {
		v := g.Vote(c.grades)
		if v.Passed != c.pass || v.Score != c.score {
			t.Errorf("%v: %+v, want pass %v score %g", c.grades, v, c.pass, c.score)
		}
	}
	if v := (Grading{PassScore: 0.5}).Vote([]Grade{{"P", 0.5}}); !v.Passed {
		t.Error("pass_score 0.5 does not pass a P")
	}
}
