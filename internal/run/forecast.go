package run

import (
	"context"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/plan"
)

// forecastRuns bounds the earlier runs a forecast replays (the newest).
const forecastRuns = 10

// makeForecast predicts the launch's spend and wall time from the record's
// earlier finished runs of this eval set (internal/forecast): what will run
// (not what carry keeps), on this budget and these task limits. A record
// that cannot be read forecasts nothing: the forecast never stops a launch.
func (ch *chosen) makeForecast(ctx context.Context) forecast.Forecast {
	in := forecast.Input{BudgetUSD: ch.opts.BudgetUSD, MaxRuns: forecastRuns, Cap: ch.forecastCapacity()}
	for _, a := range ch.p.Attempts {
		if a.Action != plan.ActionRun {
			in.Carried++
			continue
		}
		in.Run = append(in.Run, forecast.Attempt{Task: ch.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Model: a.Parts["model"], Lane: a.Lane})
	}
	in.Run = append(in.Run, ch.extraAttempts()...)
	if ch.db == nil || len(in.Run) == 0 {
		return forecast.Predict(in)
	}
	runs, obs, err := ch.db.ForecastHistory(ctx, ch.es.File, forecastRuns)
	if err != nil {
		return forecast.Predict(forecast.Input{Run: in.Run, Carried: in.Carried})
	}
	in.Runs, in.History = runs, obs
	return forecast.Predict(in)
}

// forecastCapacity is the budget and the tasks' limits the run will have:
// max_samples, exclusive providers' 1, or, without a ramp, the starting
// setpoints.
func (ch *chosen) forecastCapacity() forecast.Capacity {
	c := forecast.Capacity{Budget: ch.budget, TaskLimit: map[string]int{}, RampTop: ch.es.Fleet.SamplesRamp.Hi}
	var sp []int
	if !ch.es.Fleet.SamplesRamp.Enabled {
		sp = ch.startSetpoints()
	}
	for i, t := range ch.p.Tasks {
		switch {
		case t.Task.MaxSamples > 0:
			c.TaskLimit[t.Task.Name] = t.Task.MaxSamples
		case i < len(ch.exclusive) && ch.exclusive[i]:
			c.TaskLimit[t.Task.Name] = 1
		case i < len(sp) && sp[i] > 0:
			c.TaskLimit[t.Task.Name] = sp[i]
		}
	}
	return c
}

// extraAttempts are --confirm's attempts, which run too.
func (ch *chosen) extraAttempts() []forecast.Attempt {
	if len(ch.extras) == 0 {
		return nil
	}
	model := map[[2]string]string{}
	for _, a := range ch.p.Attempts {
		model[[2]string{ch.p.Tasks[a.Task].Task.Name, a.Sample.ID}] = a.Parts["model"]
	}
	var out []forecast.Attempt
	for _, x := range ch.extras {
		out = append(out, forecast.Attempt{Task: x.Task, Sample: x.Sample, Model: model[[2]string{x.Task, x.Sample}]})
	}
	return out
}
