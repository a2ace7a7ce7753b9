package ramp

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/sched"
)

// newClock is the tests' clock; tick moves it a window on and reads it.
func newClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

func tick(c *clock.Fake) time.Time {
	c.Advance(10 * time.Second)
	return c.Now()
}

func specs(n, maxSamples int) []TaskSpec {
	out := make([]TaskSpec, n)
	for i := range out {
		out[i] = TaskSpec{Name: fmt.Sprintf("t%02d", i), MaxSamples: maxSamples}
	}
	return out
}

// saturated is n tasks, all saturated, nothing errored.
func saturated(n int) []TaskSignals {
	out := make([]TaskSignals, n)
	for i := range out {
		out[i].Saturated = true
	}
	return out
}

func mustNew(t *testing.T, cfg Config, tasks []TaskSpec) *Controller {
	t.Helper()
	c, err := New(cfg, tasks)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// quiet is a window with traffic and no trouble.
var quiet = Signals{Requests: 500, Retries: 1, ConnLimit: 80}

// TestSeedClimb: 10 tasks with max_samples unset start at 50 each and climb
// toward 2 000 in all (C4, R1), with the ceiling following (R3).
func TestSeedClimb(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange}, specs(10, 0))
	if got := c.Setpoints(); sum(got) != 500 || got[0] != 50 || got[9] != 50 {
		t.Fatalf("start = %v, want 10 × 50", got)
	}
	var totals []int
	for range 10 {
		d := c.Tend(tick(clk), quiet, saturated(10))
		totals = append(totals, d.Total())
		if d.Ceiling != d.Total() {
			t.Fatalf("ceiling %d does not follow the ramp (total %d)", d.Ceiling, d.Total())
		}
	}
	want := []int{700, 900, 1100, 1300, 1500, 1700, 1900, 2000, 2000, 2000}
	if !reflect.DeepEqual(totals, want) {
		t.Fatalf("totals = %v, want %v", totals, want)
	}
	d, _ := c.Last()
	for _, td := range d.Tasks {
		if td.Action != ActionHold || !strings.Contains(td.Reason, "at the top 200") {
			t.Fatalf("task at the top: %+v", td)
		}
	}
}

// TestFixedMaxSamples: max_samples 100 on 10 tasks runs 1 000 and stays (C5),
// whatever the signals; the gateway is left alone.
func TestFixedMaxSamples(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange}, specs(10, 100))
	for i := range 6 {
		g := quiet
		g.Pushback = i >= 3 // even sustained pushback does not move a fixed task
		d := c.Tend(tick(clk), g, saturated(10))
		if d.Total() != 1000 || d.Ceiling != 0 || d.Clamp {
			t.Fatalf("tend %d: total %d ceiling %d clamp %v, want 1000, 0, false", i, d.Total(), d.Ceiling, d.Clamp)
		}
		for _, td := range d.Tasks {
			if td.Action != ActionFixed || td.Setpoint != 100 {
				t.Fatalf("tend %d: %+v", i, td)
			}
		}
	}
}

