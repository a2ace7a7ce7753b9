package forecast

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func obs(run, task, sample string, usd, sec float64) Obs {
	return Obs{Run: run, Task: task, Sample: sample, Model: "m", USD: usd, Tokens: 100, Requests: 2, Seconds: sec}
}

func TestPredict(t *testing.T) {
	two := []Attempt{{Task: "t", Sample: "a", Model: "m"}, {Task: "t", Sample: "b", Model: "m"}}
	runs3 := []Run{{ID: "r3", WallSeconds: 12, AttemptsSpanSeconds: 10}, {ID: "r2", WallSeconds: 10, AttemptsSpanSeconds: 10}, {ID: "r1", WallSeconds: 10, AttemptsSpanSeconds: 10}}
	hist3 := []Obs{obs("r1", "t", "a", 1, 4), obs("r1", "t", "b", 1, 4), obs("r2", "t", "a", 2, 5), obs("r2", "t", "b", 2, 5), obs("r3", "t", "a", 3, 6), obs("r3", "t", "b", 3, 6)}
	for _, tc := range []struct {
		name       string
		in         Input
		usd, sec   float64
		known      bool
		unknown    int
		runs       int
		line, note string
	}{
		{name: "nothing runs", in: Input{Carried: 4}, known: true, line: "forecast $0 · 0s (nothing runs)"},
		{name: "no history", in: Input{Run: two}, unknown: 2, line: "forecast unknown", note: "spend and time unknown"},
		{name: "history at another model does not count", in: Input{Run: two, History: []Obs{{Run: "r1", Task: "t", Sample: "a", Model: "other", USD: 1, Seconds: 1}}, Runs: []Run{{ID: "r1"}}},
			unknown: 2, line: "forecast unknown"},
		{name: "one run: a point, range unknown", in: Input{Run: two, History: hist3[:2], Runs: []Run{{ID: "r1", WallSeconds: 5, AttemptsSpanSeconds: 4}}, Cap: Capacity{Budget: 2}},
			usd: 2, sec: 5, runs: 1, line: "forecast $2.00 · 5.0s · from 1 run (range unknown)", note: "one earlier run"},
		{name: "three runs: mean and prediction interval", in: Input{Run: two, History: hist3, Runs: runs3, Cap: Capacity{Budget: 2}},
			usd: 4, sec: 5 + 2.0/3, known: true, runs: 3, line: "from 3 runs"},
		{name: "a new sample of a known task takes the task's mean", in: Input{Run: []Attempt{{Task: "t", Sample: "new", Model: "m"}}, History: hist3[:2], Runs: runs3[2:], Cap: Capacity{Budget: 1}},
			usd: 1, sec: 4, runs: 1},
		{name: "an unknown task is counted, not guessed", in: Input{Run: append([]Attempt{{Task: "u", Sample: "x", Model: "m"}}, two...), History: hist3[:2], Runs: runs3[2:], Cap: Capacity{Budget: 2}},
			usd: 2, sec: 4, runs: 1, unknown: 1, line: "1 attempts unknown"},
		{name: "the provider's rate bounds the time", in: Input{Run: two, History: hist3[:2], Runs: runs3[2:], Cap: Capacity{Budget: 2, RPM: 1}},
			usd: 2, sec: 240, runs: 1},
		{name: "over budget", in: Input{Run: two, History: hist3[:2], Runs: runs3[2:], BudgetUSD: 1},
			usd: 2, sec: 4, runs: 1, line: "over budget", note: "over the $1.00 budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Predict(tc.in)
			if !near(f.USD.Point, tc.usd) || !near(f.Seconds.Point, tc.sec) {
				t.Errorf("point $%v %vs, want $%v %vs", f.USD.Point, f.Seconds.Point, tc.usd, tc.sec)
			}
			if f.USD.Known != tc.known || f.Unknown != tc.unknown || f.Runs != tc.runs {
				t.Errorf("known %v unknown %d runs %d, want %v %d %d", f.USD.Known, f.Unknown, f.Runs, tc.known, tc.unknown, tc.runs)
			}
			if !strings.Contains(f.String(), tc.line) {
				t.Errorf("line %q, want it to hold %q", f.String(), tc.line)
			}
			if tc.note != "" && !strings.Contains(strings.Join(f.Notes, "; "), tc.note) {
				t.Errorf("notes %q, want %q", f.Notes, tc.note)
			}
		})
	}
}

// TestPredictInterval checks the interval against the t prediction interval
// worked by hand: totals 2, 4, 6 → mean 4, sd 2, t(2)=4.303, √(1+1/3).
func TestPredictInterval(t *testing.T) {
	two := []Attempt{{Task: "t", Sample: "a", Model: "m"}, {Task: "t", Sample: "b", Model: "m"}}
	hist := []Obs{obs("r1", "t", "a", 1, 4), obs("r1", "t", "b", 1, 4), obs("r2", "t", "a", 2, 5), obs("r2", "t", "b", 2, 5), obs("r3", "t", "a", 3, 6), obs("r3", "t", "b", 3, 6)}
	f := Predict(Input{Run: two, History: hist, Runs: []Run{{ID: "r1"}, {ID: "r2"}, {ID: "r3"}}, Cap: Capacity{Budget: 2}})
	w := 4.303 * 2 * math.Sqrt(1+1.0/3)
	if !near(f.USD.Lo, 0) || !near(f.USD.Hi, 4+w) {
		t.Errorf("usd %+v, want 0 (clipped) to %v", f.USD, 4+w)
	}
	if !f.USD.Contains(4) || f.USD.Contains(4+w+0.1) {
		t.Errorf("Contains is wrong for %+v", f.USD)
	}
}

func TestMakespan(t *testing.T) {
	four := func(task, lane string) []Attempt {
		var as []Attempt
		for _, s := range []string{"a", "b", "c", "d"} {
			as = append(as, Attempt{Task: task, Sample: s, Lane: lane})
		}
		return as
	}
	d4 := []float64{3, 3, 3, 3}
	for _, tc := range []struct {
		name string
		as   []Attempt
		durs []float64
		cap  Capacity
		want float64
	}{
		{"budget 2", four("t", ""), d4, Capacity{Budget: 2}, 6},
		{"unbounded", four("t", ""), d4, Capacity{}, 3},
		{"task limit 1", four("t", ""), d4, Capacity{Budget: 4, TaskLimit: map[string]int{"t": 1}}, 12},
		{"one lane is serial", four("t", "t/g"), d4, Capacity{Budget: 4}, 12},
		{"unknown left out", four("t", ""), []float64{3, -1, -1, -1}, Capacity{Budget: 1}, 3},
		// C7 counts rounds, not seconds: the four-attempt task goes first.
		{"most rounds first", append(four("slow", ""), Attempt{Task: "fast", Sample: "x"}), []float64{2, 2, 2, 2, 8}, Capacity{Budget: 2}, 12},
		{"longest job bounds", []Attempt{{Task: "t", Sample: "a"}, {Task: "t", Sample: "b"}}, []float64{10, 1}, Capacity{Budget: 8}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Makespan(tc.as, tc.durs, tc.cap); !near(got, tc.want) {
				t.Errorf("makespan %v, want %v", got, tc.want)
			}
		})
	}
}
