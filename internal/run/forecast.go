package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/status"
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
	runs, err := ch.db.Runs(ctx)
	if err != nil {
		return forecast.Predict(forecast.Input{Run: in.Run, Carried: in.Carried})
	}
	for _, r := range runs {
		if len(in.Runs) >= forecastRuns {
			break
		}
		if !sameEvalSet(r.EvalSet, ch.es.File) || r.Status != status.Finished || r.Finished.IsZero() {
			continue
		}
		cs, err := ch.db.Costs(ctx, r.ID)
		if err != nil || len(cs) == 0 {
			continue
		}
		fr, obs := forecastRun(r, cs)
		in.Runs, in.History = append(in.Runs, fr), append(in.History, obs...)
	}
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

// forecastRun is an earlier run as the forecast replays it: its wall time,
// the span of its attempts, and each attempt's costs.
func forecastRun(r record.Run, cs []record.Cost) (forecast.Run, []forecast.Obs) {
	fr := forecast.Run{ID: r.ID, WallSeconds: r.Finished.Sub(r.Started).Seconds()}
	var obs []forecast.Obs
	var first, last int64
	for _, c := range cs {
		var parts map[string]string
		_ = json.Unmarshal([]byte(c.Parts), &parts)
		obs = append(obs, forecast.Obs{Run: r.ID, Task: c.Task, Sample: c.Sample, Model: parts["model"],
			USD: c.USD, Tokens: c.Tokens, Requests: c.Requests, Seconds: c.Duration.Seconds()})
		if s := c.Started.UnixNano(); !c.Started.IsZero() && (first == 0 || s < first) {
			first = s
		}
		if e := c.Ended.UnixNano(); !c.Ended.IsZero() && e > last {
			last = e
		}
	}
	if first > 0 && last > first {
		fr.AttemptsSpanSeconds = float64(last-first) / 1e9
	}
	return fr, obs
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

// sameEvalSet says a run recorded at path recorded ran the eval set at
// current: the same path, or, for a record that moved with its checkout (a
// CI cache restored elsewhere), the same file name at a path that is no
// longer there (as `steward runs EVALSET` reads it).
func sameEvalSet(recorded, current string) bool {
	if recorded == current {
		return true
	}
	if filepath.Base(recorded) != filepath.Base(current) {
		return false
	}
	_, err := os.Stat(recorded)
	return errors.Is(err, os.ErrNotExist)
}