// TestRangeClimb: samples_ramp [40, 300] starts at 40 and stops at 300; false stays at 50.
func TestRangeClimb(t *testing.T) {
	cases := []struct {
		name  string
		rng   Range
		want  []int // one task's setpoint: start, then after each tend
		ceil0 bool  // ceiling must stay 0
	}{
		{"40-300", Range{true, 40, 300}, []int{40, 60, 80, 100, 120, 140, 160, 180, 200, 220, 240, 260, 280, 300, 300, 300}, false},
		{"false", Range{}, []int{50, 50, 50, 50, 50}, true},
		{"default", DefaultRange, []int{50, 70, 90, 110, 130, 150, 170, 190, 200, 200}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := mustNew(t, Config{Range: tc.rng}, specs(3, 0))
			got := []int{c.Setpoints()[0]}
			for range len(tc.want) - 1 {
				d := c.Tend(tick(clk), quiet, saturated(3))
				got = append(got, d.Setpoints[0])
				if tc.ceil0 && d.Ceiling != 0 {
					t.Fatalf("ceiling %d with the ramp off", d.Ceiling)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("setpoints %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGates: each failing gate blocks the climb for that window only (R1).
func TestGates(t *testing.T) {
	cases := []struct {
		name   string
		g      Signals
		ts     []TaskSignals
		want   []int // after the blocked window
		reason string
	}{
		{"all pass", quiet, saturated(2), []int{70, 70}, "gates passed"},
		{"not saturated", quiet, []TaskSignals{{Saturated: false}, {Saturated: true}}, []int{50, 70}, "not saturated"},
		{"errored sample", quiet, []TaskSignals{{Saturated: true, Errored: 1}, {Saturated: true}}, []int{50, 70}, "1 sample(s) errored"},
		{"retry surge", Signals{Requests: 100, Retries: 11}, saturated(2), []int{50, 50}, "retry surge (11 retries / 100 requests)"},
		{"retries, no surge", Signals{Requests: 100, Retries: 10}, saturated(2), []int{70, 70}, "gates passed"},
		{"pushback", Signals{Requests: 100, Pushback: true}, saturated(2), []int{50, 50}, "pushback (1 window)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := mustNew(t, Config{Range: DefaultRange}, specs(2, 0))
			d := c.Tend(tick(clk), tc.g, tc.ts)
			if !reflect.DeepEqual(d.Setpoints, tc.want) {
				t.Fatalf("setpoints %v, want %v", d.Setpoints, tc.want)
			}
			if !strings.Contains(d.Tasks[0].Reason, tc.reason) {
				t.Fatalf("task 0 reason %q, want it to mention %q", d.Tasks[0].Reason, tc.reason)
			}
			if d.Signals != tc.g || !reflect.DeepEqual(d.Tasks[0].Signals, tc.ts[0]) {
				t.Fatalf("decision does not carry its signals: %+v", d)
			}
			// The next clean window climbs again: the block lasted one window.
			d = c.Tend(tick(clk), quiet, saturated(2))
			for i, s := range d.Setpoints {
				if s != tc.want[i]+20 {
					t.Fatalf("next window: setpoints %v, want each +20 from %v", d.Setpoints, tc.want)
				}
			}
		})
	}
}

func TestRetrySurge(t *testing.T) {
	cases := []struct {
		retries, requests int
		want              bool
	}{
		{0, 0, false}, {3, 3, false}, {4, 4, true}, {4, 40, false}, {4, 39, true},
		{10, 100, false}, {11, 100, true}, {50, 1000, false}, {101, 1000, true},
	}
	for _, tc := range cases {
		if got := RetrySurge(tc.retries, tc.requests); got != tc.want {
			t.Errorf("RetrySurge(%d, %d) = %v, want %v", tc.retries, tc.requests, got, tc.want)
		}
	}
}

// TestPushbackReverses: one window of pushback holds, two consecutive reverse
// (clamp + step down), each further window steps down again, and a clean
// window between two pushbacks resets the count (R2).
func TestPushbackReverses(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange, Down: DownStep}, specs(2, 0))
	for range 5 { // climb to 150
		c.Tend(tick(clk), quiet, saturated(2))
	}
	push := Signals{Pushback: true, Requests: 300, Retries: 2, ConnLimit: 120}
	steps := []struct {
		g     Signals
		want  int
		clamp bool
		act   Action
	}{
		{push, 150, false, ActionHold}, // first window: no climb, no reversal
		{quiet, 170, false, ActionUp},  // clean window: streak resets, climbs
		{push, 170, false, ActionHold}, // one window again
		{push, 150, true, ActionDown},  // two consecutive: reverse
		{push, 130, true, ActionDown},  // continued: at least one step per window
		{push, 110, true, ActionDown},
		{quiet, 130, false, ActionUp}, // the way back up is stepwise, through the gates
	}
	for i, st := range steps {
		d := c.Tend(tick(clk), st.g, saturated(2))
		if d.Setpoints[0] != st.want || d.Clamp != st.clamp || d.Tasks[0].Action != st.act {
			t.Fatalf("step %d: setpoint %d clamp %v action %s (%s), want %d %v %s",
				i, d.Setpoints[0], d.Clamp, d.Tasks[0].Action, d.Reason, st.want, st.clamp, st.act)
		}
		if st.clamp {
			if d.Ceiling != 120 {
				t.Fatalf("step %d: clamped ceiling %d, want the fallen limit 120", i, d.Ceiling)
			}
			if !strings.Contains(d.Reason, "reverse: pushback in") {
				t.Fatalf("step %d: reason %q", i, d.Reason)
			}
		}
	}
}

// TestClampedCeilingClimbsWithRamp: after a clamp the ceiling stays where the
// gateway's limit fell and rises only as the ramp climbs, until it meets the
// sum of setpoints again (R2, R3).
func TestClampedCeilingClimbsWithRamp(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange, Down: DownStep}, specs(2, 0))
	for range 3 {
		c.Tend(tick(clk), quiet, saturated(2)) // 110 each, 220 total
	}
	push := Signals{Pushback: true, ConnLimit: 100}
	c.Tend(tick(clk), push, saturated(2))
	d := c.Tend(tick(clk), push, saturated(2)) // 90 each, 180 total, ceiling 100
	if d.Total() != 180 || d.Ceiling != 100 || !d.Clamp {
		t.Fatalf("after reversal: total %d ceiling %d clamp %v", d.Total(), d.Ceiling, d.Clamp)
	}
	// Totals climb 220, 260, 300, 340, 380, 400, 400; the ceiling climbs in
	// step with them from 100 and catches up once they stop at the top.
	wantTotal := []int{220, 260, 300, 340, 380, 400, 400, 400}
	wantCeil := []int{140, 180, 220, 260, 300, 340, 380, 400}
	for i := range wantCeil {
		d = c.Tend(tick(clk), quiet, saturated(2))
		if d.Total() != wantTotal[i] || d.Ceiling != wantCeil[i] || d.Clamp {
			t.Fatalf("climb %d: total %d ceiling %d clamp %v, want %d %d", i, d.Total(), d.Ceiling, d.Clamp, wantTotal[i], wantCeil[i])
		}
	}
	if d.Ceiling != d.Total() {
		t.Fatalf("ceiling %d should be back with the total %d", d.Ceiling, d.Total())
	}
}

// TestStepDownPolicies: every policy moves at least one step per window, never below the floor.
func TestStepDownPolicies(t *testing.T) {
	cases := []struct {
		down StepDown
		from int
		lim  int
		want int
	}{
		{DownStep, 200, 100, 180},
		{DownFactor80, 200, 100, 160},
		{DownFactor80, 80, 100, 60}, // ×0.8 = 64, but at least one step
		{DownHalf, 200, 100, 100},
		{DownHalf, 90, 100, 50}, // 45 is below the floor 50
		{DownToLimit, 200, 100, 50},
		{DownToLimit, 200, 500, 180}, // limit above the sum: still one step
		{DownToLimit, 200, 240, 120},
		{DownDefault, 200, 100, 180},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%d/%d", policyName(tc.down), tc.from, tc.lim), func(t *testing.T) {
			clk := newClock()
			c := mustNew(t, Config{Range: Range{true, 50, 400}, Down: tc.down}, specs(2, 0))
			c.sp = []int{tc.from, tc.from}
			push := Signals{Pushback: true, ConnLimit: tc.lim}
			c.Tend(tick(clk), push, saturated(2))
			d := c.Tend(tick(clk), push, saturated(2))
			if d.Setpoints[0] != tc.want || d.Setpoints[1] != tc.want {
				t.Fatalf("setpoints %v, want %d each (%s)", d.Setpoints, tc.want, d.Tasks[0].Reason)
			}
		})
	}
}

