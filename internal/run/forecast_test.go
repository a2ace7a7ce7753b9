package run

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

// TestForecastFromTheRecord: no history, no forecast; after a run, a new
// fingerprint of the same samples is forecast from it (a point: one run);
// a task never run is counted unknown; a fully carried re-run runs nothing
// and the PLAN line says nothing of a forecast.
func TestForecastFromTheRecord(t *testing.T) {
	dir := t.TempDir()
	yaml := func(rep string, extra bool) string {
		s := `
tasks:
  - name: t
    sandbox: {provider: local}
    exclusive: false
    env: {REP: "` + rep + `"}
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: a, input: "", target: ok}, {id: b, input: "", target: ok}, {id: c, input: "", target: ok}]
`
		if extra {
			s += `  - name: new
    sandbox: {provider: local}
    exclusive: false
    agent: 'echo ok'
    scorer: {match: exact}
    samples: [{id: x, input: "", target: ok}]
`
		}
		return s
	}
	launch := func(body string, dry bool) *Result {
		t.Helper()
		path := write(t, dir, "steward.yaml", body)
		es, err := evalset.Load(path, evalset.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res, err := Launch(context.Background(), Options{EvalSet: es, Dry: dry, Stdout: &out, Providers: factory{&counting{Provider: local.New(local.Options{BaseDir: t.TempDir()})}}})
		if err != nil {
			t.Fatalf("launch: %v", err)
		}
		if dry && !strings.Contains(out.String(), res.Forecast.String()) {
			t.Errorf("--dry does not print the forecast %q:\n%s", res.Forecast.String(), out.String())
		}
		return res
	}
	res := launch(yaml("1", false), true)
	if f := res.Forecast; f.Runs != 0 || f.Attempts != 3 || f.Unknown != 3 || strings.Contains(res.Report.Plan, "forecast") {
		t.Errorf("no history: %+v, plan %q", f, res.Report.Plan)
	}
	launch(yaml("1", false), false)
	res = launch(yaml("2", true), true)
	f := res.Forecast
	if f.Runs != 1 || f.Attempts != 4 || f.Unknown != 1 || f.USD.Known || f.Seconds.Point <= 0 {
		t.Errorf("after one run: %+v", f)
	}
	if !strings.Contains(res.Report.Plan, " · forecast ~$0, ~") || !strings.Contains(res.Report.Plan, "(+1 unknown)") {
		t.Errorf("PLAN %q, want the forecast as its last part", res.Report.Plan)
	}
	res = launch(yaml("1", false), true)
	if f := res.Forecast; f.Attempts != 0 || f.Carried != 3 || strings.Contains(res.Report.Plan, "forecast") {
		t.Errorf("all carried: %+v, plan %q", f, res.Report.Plan)
	}
}
