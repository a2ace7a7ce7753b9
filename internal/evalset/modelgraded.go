package evalset

import (
	"regexp"
	"strings"

	"github.com/steward-evals/steward/internal/score"
)

// ModelGraded is the built-in model judge (issue 30 item 2; docs/judges.md):
// Inspect's model_graded_qa and promptfoo's llm-rubric as a scorer. After
// the agent, each grader model gets the template filled with the sample's
// input, the criterion (Rubric, else the sample's targets) and the
// agent's answer, and ends its reply with a grade. Its calls go through the
// gateway on a token of their own; their spend is the attempt's grading
// cost, apart from the agent's, and counts against --budget.
type ModelGraded struct {
	// Template is the grading prompt ({input}, {answer}, {criterion},
	// {target}, {instructions}; "" = score.DefaultJudgeTemplate).
	Template string `yaml:"template" json:"template,omitempty"`
	// Instructions fill {instructions} ("" = the letter-grade instructions).
	Instructions string `yaml:"instructions" json:"instructions,omitempty"`
	// Rubric is the criterion for every sample; "" = the sample's targets.
	Rubric string `yaml:"rubric" json:"rubric,omitempty"`
	// GradePattern reads the grade: one capture group, a letter C/P/I or a
	// number ("" = GRADE: C/P/I, as Inspect's).
	GradePattern string `yaml:"grade_pattern" json:"grade_pattern,omitempty"`
	// PartialCredit lets the default instructions offer P (0.5).
	PartialCredit bool `yaml:"partial_credit" json:"partial_credit,omitempty"`
	// Scale is the top of a numeric grade (0 = 1: grades are already in
	// [0, 1]; 10 for "rate it 0 to 10").
	Scale float64 `yaml:"scale" json:"scale,omitempty"`
	// PassScore is the least score (in [0, 1]) that passes; nil = 1 (only
	// C, or full marks).
	PassScore *float64 `yaml:"pass_score" json:"pass_score,omitempty"`
	// Models are the graders (each grades once; more than one vote); empty
	// = the eval set's model.name.
	Models []string `yaml:"models" json:"models,omitempty"`
	// Prices are the graders' own, per million tokens; nil = model.prices.
	Prices *Prices `yaml:"prices" json:"prices,omitempty"`
	// MaxTokens caps each grader's reply (0 = 1024).
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`
}

// DefaultJudgeMaxTokens caps a grader's reply when max_tokens is unset.
const DefaultJudgeMaxTokens = 1024

// Grading is how the judge reads its graders' replies (already validated).
func (m *ModelGraded) Grading() score.Grading {
	re, _ := score.CompileGradePattern(m.GradePattern)
	pass := 1.0
	if m.PassScore != nil {
		pass = *m.PassScore
	}
	return score.Grading{Pattern: re, Scale: m.Scale, PassScore: pass}
}

// Prompt is the grading prompt for one sample and answer.
func (m *ModelGraded) Prompt(input string, targets []string, answer string) string {
	tmpl := m.Template
	if tmpl == "" {
		tmpl = score.DefaultJudgeTemplate
	}
	inst := m.Instructions
	if inst == "" {
		inst = score.JudgeInstructions(m.PartialCredit)
	}
	target := strings.Join(targets, "\n")
	crit := m.Rubric
	if crit == "" {
		crit = target
	}
	return score.RenderJudge(tmpl, score.JudgeFields{Input: input, Answer: answer, Criterion: crit, Target: target, Instructions: inst})
}

// GraderModels are the graders, defaulting to the eval set's model.
func (m *ModelGraded) GraderModels(model string) []string {
	if len(m.Models) > 0 {
		return m.Models
	}
	return []string{model}
}

// GraderPrices are the graders' prices, defaulting to the model's.
func (m *ModelGraded) GraderPrices(model Prices) Prices {
	if m.Prices != nil {
		return *m.Prices
	}
	return model
}

var graderNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$`)

// modelGraded checks a task's scorer.model_graded (validate.go's scorer).
func (v *validator) modelGraded(i int, t *Task) {
	p := index("tasks", i) + ".scorer.model_graded"
	m := t.Scorer.ModelGraded
	if t.Scorer.Command != "" || t.Scorer.Match != "" {
		v.errf(p, "set one of command, match or model_graded")
		return
	}
	if t.Scorer.IgnoreCase {
		v.errf(index("tasks", i)+".scorer.ignore_case", "applies to scorer.match only")
	}
	if len(t.Scorer.Files) > 0 {
		v.errf(index("tasks", i)+".scorer.files", "applies to scorer.command only")
	}
	if m.Template != "" {
		if err := score.CheckJudgeTemplate(m.Template); err != nil {
			v.errf(p+".template", "%v", err)
		}
	}
	if _, err := score.CompileGradePattern(m.GradePattern); err != nil {
		v.errf(p+".grade_pattern", "%v", err)
	}
	if m.Scale < 0 {
		v.errf(p+".scale", "must be more than 0 (the top of a numeric grade), got %g", m.Scale)
	}
	if m.PassScore != nil && (*m.PassScore < 0 || *m.PassScore > 1) {
		v.errf(p+".pass_score", "must be from 0 to 1 (C is 1, P 0.5, I 0; numbers are divided by scale), got %g", *m.PassScore)
	}
	if m.MaxTokens < 0 {
		v.errf(p+".max_tokens", "must be 0 (the default, %d) or more, got %d", DefaultJudgeMaxTokens, m.MaxTokens)
	}
	if m.Prices != nil && (m.Prices.InputPerMTok < 0 || m.Prices.OutputPerMTok < 0) {
		v.errf(p+".prices", "prices cannot be negative")
	}
	for j, name := range m.Models {
		if !graderNameRE.MatchString(name) {
			v.errf(index(p+".models", j), "%q is not a model name", name)
		}
	}
	if len(m.Models) == 0 && strings.TrimSpace(v.es.Model.Name) == "" {
		v.errf(p+".models", "no grader: name one here, or set model.name (the graders default to it)")
	}
	if m.Rubric != "" || !v.samplesOK[i] {
		return
	}
	tmpl := m.Template
	if tmpl == "" {
		tmpl = score.DefaultJudgeTemplate
	}
	if !strings.Contains(tmpl, "{criterion}") && !strings.Contains(tmpl, "{rubric}") && !strings.Contains(tmpl, "{target}") {
		return // the template grades without a criterion
	}
	for j, s := range t.Samples {
		if s != nil && !s.HasTarget() {
			v.errf(index(index("tasks", i)+".samples", j), "no target, and scorer.model_graded has no rubric: the grader would have no criterion")
		}
	}
}