// TestFloor: sustained pushback brings a task to its floor and keeps it there.
func TestFloor(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: Range{true, 40, 300}}, specs(1, 0))
	for range 5 {
		c.Tend(tick(clk), quiet, saturated(1))
	}
	push := Signals{Pushback: true, ConnLimit: 10}
	var d Decision
	for range 10 {
		d = c.Tend(tick(clk), push, saturated(1))
	}
	if d.Setpoints[0] != 40 || d.Tasks[0].Action != ActionHold || !strings.Contains(d.Tasks[0].Reason, "at the floor 40") {
		t.Fatalf("after long pushback: %+v", d.Tasks[0])
	}
}

// TestHold: hold blocks the climb with the reason visible in every decision;
// a reversal still steps down; resume releases (R5).
func TestHold(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange, Down: DownStep}, specs(2, 0))
	c.Tend(tick(clk), quiet, saturated(2)) // 70
	c.Hold("provider looks unhappy")
	if r, ok := c.Held(); !ok || r != "provider looks unhappy" {
		t.Fatalf("Held() = %q, %v", r, ok)
	}
	for i := range 3 {
		d := c.Tend(tick(clk), quiet, saturated(2))
		if d.Setpoints[0] != 70 || d.Held != "provider looks unhappy" ||
			!strings.Contains(d.Reason, "held: provider looks unhappy") ||
			!strings.Contains(d.Tasks[0].Reason, "held: provider looks unhappy") || d.Tasks[0].Action != ActionHold {
			t.Fatalf("held tend %d: %+v", i, d)
		}
	}
	push := Signals{Pushback: true, ConnLimit: 50}
	c.Tend(tick(clk), push, saturated(2))
	d := c.Tend(tick(clk), push, saturated(2))
	if d.Setpoints[0] != 50 || !d.Clamp || d.Held == "" {
		t.Fatalf("reversal while held: %+v", d)
	}
	c.Resume()
	d = c.Tend(tick(clk), quiet, saturated(2))
	if d.Setpoints[0] != 70 || d.Held != "" || strings.Contains(d.Reason, "held") {
		t.Fatalf("after resume: %+v", d)
	}
}

