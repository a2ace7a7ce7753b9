package score

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The model judge (scorer.model_graded, docs/judges.md): a grader model is
// shown the sample's input, the criterion (the rubric, else the targets)
// and the agent's answer, and ends its reply with a grade. This file is
// the pure part: the prompt, reading the grade, and the vote of several
// graders. Calling the model is internal/run's.

// DefaultJudgeTemplate is the grading prompt. Its [Task], [Submission] and
// [Criterion] sections are what the mock upstream recognises as a grading
// prompt (internal/mockmodel), so examples and tests grade offline.
const DefaultJudgeTemplate = `You are grading an answer submitted for a task, against a criterion.

[BEGIN DATA]
***
[Task]: {input}
***
[Submission]: {answer}
***
[Criterion]: {criterion}
***
[END DATA]

Does the submission meet the criterion?

{instructions}`

// JudgeInstructions are the default instructions for letter grades; with
// partial credit the grader may also answer P.
func JudgeInstructions(partial bool) string {
	letters, choice := "CI", `"C" if the submission meets the criterion, or "I" if it does not`
	if partial {
		letters, choice = "CPI", `"C" if the submission meets the criterion, "P" if it meets it in part, or "I" if it does not`
	}
	return "Reason step by step, briefly, about whether the criterion is met; judge only what the submission says, not how it says it. " +
		"Then end your reply with a line 'GRADE: $LETTER' (without quotes), where LETTER is one of " + letters + ": " + choice + "."
}

// DefaultGradePattern reads Inspect's letter grades (C, P, I).
const DefaultGradePattern = `(?i)GRADE\s*:\s*([CPI])\b`

// JudgeFields are what a template is filled with.
type JudgeFields struct {
	Input, Answer, Criterion, Target, Instructions string
}

// JudgePlaceholders are the names a template may use ({question} is
// {input} and {rubric} is {criterion}, as Inspect and promptfoo spell them).
var JudgePlaceholders = []string{"input", "question", "answer", "criterion", "rubric", "target", "instructions"}

// RenderJudge fills a template. Only the placeholders above are replaced,
// in one pass, so braces in the answer or the input are left as they are
// (a hostile answer cannot inject another field).
func RenderJudge(template string, f JudgeFields) string {
	vals := map[string]string{
		"input": f.Input, "question": f.Input, "answer": f.Answer,
		"criterion": f.Criterion, "rubric": f.Criterion, "target": f.Target,
		"instructions": f.Instructions,
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			b.WriteString(template)
			return b.String()
		}
		j := strings.IndexByte(template[i:], '}')
		if j < 0 {
			b.WriteString(template)
			return b.String()
		}
		name := template[i+1 : i+j]
		if v, ok := vals[name]; ok {
			b.WriteString(template[:i])
			b.WriteString(v)
		} else {
			b.WriteString(template[:i+j+1])
		}
		template = template[i+j+1:]
	}
}

// CheckJudgeTemplate says what is wrong with a template: it must show the
// grader the answer, and every {name} must be a placeholder.
func CheckJudgeTemplate(template string) error {
	if !strings.Contains(template, "{answer}") {
		return fmt.Errorf("the template never shows the grader the answer: put {answer} in it")
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(template, -1) {
		known := false
		for _, p := range JudgePlaceholders {
			known = known || m[1] == p
		}
		if !known {
			return fmt.Errorf("{%s} is not a placeholder (use %s)", m[1], "{"+strings.Join(JudgePlaceholders, "}, {")+"}")
		}
	}
	return nil
}

var placeholderRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// Grading reads grades from a grader's reply.
type Grading struct {
	// Pattern has one capture group: the grade, a letter (C, P, I) or a
	// number. The reply's last match counts (the grade ends the reply; an
	// example grade quoted in the reasoning comes before it).
	Pattern *regexp.Regexp
	// Scale divides a numeric grade (0: 1, the grade is already in [0, 1]).
	Scale float64
	// PassScore is the least score that passes (C is 1, P 0.5, I 0).
	PassScore float64
}

// CompileGradePattern checks a grade pattern: it compiles and has exactly
// one capture group.
func CompileGradePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		p = DefaultGradePattern
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("not a regular expression: %v", err)
	}
	if re.NumSubexp() != 1 {
		return nil, fmt.Errorf("needs exactly one capture group (the grade), has %d", re.NumSubexp())
	}
	return re, nil
}

// Grade is one grader's reading of its reply.
type Grade struct {
	Text  string  // the grade as written (C, 7, …)
	Score float64 // in [0, 1]
}

// Read finds the grade in a reply; a reply without one, or with a grade
// that is neither a letter C/P/I nor a number within the scale, is a
// *NoVerdict carrying the reply's tail: a grader that answers nonsense has
// not judged.
func (g Grading) Read(reply string) (Grade, error) {
	ms := g.Pattern.FindAllStringSubmatch(reply, -1)
	if len(ms) == 0 {
		return Grade{}, &NoVerdict{fmt.Sprintf("the grader's reply has no grade (pattern %s): %s", g.Pattern, Tail([]byte(reply), TailBytes))}
	}
	text := strings.TrimSpace(ms[len(ms)-1][1])
	switch strings.ToUpper(text) {
	case "C":
		return Grade{text, 1}, nil
	case "P":
		return Grade{text, 0.5}, nil
	case "I":
		return Grade{text, 0}, nil
	}
	x, err := strconv.ParseFloat(text, 64)
	scale := g.Scale
	if scale <= 0 {
		scale = 1
	}
	if err != nil || x < 0 || x > scale || x != x {
		return Grade{}, &NoVerdict{fmt.Sprintf("the grader's grade %q is neither C, P, I nor a number from 0 to %g: %s", Truncate(text, 40), scale, Tail([]byte(reply), TailBytes))}
	}
	return Grade{text, x / scale}, nil
}

// Vote is several graders' verdict: the score is the mean of their
// scores, and the attempt passes when more than half of them pass it (a
// tie fails: no majority found it right).
func (g Grading) Vote(grades []Grade) Verdict {
	var sum float64
	pass := 0
	texts := make([]string, len(grades))
	for i, gr := range grades {
		sum += gr.Score
		if gr.Score >= g.PassScore {
			pass++
		}
		texts[i] = gr.Text
	}
	v := Verdict{Score: sum / float64(max(len(grades), 1)), Passed: 2*pass > len(grades)}
	if len(grades) == 1 {
		v.Explanation = "grade " + texts[0]
	} else {
		v.Explanation = fmt.Sprintf("grades %s: %d of %d pass", strings.Join(texts, ", "), pass, len(grades))
	}
	return v
}
