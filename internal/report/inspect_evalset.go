package report

import (
	"os"

	"github.com/steward-evals/steward/internal/evalset"
)

// InspectOptionsFor reads what an Inspect export needs of the eval set at
// path (a file or a directory holding steward.yaml): each sample's input,
// target, choices and metadata (the record keeps ids only), each task's
// scorer and agent, and the model. An eval set that is missing or does not
// load gives empty options (the export then takes inputs from the
// transcripts) and the reason.
func InspectOptionsFor(path string, getenv func(string) string) (InspectOptions, error) {
	opts := InspectOptions{Samples: map[string]InspectSample{}, Tasks: map[string]InspectTask{}}
	if path == "" {
		path = evalset.DefaultFileName
	}
	if _, err := os.Stat(path); err != nil {
		return opts, err
	}
	es, err := evalset.Load(path, evalset.LoadOptions{Getenv: getenv})
	if err != nil {
		return opts, err
	}
	return inspectOptionsOf(es, path), nil
}

func inspectOptionsOf(es *evalset.EvalSet, path string) InspectOptions {
	opts := InspectOptions{Samples: map[string]InspectSample{}, Tasks: map[string]InspectTask{}}
	if name := es.Model.Name; name != "" {
		switch es.Model.Upstream {
		case "openai", "anthropic":
			opts.Model = es.Model.Upstream + "/" + name
		default: // the built-in mock
			opts.Model = "mockllm/" + name
		}
	}
	opts.ModelBaseURL = es.Model.BaseURL
	for _, t := range es.Tasks {
		scorer := "steward"
		switch {
		case t.Scorer.Command != "":
			scorer = "command"
		case t.Scorer.Match != "":
			scorer = string(t.Scorer.Match)
		}
		it := InspectTask{Scorer: scorer, Agent: t.Agent, File: path}
		if l := t.Limits; l != nil {
			it.Limits = InspectLimits{Tokens: l.Tokens, Calls: l.ModelCalls, CostUSD: l.CostUSD}
		}
		it.Limits.AgentTime = t.AgentTimeoutD() // every agent has its time (timeout's default too)
		opts.Tasks[t.Name] = it
		for _, s := range t.Samples {
			var target any
			switch s.Target.(type) {
			case nil:
			case string:
				target = s.Target
			default:
				target = s.Targets()
			}
			opts.Samples[InspectKey(t.Name, s.ID)] = InspectSample{Input: s.Input, Target: target, Choices: s.Choices, Metadata: s.Metadata}
		}
	}
	return opts
}