// TestNarrowLive: narrowing the range lands at the next tend, not before; a
// bad range is refused and the last good one stays (R4).
func TestNarrowLive(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange}, specs(3, 0))
	for range 8 {
		c.Tend(tick(clk), quiet, saturated(3))
	}
	if got := c.Setpoints(); !reflect.DeepEqual(got, []int{200, 200, 200}) {
		t.Fatalf("climbed to %v", got)
	}
	if err := c.SetRange(Range{true, 300, 100}); err == nil {
		t.Fatal("SetRange accepted [300, 100]")
	}
	if err := c.SetRange(Range{true, 0, 100}); err == nil {
		t.Fatal("SetRange accepted [0, 100]")
	}
	if err := c.SetRange(Range{true, 50, 100}); err != nil {
		t.Fatalf("SetRange: %v", err)
	}
	if cur, pend := c.Range(); cur != DefaultRange || pend == nil || *pend != (Range{true, 50, 100}) {
		t.Fatalf("Range() = %v, %v", cur, pend)
	}
	if got := c.Setpoints(); got[0] != 200 {
		t.Fatalf("narrowing applied before the tend: %v", got)
	}
	d := c.Tend(tick(clk), quiet, saturated(3))
	if !reflect.DeepEqual(d.Setpoints, []int{100, 100, 100}) || d.Tasks[0].Action != ActionCap || d.Range != (Range{true, 50, 100}) {
		t.Fatalf("after narrowing: %+v", d)
	}
	if !strings.Contains(d.Reason, "samples_ramp [50, 200] → [50, 100]") || d.Ceiling != 300 {
		t.Fatalf("reason %q ceiling %d", d.Reason, d.Ceiling)
	}
	d = c.Tend(tick(clk), quiet, saturated(3))
	if d.Setpoints[0] != 100 {
		t.Fatalf("climbed past the new top: %v", d.Setpoints)
	}
	// Turning the ramp off on a live run: back to the start, ceiling left alone.
	if err := c.SetRange(Range{}); err != nil {
		t.Fatal(err)
	}
	d = c.Tend(tick(clk), quiet, saturated(3))
	if !reflect.DeepEqual(d.Setpoints, []int{50, 50, 50}) || d.Ceiling != 0 {
		t.Fatalf("after samples_ramp false: %+v", d)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Range: Range{true, 0, 10}},
		{Range: Range{true, 50, 40}},
		{Range: DefaultRange, Step: -1},
		{Range: DefaultRange, Budget: -5},
	} {
		if _, err := New(cfg, specs(1, 0)); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

// TestBudget: with a sandbox budget, no setpoint climbs above it, and the
// scheduler's split of the budget among the tasks (sched.Split, fed the
// setpoints as caps) never adds up to more than it (C4): equal shares for
// equal work, the room left after capped tasks to the others.
func TestBudget(t *testing.T) {
	cases := []struct {
		name   string
		tasks  []TaskSpec
		budget int
		start  []int
		final  []int
	}{
		{"share below 50", specs(10, 0), 19, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 1}, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 1}},
		{"more tasks than budget", specs(10, 0), 4, []int{1, 1, 1, 1, 0, 0, 0, 0, 0, 0}, []int{1, 1, 1, 1, 0, 0, 0, 0, 0, 0}},
		{"share above 50", specs(4, 0), 500, []int{50, 50, 50, 50}, []int{125, 125, 125, 125}},
		{"uneven room", specs(3, 0), 200, []int{50, 50, 50}, []int{67, 67, 66}},
		{"fixed below its share", []TaskSpec{{"a", 40}, {"b", 0}, {"c", 0}}, 160, []int{40, 50, 50}, []int{40, 60, 60}},
		{"fixed then climb", []TaskSpec{{"a", 100}, {"b", 0}, {"c", 0}}, 400, []int{100, 50, 50}, []int{100, 150, 150}},
		{"budget above the top", specs(2, 0), 1000, []int{50, 50}, []int{200, 200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := mustNew(t, Config{Range: DefaultRange, Budget: tc.budget}, tc.tasks)
			rem := make([]int, len(tc.tasks))
			for i := range rem {
				rem[i] = 1000
			}
			split := func(caps []int) []int {
				got := sched.Split(tc.budget, caps, rem, caps)
				sum := 0
				for i, n := range got {
					sum += n
					if n > caps[i] {
						t.Fatalf("share %d above the setpoint %d", n, caps[i])
					}
				}
				if sum > tc.budget {
					t.Fatalf("shares %v add up to %d, over the budget %d", got, sum, tc.budget)
				}
				return got
			}
			if got := split(c.Setpoints()); !reflect.DeepEqual(got, tc.start) {
				t.Fatalf("start %v, want %v", got, tc.start)
			}
			var d Decision
			for i := range 20 {
				d = c.Tend(tick(clk), quiet, saturated(len(tc.tasks)))
				for _, s := range d.Setpoints {
					if s > tc.budget {
						t.Fatalf("tend %d: setpoint %d over the budget %d", i, s, tc.budget)
					}
				}
				if d.Ceiling > tc.budget {
					t.Fatalf("tend %d: ceiling %d over the budget %d", i, d.Ceiling, tc.budget)
				}
			}
			if got := split(d.Setpoints); !reflect.DeepEqual(got, tc.final) {
				t.Fatalf("final %v, want %v", got, tc.final)
			}
		})
	}
}

