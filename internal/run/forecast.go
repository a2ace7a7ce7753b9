package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/status"
)

// forecastRuns bounds the earlier runs a forecast replays (the newest).
const forecastRuns = 10

// makeForecast predicts the launch's spend and wall time from the record's
// earlier finished runs of this eval set (internal/forecast): what will run
// (not what carry keeps), on this budget and these task limits. A record
// that cannot be read forecasts nothing: the forecast never stops a launch.
func (l *launcher) makeForecast(ctx context.Context) forecast.Forecast {
	in := forecast.Input{BudgetUSD: l.opts.BudgetUSD, MaxRuns: forecastRuns}
	in.Cap = forecast.Capacity{Budget: l.budget, TaskLimit: map[string]int{}, RampTop: l.es.Fleet.SamplesRamp.Hi}
	var sp []int
	if !l.es.Fleet.SamplesRamp.Enabled {
		sp = l.startSetpoints()
	}
	for i, t := range l.p.Tasks {
		switch {
		case t.Task.MaxSamples > 0:
			in.Cap.TaskLimit[t.Task.Name] = t.Task.MaxSamples
		case i < len(l.exclusive) && l.exclusive[i]:
			in.Cap.TaskLimit[t.Task.Name] = 1
		case i < len(sp) && sp[i] > 0:
			in.Cap.TaskLimit[t.Task.Name] = sp[i]
		}
	}
	for _, a := range l.p.Attempts {
		if a.Action != plan.ActionRun {
			in.Carried++
			continue
		}
		in.Run = append(in.Run, forecast.Attempt{Task: l.p.Tasks[a.Task].Task.Name, Sample: a.Sample.ID, Model: a.Parts["model"], Lane: a.Lane})
	}
	in.Run = append(in.Run, l.extraAttempts()...)
	if l.db == nil || len(in.Run) == 0 {
		return forecast.Predict(in)
	}
	runs, err := l.db.Runs(ctx)
	if err != nil {
		return forecast.Predict(forecast.Input{Run: in.Run, Carried: in.Carried})
	}
	for _, r := range runs {
		if len(in.Runs) >= forecastRuns {
			break
		}
		if !sameEvalSet(r.EvalSet, l.es.File) || r.Status != status.Finished || r.Finished.IsZero() {
			continue
		}
		cs, err := l.db.Costs(ctx, r.ID)
		if err != nil || len(cs) == 0 {
			continue
		}
		fr := forecast.Run{ID: r.ID, WallSeconds: r.Finished.Sub(r.Started).Seconds()}
		var first, last int64
		for _, c := range cs {
			var parts map[string]string
			_ = json.Unmarshal([]byte(c.Parts), &parts)
			in.History = append(in.History, forecast.Obs{Run: r.ID, Task: c.Task, Sample: c.Sample, Model: parts["model"],
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
		in.Runs = append(in.Runs, fr)
	}
	return forecast.Predict(in)
}

// extraAttempts are --confirm's attempts, which run too.
func (l *launcher) extraAttempts() []forecast.Attempt {
	if len(l.extras) == 0 {
		return nil
	}
	model := map[[2]string]string{}
	for _, a := range l.p.Attempts {
		model[[2]string{l.p.Tasks[a.Task].Task.Name, a.Sample.ID}] = a.Parts["model"]
	}
	var out []forecast.Attempt
	for _, x := range l.extras {
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
