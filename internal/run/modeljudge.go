package run

import "github.com/steward-evals/steward/internal/transcript"

// The model judge's supervisor side (scorer.model_graded; docs/judges.md):
// the grading token is issued, priced and revoked with the attempt's
// (attempts.go); the graders' calls are made where the attempt runs
// (internal/attempt's modeljudge.go), and their transcript joins the
// attempt's here.

// withGrading adds the graders' calls to the agent's transcript, marked
// as the scorer's, after the agent's.
func withGrading(agent, grading *transcript.Transcript, judged bool) *transcript.Transcript {
	if !judged || grading == nil || len(grading.Calls) == 0 && grading.Dropped == 0 {
		return agent
	}
	if agent == nil {
		agent = &transcript.Transcript{Mode: grading.Mode}
	}
	for _, c := range grading.Calls {
		c.By = transcript.ByScorer
		agent.Calls = append(agent.Calls, c)
	}
	agent.Dropped += grading.Dropped
	if agent.Truncated == "" {
		agent.Truncated = grading.Truncated
	}
	return agent
}