// A task held back by its share of the budget, not by its setpoint, does not
// climb, and the decision says why.
func TestBudgetBoundHolds(t *testing.T) {
	c := mustNew(t, Config{Range: DefaultRange, Budget: 8}, specs(2, 0))
	d := c.Tend(tick(newClock()), quiet, []TaskSignals{{BudgetBound: true}, {BudgetBound: true}})
	if d.Setpoints[0] != 8 || d.Tasks[0].Action != ActionHold || d.Tasks[0].Reason != "sandbox budget 8 full" {
		t.Fatalf("%+v", d.Tasks[0])
	}
}

// TestRandomWalk drives the controller with random (seeded) signals, range
// changes and holds, and checks the invariants at every tend.
func TestRandomWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + rng.IntN(8)
		tasks := specs(n, 0)
		for i := range tasks {
			if rng.IntN(4) == 0 {
				tasks[i].MaxSamples = 1 + rng.IntN(60)
			}
		}
		budget := 0
		fixed := 0
		for _, ts := range tasks {
			fixed += ts.MaxSamples
		}
		if rng.IntN(2) == 0 {
			budget = fixed + n + rng.IntN(1500)
		}
		c := mustNew(t, Config{Range: DefaultRange, Budget: budget, Down: allStepDowns[rng.IntN(len(allStepDowns))]}, tasks)
		clk := newClock()
		hi := DefaultHi
		for step := range 200 {
			if rng.IntN(20) == 0 {
				lo := 1 + rng.IntN(80)
				hi = lo + rng.IntN(300)
				_ = c.SetRange(Range{true, lo, hi})
			}
			if rng.IntN(25) == 0 {
				c.Hold("x")
			}
			if rng.IntN(25) == 0 {
				c.Resume()
			}
			g := Signals{Pushback: rng.IntN(3) == 0, Requests: rng.IntN(200), Retries: rng.IntN(30), ConnLimit: 1 + rng.IntN(400)}
			ts := make([]TaskSignals, n)
			for i := range ts {
				ts[i] = TaskSignals{Saturated: rng.IntN(4) != 0, Errored: max(0, rng.IntN(10)-8)}
			}
			before := c.Setpoints()
			_, held := c.Held()
			d := c.Tend(tick(clk), g, ts)
			if budget > 0 && d.Ceiling > budget {
				t.Fatalf("trial %d step %d: ceiling %d over budget %d", trial, step, d.Ceiling, budget)
			}
			for i, s := range d.Setpoints {
				if tasks[i].MaxSamples > 0 && s != tasks[i].MaxSamples {
					t.Fatalf("fixed task moved: %d → %d", tasks[i].MaxSamples, s)
				}
				if budget > 0 && tasks[i].MaxSamples == 0 && s > budget {
					t.Fatalf("trial %d step %d: setpoint %d over budget %d", trial, step, s, budget)
				}
				if s < 1 || (tasks[i].MaxSamples == 0 && s > hi) {
					t.Fatalf("trial %d step %d: setpoint %d outside [1, %d]", trial, step, s, hi)
				}
				if s > before[i] && (held || g.Pushback || !ts[i].Saturated || ts[i].Errored > 0 || d.Surge) {
					t.Fatalf("trial %d step %d: task %d climbed %d → %d through a closed gate: %+v", trial, step, i, before[i], s, d.Tasks[i])
				}
				if s > before[i]+DefaultStep {
					t.Fatalf("climbed more than a step: %d → %d", before[i], s)
				}
			}
			if d.Ceiling != 0 && d.Ceiling > d.Total() {
				t.Fatalf("ceiling %d above the total %d", d.Ceiling, d.Total())
			}
		}
	}
}

