package report

import (
	"fmt"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// Every status Steward has, and every limit, maps to Inspect's sample:
// judged attempts (passed, failed, carried, and those that reached a limit
// under on_limit: score or fail) have a score; errored, infra and
// interrupted ones an error; skipped ones neither; an attempt that reached
// a limit has Inspect's sample limit (EvalSampleLimit: token, message,
// cost, time) with the task's limit as its value, the summary names its
// type, and the eval's config holds the task's limits as Inspect's
// token_limit, message_limit, cost_limit and time_limit. Without the eval
// set the value is what the attempt had used.
func TestInspectSampleLimits(t *testing.T) {
	rep := inspectFixture()
	run := rep.RunIDs[0]
	row := func(id string, st status.Attempt, limit string, timedOut bool) AttemptRow {
		a := AttemptRow{Task: "fast", Sample: id, Attempt: 1, Status: st, Run: run, Limit: limit, TimedOut: timedOut,
			InputTokens: 900, OutputTokens: 300, CostUSD: 0.0042, Duration: 95 * time.Second, Answer: "partial"}
		switch st {
		case status.Passed:
			a.Score = ptr(1.0)
		case status.Failed:
			a.Score, a.Explanation = ptr(0.0), "limit: "+limit+" (on_limit: fail)"
		case status.Errored:
			a.Reason = "limit: " + limit + ": the gateway refused 1 of the attempt's model calls at its limit (on_limit: error)"
		}
		return a
	}
	rep.Attempts = append(rep.Attempts,
		row("lim-tokens", status.Passed, "tokens", false),
		row("lim-calls", status.Failed, "model_calls", false),
		row("lim-cost", status.Errored, "cost_usd", false),
		row("lim-deadline", status.Passed, "agent_time", true),
	)
	rep.Recount()
	want := map[string]struct {
		typ       string
		limit     float64 // with the eval set's limits
		used      float64 // without
		judged    bool
		errored   bool
		timedOut  bool
		stewardLm string
	}{
		"lim-tokens#1":   {"token", 1000, 1200, true, false, false, "tokens"},
		"lim-calls#1":    {"message", 8, 0, true, false, false, "model_calls"},
		"lim-cost#1":     {"cost", 0.004, 0.0042, false, true, false, "cost_usd"},
		"lim-deadline#1": {"time", 90, 95, true, false, true, "agent_time"},
	}
	for _, withLimits := range []bool{true, false} {
		for _, format := range []string{InspectEval, InspectJSON} {
			opts := inspectOptions()
			opts.Format = format
			if withLimits {
				ft := opts.Tasks["fast"]
				ft.Limits = InspectLimits{Tokens: 1000, Calls: 8, CostUSD: 0.004, AgentTime: 90 * time.Second}
				opts.Tasks["fast"] = ft
			}
			byTask := map[string]parsedLog{}
			seen := map[status.Attempt]bool{}
			carried := false
			for _, l := range exportInspect(t, rep, opts) {
				byTask[l.Task] = checkInspectLog(t, l.Name, l.Data) // Inspect's shapes, limit included
			}
			fast := byTask["fast"]
			for _, a := range rep.Attempts {
				key := fmt.Sprintf("%s#%d", a.Sample, a.Attempt)
				name := fmt.Sprintf("%s limits %v %s", format, withLimits, key)
				s := byTask[a.Task].samples[key]
				if s == nil {
					t.Fatalf("%s: not in the export", name)
				}
				seen[a.Status] = true
				carried = carried || a.Carried
				_, judged := judgedOutcome(a.Status)
				if scores, _ := s["scores"].(map[string]any); judged != (len(scores) == 1) {
					t.Errorf("%s (%s): scores %v", name, a.Status, s["scores"])
				}
				isErr := a.Status == status.Errored || a.Status == status.Infra || a.Status == status.Interrupted
				if (s["error"] != nil) != isErr {
					t.Errorf("%s (%s): error %v", name, a.Status, s["error"])
				}
				w, limited := want[key]
				if a.Task != "fast" {
					limited = false
				}
				if !limited {
					if a.Reason != "agent timed out (task timeout 30s)" && s["limit"] != nil {
						t.Errorf("%s (%s): a limit %v it never reached", name, a.Status, s["limit"])
					}
					continue
				}
				lim, _ := s["limit"].(map[string]any)
				value := w.limit
				if !withLimits {
					value = w.used
				}
				if lim["type"] != w.typ || lim["limit"] != value {
					t.Errorf("%s: limit %v, want {type: %s, limit: %v}", name, s["limit"], w.typ, value)
				}
				if sum := byTask[a.Task].summaries[key]; format == InspectEval && sum["limit"] != w.typ {
					t.Errorf("%s: summary limit %v, want %s", name, sum["limit"], w.typ)
				}
				st := s["metadata"].(map[string]any)["steward"].(map[string]any)
				if st["limit"] != w.stewardLm || (st["timed_out"] == true) != w.timedOut {
					t.Errorf("%s: steward metadata limit %v timed_out %v", name, st["limit"], st["timed_out"])
				}
			}
			for _, st := range status.Attempts {
				if !seen[st] {
					t.Errorf("the fixture has no %s attempt", st)
				}
			}
			if !carried {
				t.Error("the fixture has no carried attempt")
			}
			cfg := fast.header["eval"].(map[string]any)["config"].(map[string]any)
			if withLimits && (cfg["token_limit"] != 1000.0 || cfg["message_limit"] != 8.0 || cfg["cost_limit"] != 0.004 || cfg["time_limit"] != 90.0) {
				t.Errorf("%s: eval config %v lacks the task's limits", format, cfg)
			}
			if !withLimits && (cfg["token_limit"] != nil || cfg["time_limit"] != nil) {
				t.Errorf("%s: eval config %v has limits nobody set", format, cfg)
			}
		}
	}
}
