package attempt

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/score"
)

// The model judge (scorer.model_graded; docs/judges.md). It runs in the
// process that runs the attempt (a worker, or the supervisor), never in a
// sandbox: the graders are called through the gateway's loopback listener
// with the attempt's grading token, which no sandbox ever holds. The
// gateway counts the grading token's use apart from the agent's (its own
// prices, not the agent's limits, inside --budget) and keeps its calls'
// transcript, which the supervisor adds to the attempt's marked as the
// scorer's (internal/run's attempts.go).

// Tokens are an attempt's gateway tokens: the agent's, and the model
// judge's ("" when the task's scorer is not model_graded).
type Tokens struct {
	Agent, Grading string
}

// judgeBusyTries bounds the grader's retries of a gateway 429 (the gateway
// retries the upstream's own pushback itself).
const judgeBusyTries = 5

// modelJudge asks each grader for a grade of answer and takes their vote.
// A grader that answers nonsense, an HTTP error or no grade is no verdict
// (errored, never failed); the supervisor turns an attempt whose grading
// the budget refused or the upstream failed into skipped or infra.
func (e *Executor) modelJudge(ctx context.Context, t *evalset.Task, s *evalset.Sample, answer, token string, deadline time.Time, logb *strings.Builder) (score.Verdict, error) {
	m := t.Scorer.ModelGraded
	if token == "" || e.x.JudgeURL == "" {
		return score.Verdict{}, sandbox.InfraError(errors.New("model judge: no grading token or gateway address (the supervisor did not prepare one)"))
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	prompt := m.Prompt(s.InputText(), s.Targets(), answer)
	g := m.Grading()
	var grades []score.Grade
	var replies []string
	for _, model := range m.GraderModels(e.x.Model) {
		reply, err := e.askGrader(ctx, model, prompt, cmp.Or(m.MaxTokens, evalset.DefaultJudgeMaxTokens), token)
		fmt.Fprintf(logb, "── grader %s\n%s\n", model, tail([]byte(reply), 6000))
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
				return score.Verdict{}, &score.NoVerdict{Reason: fmt.Sprintf("model judge: grader %s did not answer within the scorer's time (scorer_timeout %s)", model, t.ScorerTimeoutD())}
			}
			return score.Verdict{}, err
		}
		gr, err := g.Read(reply)
		if err != nil {
			var nv *score.NoVerdict
			if errors.As(err, &nv) {
				return score.Verdict{}, &score.NoVerdict{Reason: "model judge: grader " + model + ": " + nv.Reason}
			}
			return score.Verdict{}, err
		}
		grades = append(grades, gr)
		replies = append(replies, model+": "+score.Tail([]byte(reply), 600))
	}
	v := g.Vote(grades)
	v.Explanation += "\n" + strings.Join(replies, "\n")
	return v, nil
}

// askGrader sends one grading prompt in the eval set's upstream's wire
// format (gateway.ClientAPI: Anthropic messages, OpenAI chat completions,
// …) and returns the reply's text.
func (e *Executor) askGrader(ctx context.Context, model, prompt string, maxTokens int, token string) (string, error) {
	api := gateway.ClientAPI(e.x.Plan.EvalSet.Model.Upstream)
	path, b := api.Ask(model, prompt, maxTokens)
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(e.x.JudgeURL, "/")+path, bytes.NewReader(b))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		api.Authorize(req.Header, token)
		resp, err := judgeClient.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", sandbox.InfraError(fmt.Errorf("model judge: reach the gateway: %w", err))
		}
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		_ = resp.Body.Close()
		if rerr != nil {
			return "", sandbox.InfraError(fmt.Errorf("model judge: read grader %s's answer: %w", model, rerr))
		}
		if resp.StatusCode == http.StatusTooManyRequests && try < judgeBusyTries {
			wait := time.Second
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(min(s, 60)) * time.Second
			}
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(wait):
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return "", &score.NoVerdict{Reason: fmt.Sprintf("model judge: grader %s answered HTTP %d: %s", model, resp.StatusCode, score.Tail(data, score.TailBytes))}
		}
		text, err := api.Reply(data)
		if err != nil {
			return string(data), &score.NoVerdict{Reason: fmt.Sprintf("model judge: grader %s: %v: %s", model, err, score.Tail(data, score.TailBytes))}
		}
		return text, nil
	}
}

var judgeClient = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8}}