func TestConnFixedLeavesGateway(t *testing.T) {
	clk := newClock()
	c := mustNew(t, Config{Range: DefaultRange, Down: DownStep}, specs(2, 0))
	c.Tend(tick(clk), Signals{ConnFixed: true, ConnLimit: 10}, saturated(2))
	push := Signals{Pushback: true, ConnFixed: true, ConnLimit: 10}
	c.Tend(tick(clk), push, saturated(2))
	d := c.Tend(tick(clk), push, saturated(2))
	if d.Ceiling != 0 || d.Clamp || d.Setpoints[0] != 50 {
		t.Fatalf("with max_connections: %+v", d)
	}
}

func TestMixedCeilingCountsFixed(t *testing.T) {
	c := mustNew(t, Config{Range: DefaultRange}, []TaskSpec{{"fixed", 30}, {"ramped", 0}})
	d := c.Tend(tick(newClock()), quiet, saturated(2))
	if !reflect.DeepEqual(d.Setpoints, []int{30, 70}) || d.Ceiling != 100 {
		t.Fatalf("%+v", d)
	}
}

// TestEdgeInputs: no tasks, and fewer task signals than tasks (missing = not saturated).
func TestEdgeInputs(t *testing.T) {
	c := mustNew(t, Config{Range: DefaultRange, Budget: 10}, nil)
	if d := c.Tend(tick(newClock()), quiet, nil); d.Total() != 0 || d.Ceiling != 0 || len(d.Tasks) != 0 {
		t.Fatalf("no tasks: %+v", d)
	}
	c = mustNew(t, Config{Range: DefaultRange}, specs(3, 0))
	d := c.Tend(tick(newClock()), quiet, saturated(1))
	if !reflect.DeepEqual(d.Setpoints, []int{70, 50, 50}) || d.Tasks[2].Reason != "not saturated" {
		t.Fatalf("short signals: %+v", d)
	}
}

