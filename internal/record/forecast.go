package record

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/status"
)

// ForecastHistory is what a launch's forecast replays (internal/forecast):
// the newest n finished runs of the eval set at evalSet (SameEvalSet) that
// ran attempts of their own, each with its wall time and the span of its
// attempts, and every such attempt's costs. A run whose costs cannot be
// read is passed over.
func (r *DB) ForecastHistory(ctx context.Context, evalSet string, n int) ([]forecast.Run, []forecast.Obs, error) {
	runs, err := r.Runs(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []forecast.Run
	var obs []forecast.Obs
	for _, run := range runs {
		if len(out) >= n {
			break
		}
		if !SameEvalSet(run.EvalSet, evalSet) || run.Status != status.Finished || run.Finished.IsZero() {
			continue
		}
		cs, err := r.Costs(ctx, run.ID)
		if err != nil || len(cs) == 0 {
			continue
		}
		fr, o := forecastRun(run, cs)
		out, obs = append(out, fr), append(obs, o...)
	}
	return out, obs, nil
}

// forecastRun is an earlier run as the forecast replays it: its wall time,
// the span of its attempts, and each attempt's costs.
func forecastRun(r Run, cs []Cost) (forecast.Run, []forecast.Obs) {
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

// SameEvalSet says a run recorded at path recorded ran the eval set at
// current: the same path, or, for a record that moved with its checkout (a
// CI cache restored elsewhere), the same file name at a path that is no
// longer there (as `steward runs EVALSET` reads it).
func SameEvalSet(recorded, current string) bool {
	if recorded == current {
		return true
	}
	if filepath.Base(recorded) != filepath.Base(current) {
		return false
	}
	_, err := os.Stat(recorded)
	return errors.Is(err, os.ErrNotExist)
}