// TestConcurrentControl: Hold, Resume and SetRange may come from another
// goroutine while the tend loop runs (run with -race).
func TestConcurrentControl(t *testing.T) {
	c := mustNew(t, Config{Range: DefaultRange}, specs(4, 0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if i%2 == 0 {
				c.Hold("busy")
			} else {
				c.Resume()
			}
			_ = c.SetRange(Range{true, 50, 100 + i})
			_, _ = c.Held()
			_, _ = c.Range()
		}
	}()
	clk := newClock()
	for range 200 {
		c.Tend(tick(clk), quiet, saturated(4))
		_ = c.Setpoints()
		_ = c.Ceiling()
		_, _ = c.Last()
	}
	<-done
}

// In JSON the ramp's value is a task's cap ("caps", "tasks[].cap"), never
// "setpoint", the word for the live share `steward tend` shows beside it; a
// decision an older launch wrote with "setpoints" and "setpoint" still reads.
func TestDecisionJSONNamesTheCaps(t *testing.T) {
	d := Decision{Setpoints: []int{24, 4}, Ceiling: 28, Tasks: []TaskDecision{{Name: "a", Action: ActionUp, From: 4, Setpoint: 24}, {Name: "b", Action: ActionFixed, From: 4, Setpoint: 4}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "setpoint") || !strings.Contains(s, `"caps":[24,4]`) || !strings.Contains(s, `"cap":24`) {
		t.Fatalf("decision JSON %s: want caps and cap, no setpoint", s)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Setpoints, d.Setpoints) || back.Tasks[0].Setpoint != 24 || back.Tasks[1].Setpoint != 4 || back.Ceiling != 28 || back.Tasks[0].Action != ActionUp {
		t.Fatalf("round trip %+v, %v; want %+v", back, err, d)
	}
	old := `{"setpoints":[30,2],"ceiling":9,"tasks":[{"name":"a","action":"up","from":10,"setpoint":30},{"name":"b","action":"fixed","setpoint":2}]}`
	var o Decision
	if err := json.Unmarshal([]byte(old), &o); err != nil || !reflect.DeepEqual(o.Setpoints, []int{30, 2}) || o.Ceiling != 9 || len(o.Tasks) != 2 || o.Tasks[0].Setpoint != 30 || o.Tasks[0].From != 10 || o.Tasks[1].Setpoint != 2 {
		t.Fatalf("old decision read as %+v, %v", o, err)
	}
	both := `{"caps":[5],"setpoints":[7],"tasks":[{"cap":5,"setpoint":7}]}`
	if err := json.Unmarshal([]byte(both), &o); err != nil || o.Setpoints[0] != 5 || o.Tasks[0].Setpoint != 5 {
		t.Fatalf("with both keys %+v, %v: want the new key's 5", o, err)
	}
}
