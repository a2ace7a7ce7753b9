// Package ramp decides, once per tend window, where each task's sample
// setpoint and the model gateway's connection ceiling should be (rules C4, C5
// and R1–R6 in docs/design.md).
//
// The package is pure and deterministic: it knows nothing of Docker, HTTP,
// the scheduler or the record. The supervisor's tend loop reads the signals
// (from the scheduler and the gateway), calls Controller.Tend once per window,
// applies the returned setpoints to the scheduler and the ceiling to the
// gateway, and stores the Decision as ramp history.
package ramp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Defaults from the seed.
const (
	// DefaultLo is where a ramped task starts (and stays when the ramp is off).
	DefaultLo = 50
	// DefaultHi is the default top of the ramp.
	DefaultHi = 200
	// DefaultStep is how much one passing window adds to a task's setpoint.
	DefaultStep = 20
)

// Range is samples_ramp: [Lo, Hi], or Enabled=false for "never ramp".
type Range struct {
	Enabled bool
	Lo, Hi  int
}

// DefaultRange is samples_ramp's default: start at 50, climb toward 200.
var DefaultRange = Range{Enabled: true, Lo: DefaultLo, Hi: DefaultHi}

// String renders the range the way samples_ramp is written.
func (r Range) String() string {
	if !r.Enabled {
		return "false"
	}
	return fmt.Sprintf("[%d, %d]", r.Lo, r.Hi)
}

// Validate refuses ranges the ramp cannot use. (Parsing samples_ramp and
// STEWARD_SAMPLES_RAMP is evalset's job; the supervisor converts.)
func (r Range) Validate() error {
	if !r.Enabled {
		return nil
	}
	if r.Lo < 1 {
		return fmt.Errorf("samples_ramp %s: low end must be at least 1", r)
	}
	if r.Hi < r.Lo {
		return fmt.Errorf("samples_ramp %s: top must not be below the low end", r)
	}
	return nil
}

// StepDown decides how far a reversal (R2) moves a ramped task down. The
// controller moves a task down by at least one Step per window of continued
// pushback, and never below its floor (the range's low end, or its budget
// share when that is smaller), whatever the policy proposes. Production uses
// DownStep, chosen by measurement (docs/benchmarks.md, "Ramp (simulated)");
// the candidates it was measured against live with the benchmarks
// (stepdown_test.go).
type StepDown interface {
	// String names the policy as reasons and benchmarks print it.
	String() string
	// Next proposes a ramped task's setpoint after a reversal, from from:
	// step is the ramp's Step, cur the sum of the setpoints of the ramped
	// tasks stepping down, fixedSum what fixed tasks hold, g the window's
	// signals.
	Next(from, step, cur, fixedSum int, g Signals) int
}

type stepOne struct{}

func (stepOne) String() string                           { return "-step" }
func (stepOne) Next(from, step, _, _ int, _ Signals) int { return from - step }

// DownStep subtracts one Step: the measured default.
var DownStep StepDown = stepOne{}

// Config is the ramp's fleet-wide configuration.
type Config struct {
	// Range is samples_ramp. The zero value (Enabled=false) never ramps; use
	// DefaultRange for the seed's default.
	Range Range
	// Step is added per passing window (0: DefaultStep).
	Step int
	// Budget is the sandbox budget (0: none, e.g. elastic providers). No
	// setpoint climbs above it, and the connection ceiling never exceeds
	// it. Sharing the budget among the tasks that can run is the
	// scheduler's job (sched.Split): the ramp's setpoint is each task's
	// cap, the scheduler's share never exceeds it.
	Budget int
	// Down is the step-down policy on reversal (nil: DownStep, the measured default).
	Down StepDown
}

// TaskSpec is what the ramp needs to know about a task.
type TaskSpec struct {
	Name string
	// MaxSamples > 0 fixes the task's setpoint exactly; it never ramps (C5).
	MaxSamples int
}

// Signals are the fleet-wide signals of one window (from the model gateway).
type Signals struct {
	// Pushback: a rate-limit episode, or remaining quota near zero, in this window.
	Pushback bool `json:"pushback"`
	// Retries and Requests are the gateway's HTTP retries and upstream
	// requests in this window (for the retry-surge gate, see RetrySurge).
	Retries  int `json:"retries"`
	Requests int `json:"requests"`
	// ConnLimit is the gateway's adaptive connection limit now.
	ConnLimit int `json:"conn_limit"`
	// ConnFixed: max_connections is set, the gateway's limit is not ours to move.
	ConnFixed bool `json:"conn_fixed"`
	// ConnNeed is how many calls in flight the provider's announced rate
	// keeps busy at the measured latency (the gateway's pace × latency; 0:
	// unknown). While the setpoints add up to less, the provider has room
	// the samples do not use, and a passing tend comes sooner (Next).
	ConnNeed int `json:"conn_need,omitempty"`
}

// TaskSignals are one task's signals for one window (from the scheduler).
type TaskSignals struct {
	// Saturated: the task's setpoint (its cap) was full of running
	// attempts while work was queued: the setpoint is what held it back.
	Saturated bool `json:"saturated"`
	// BudgetBound: the task's share of the sandbox budget, below its
	// setpoint, was full while work was queued: the budget held it back,
	// and a higher setpoint would not run more.
	BudgetBound bool `json:"budget_bound,omitempty"`
	// Errored is the number of the task's samples that errored in this window.
	Errored int `json:"errored"`
}

// Action is what a tend did to one task.
type Action string

// Actions, as stored in the ramp history.
const (
	ActionUp    Action = "up"    // climbed (R1)
	ActionHold  Action = "hold"  // stayed: a gate did not pass, or held (R5), or at the top
	ActionDown  Action = "down"  // stepped down on sustained pushback (R2)
	ActionFixed Action = "fixed" // max_samples set, or samples_ramp false (C5, R4)
	ActionCap   Action = "cap"   // brought down to a narrowed range (R4)
)

// TaskDecision is one task's part of a Decision.
//
// In JSON (`steward tend --json`, the events' live state) the ramp's value
// is the task's "cap": "setpoint" is the live share of the budget the task
// may run at (sched.Split), which the cap bounds. A decision written with
// the old key ("setpoint") still reads.
type TaskDecision struct {
	Name     string      `json:"name"`
	Action   Action      `json:"action"`
	From     int         `json:"from"`
	Setpoint int         `json:"cap"` // the ramp's value: the task's cap
	Reason   string      `json:"reason"`
	Signals  TaskSignals `json:"signals"`
}

// Decision is the outcome of one tend (R6): what to apply, and why.
type Decision struct {
	At time.Time `json:"at"`
	// Setpoints, one per task in the order given to New: the ramp's values,
	// the tasks' caps ("caps" in JSON; the old key "setpoints" still reads).
	Setpoints []int `json:"caps"`
	// Ceiling is the connection ceiling the gateway should take
	// (gateway SetCeiling); 0 means leave the gateway alone (no ramp active,
	// or max_connections fixes connections).
	Ceiling int `json:"ceiling"`
	// Clamp: sustained pushback, the gateway should clamp its ceiling to where
	// its adaptive limit already fell (gateway Clamp). Ceiling then equals
	// that limit (as the ramp saw it).
	Clamp bool `json:"clamp"`
	// Held is the hold reason while the climb is held (R5), else "".
	Held string `json:"held,omitempty"`
	// Range is the range in force for this decision.
	Range Range `json:"range"`
	// Streak is the number of consecutive windows with pushback, this one included.
	Streak int `json:"streak"`
	// Surge: HTTP retries surged in this window (see RetrySurge).
	Surge   bool           `json:"surge"`
	Signals Signals        `json:"signals"`
	Reason  string         `json:"reason"`
	Tasks   []TaskDecision `json:"tasks"`
}

// UnmarshalJSON reads a task decision, with the key "setpoint" that
// Steward wrote before "cap" (a live state written by an older launch).
func (t *TaskDecision) UnmarshalJSON(b []byte) error {
	type plain TaskDecision
	var v struct {
		plain
		Cap      *int `json:"cap"`
		Setpoint *int `json:"setpoint"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = TaskDecision(v.plain)
	switch {
	case v.Cap != nil:
		t.Setpoint = *v.Cap
	case v.Setpoint != nil:
		t.Setpoint = *v.Setpoint
	}
	return nil
}

// UnmarshalJSON reads a decision, with the key "setpoints" that Steward
// wrote before "caps".
func (d *Decision) UnmarshalJSON(b []byte) error {
	type plain Decision
	var v struct {
		plain
		Caps      *[]int `json:"caps"`
		Setpoints *[]int `json:"setpoints"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Decision(v.plain)
	switch {
	case v.Caps != nil:
		d.Setpoints = *v.Caps
	case v.Setpoints != nil:
		d.Setpoints = *v.Setpoints
	}
	return nil
}

// Total is the sum of the decision's setpoints.
func (d Decision) Total() int {
	n := 0
	for _, s := range d.Setpoints {
		n += s
	}
	return n
}

// RetrySurge reports whether a window's HTTP retries surged: more than 3
// retries AND more than 10% of the window's requests. A few retries on a busy
// window are normal; a tenth of all traffic being retried is not.
func RetrySurge(retries, requests int) bool {
	return retries > 3 && retries*10 > requests
}

// Controller holds the ramp's state between tends. Its methods are safe for
// concurrent use (Hold and SetRange may come from another goroutine).
type Controller struct {
	mu      sync.Mutex
	step    int
	budget  int
	down    StepDown
	tasks   []TaskSpec
	rng     Range
	pending *Range
	sp      []int
	ceiling int
	clamped bool
	streak  int
	held    bool
	reason  string
	last    *Decision
}

// New makes a controller and computes the starting setpoints (C4, C5).
// It refuses a bad range or step.
func New(cfg Config, tasks []TaskSpec) (*Controller, error) {
	if err := cfg.Range.Validate(); err != nil {
		return nil, fmt.Errorf("new ramp: %w", err)
	}
	if cfg.Step < 0 || cfg.Budget < 0 {
		return nil, errors.New("new ramp: step and budget must not be negative")
	}
	c := &Controller{
		step:   cfg.Step,
		budget: cfg.Budget,
		down:   cfg.Down,
		tasks:  append([]TaskSpec(nil), tasks...),
		rng:    cfg.Range,
	}
	if c.step == 0 {
		c.step = DefaultStep
	}
	if c.down == nil {
		c.down = DownStep
	}
	c.sp = make([]int, len(tasks))
	for i, t := range c.tasks {
		if t.MaxSamples > 0 {
			c.sp[i] = t.MaxSamples
		} else {
			c.sp[i] = c.startOf(i)
		}
	}
	c.ceiling = c.total()
	return c, nil
}

// lo is the low end in force: the range's, or DefaultLo when the ramp is off.
func (c *Controller) lo() int {
	if c.rng.Enabled {
		return c.rng.Lo
	}
	return DefaultLo
}

// startOf is where ramped task i starts, and its floor for step-downs: the
// low end (no more than the budget: a task never runs more than it).
func (c *Controller) startOf(int) int {
	if c.budget > 0 {
		return min(c.lo(), c.budget)
	}
	return c.lo()
}

// total is the sum of the setpoints, no more than the budget: what the
// fleet can run at once, so what the connection ceiling follows (R3).
func (c *Controller) total() int {
	n := 0
	for _, s := range c.sp {
		n += s
	}
	if c.budget > 0 {
		n = min(n, c.budget)
	}
	return n
}

// Setpoints returns the current setpoints, one per task.
func (c *Controller) Setpoints() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.sp...)
}

// Ceiling returns the connection ceiling the ramp currently wants (0 when no
// ramp is active).
func (c *Controller) Ceiling() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active() {
		return 0
	}
	return c.ceiling
}

// Range returns the range in force and the one waiting for the next tend (nil if none).
func (c *Controller) Range() (Range, *Range) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return c.rng, nil
	}
	p := *c.pending
	return c.rng, &p
}

// Last returns the last decision, if any tend has run.
func (c *Controller) Last() (Decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return Decision{}, false
	}
	return *c.last, true
}

// Held returns the hold reason and whether the climb is held.
func (c *Controller) Held() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason, c.held
}

// SetRange changes the range on a live run (R4). It takes effect at the next
// Tend: a task above the new top comes down to it there. A bad range is
// refused and the last good one stays in force.
func (c *Controller) SetRange(r Range) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("set range: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil && r == c.rng {
		return nil
	}
	c.pending = &r
	return nil
}

// Hold freezes the climb until Resume (R5). Step-downs on sustained pushback
// still happen while held. The reason appears in every Decision while held.
func (c *Controller) Hold(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "no reason given"
	}
	c.held, c.reason = true, reason
}

// Resume releases a hold.
func (c *Controller) Resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held, c.reason = false, ""
}

// active: at least one task ramps.
func (c *Controller) active() bool {
	if !c.rng.Enabled {
		return false
	}
	for _, t := range c.tasks {
		if t.MaxSamples == 0 {
			return true
		}
	}
	return false
}

// Tend runs one control step (R1–R5) and returns the decision (R6). ts holds
// one entry per task in the order given to New; a missing entry counts as
// "not saturated, nothing errored". Running samples are never touched: a
// lower setpoint only stops admitting new ones.
func (c *Controller) Tend(now time.Time, g Signals, ts []TaskSignals) Decision {
	c.mu.Lock()
	defer c.mu.Unlock()

	var notes []string
	if c.pending != nil {
		if *c.pending != c.rng {
			notes = append(notes, fmt.Sprintf("samples_ramp %s → %s", c.rng, *c.pending))
		}
		c.rng = *c.pending
		c.pending = nil
	}
	if g.Pushback {
		c.streak++
	} else {
		c.streak = 0
	}
	reverse := c.active() && c.streak >= 2
	surge := RetrySurge(g.Retries, g.Requests)

	d := Decision{
		At: now, Range: c.rng, Streak: c.streak, Surge: surge, Signals: g,
		Tasks: make([]TaskDecision, len(c.tasks)),
	}
	if c.held {
		d.Held = c.reason
	}
	sig := func(i int) TaskSignals {
		if i < len(ts) {
			return ts[i]
		}
		return TaskSignals{}
	}

	fixedSum := 0
	for i, t := range c.tasks {
		if t.MaxSamples > 0 {
			fixedSum += c.sp[i]
		}
	}

	// First pass: fixed tasks, range caps, reversals and the gates.
	want := make([]int, len(c.tasks)) // climb each task asks for
	var down []int                    // ramped tasks to step down
	for i, t := range c.tasks {
		s := sig(i)
		td := TaskDecision{Name: t.Name, From: c.sp[i], Signals: s}
		switch {
		case t.MaxSamples > 0:
			td.Action, td.Reason = ActionFixed, fmt.Sprintf("max_samples %d", t.MaxSamples)
		case !c.rng.Enabled:
			if st := c.startOf(i); c.sp[i] > st {
				c.sp[i] = st
				td.Action, td.Reason = ActionCap, fmt.Sprintf("samples_ramp false: back to %d", st)
			} else {
				td.Action, td.Reason = ActionFixed, "samples_ramp false"
			}
		case c.sp[i] > c.rng.Hi:
			c.sp[i] = c.rng.Hi
			td.Action, td.Reason = ActionCap, fmt.Sprintf("range %s: down to its top %d", c.rng, c.rng.Hi)
		case reverse:
			down = append(down, i)
			td.Action = ActionDown
		default:
			td.Action = ActionHold
			var why []string
			if c.held {
				why = append(why, "held: "+c.reason)
			}
			if !s.Saturated && s.BudgetBound {
				why = append(why, fmt.Sprintf("sandbox budget %d full", c.budget))
			} else if !s.Saturated {
				why = append(why, "not saturated")
			}
			if g.Pushback {
				why = append(why, "pushback (1 window)")
			}
			if s.Errored > 0 {
				why = append(why, fmt.Sprintf("%d sample(s) errored", s.Errored))
			}
			if surge {
				why = append(why, fmt.Sprintf("retry surge (%d retries / %d requests)", g.Retries, g.Requests))
			}
			if len(why) == 0 && c.sp[i] >= c.rng.Hi {
				why = append(why, fmt.Sprintf("at the top %d", c.rng.Hi))
			}
			if len(why) == 0 {
				want[i] = min(c.step, c.rng.Hi-c.sp[i])
				td.Action = ActionUp
			}
			td.Reason = strings.Join(why, "; ")
		}
		d.Tasks[i] = td
	}

	// Step-downs (R2).
	if len(down) > 0 {
		c.stepDown(down, g, fixedSum, d.Tasks)
	}

	// Climbs (R1), never above the budget.
	climbed := c.climb(want)
	for i := range d.Tasks {
		if d.Tasks[i].Action == ActionUp {
			if climbed[i] == 0 {
				d.Tasks[i].Action = ActionHold
				d.Tasks[i].Reason = fmt.Sprintf("at the sandbox budget %d", c.budget)
			} else {
				d.Tasks[i].Reason = fmt.Sprintf("gates passed: +%d", climbed[i])
			}
		}
	}

	// The connection ceiling follows the ramp (R3), clamped on reversal (R2).
	sum := c.total()
	up, nRamped := 0, 0
	for i, n := range climbed {
		up += n
		if c.tasks[i].MaxSamples == 0 {
			nRamped++
		}
	}
	if !g.Pushback {
		// A clean window lifts a clamped ceiling by at least one step per
		// ramped task, so it catches up once the setpoints stop climbing.
		up = max(up, c.step*nRamped)
	}
	switch {
	case reverse && g.ConnLimit > 0 && !g.ConnFixed:
		c.ceiling = min(sum, g.ConnLimit)
		c.clamped = true
		d.Clamp = true
	case c.clamped:
		c.ceiling = min(sum, c.ceiling+up)
		if c.ceiling >= sum {
			c.clamped = false
		}
	default:
		c.ceiling = sum
	}
	if c.active() && !g.ConnFixed {
		d.Ceiling = c.ceiling
	}

	for i := range d.Tasks {
		d.Tasks[i].Setpoint = c.sp[i]
	}
	d.Setpoints = append([]int(nil), c.sp...)
	d.Reason = c.summary(d, notes, reverse)
	c.last = &d
	return d
}

// EarlyDivisor is how much sooner than the window a tend comes while the
// provider has room (Next).
const EarlyDivisor = 4

// Next is how long until the next tend, for a window of window: the window
// itself, or a quarter of it (at least 100 ms) when the last tend climbed
// with every gate passing — some task saturated, no pushback, no errored
// sample, no retry surge, not held — and the gateway said the provider
// keeps more calls busy than the setpoints add up to (Signals.ConnNeed).
// The gates and the step are the seed's (R1); only the wait between two
// tends that pass them shortens, while a known-idle provider waits for the
// samples. A provider that is already full says no room (its need is what
// the samples already fill), so the ramp keeps its window there; and the
// tend after a shortened window judges its own, shorter window, through
// the same gates.
func (c *Controller) Next(window time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.early() {
		return max(window/EarlyDivisor, 100*time.Millisecond)
	}
	return window
}

// early reports whether the last decision lets the next tend come sooner.
func (c *Controller) early() bool {
	d := c.last
	if d == nil || c.held || d.Held != "" || d.Surge || d.Signals.Pushback || d.Streak > 0 || !c.active() {
		return false
	}
	if d.Signals.ConnNeed <= 0 || d.Total() >= d.Signals.ConnNeed {
		return false
	}
	for _, t := range d.Tasks {
		if t.Action == ActionUp {
			return true
		}
	}
	return false
}

// stepDown moves the listed ramped tasks down by the configured policy: at
// least one step each, never below their floor.
func (c *Controller) stepDown(idx []int, g Signals, fixedSum int, tds []TaskDecision) {
	cur := 0
	for _, i := range idx {
		cur += c.sp[i]
	}
	for _, i := range idx {
		from := c.sp[i]
		to := min(c.down.Next(from, c.step, cur, fixedSum, g), from-c.step)
		floor := c.startOf(i)
		why := fmt.Sprintf("pushback in %d consecutive windows: %s", c.streak, c.down)
		if to < floor {
			to = floor
			why += fmt.Sprintf(", floor %d", floor)
		}
		if to > from { // already below its floor (the low end rose): stay
			to = from
		}
		if to == from {
			tds[i].Action = ActionHold
			why = fmt.Sprintf("pushback in %d consecutive windows; at the floor %d", c.streak, from)
		}
		c.sp[i] = to
		tds[i].Reason = why
	}
}

// climb applies the wanted climbs, none above the budget. The budget is
// shared among the tasks that can run by the scheduler (sched.Split), not
// here: a setpoint is a cap, and a task whose share of the budget holds it
// back is not saturated (TaskSignals.BudgetBound) and does not climb.
func (c *Controller) climb(want []int) []int {
	got := make([]int, len(want))
	for i, w := range want {
		if c.budget > 0 {
			w = min(w, c.budget-c.sp[i])
		}
		if w > 0 {
			c.sp[i] += w
			got[i] = w
		}
	}
	return got
}

// summary is the decision's one-line reason.
func (c *Controller) summary(d Decision, notes []string, reverse bool) string {
	counts := map[Action]int{}
	for _, t := range d.Tasks {
		counts[t.Action]++
	}
	parts := append([]string(nil), notes...)
	if !c.active() {
		if !c.rng.Enabled {
			parts = append(parts, "ramp off (samples_ramp false)")
		} else {
			parts = append(parts, "no ramped task (max_samples set everywhere)")
		}
	}
	if reverse {
		s := fmt.Sprintf("reverse: pushback in %d consecutive windows", d.Streak)
		if d.Clamp {
			s += fmt.Sprintf("; connection ceiling clamped to %d", d.Ceiling)
		}
		parts = append(parts, s)
	} else if d.Signals.Pushback && c.rng.Enabled {
		parts = append(parts, "pushback (1 window): no climb")
	}
	if d.Held != "" {
		parts = append(parts, "held: "+d.Held)
	}
	if d.Surge {
		parts = append(parts, fmt.Sprintf("retry surge (%d retries / %d requests)", d.Signals.Retries, d.Signals.Requests))
	}
	var acts []string
	for _, a := range []Action{ActionUp, ActionDown, ActionCap, ActionHold, ActionFixed} {
		if counts[a] > 0 {
			acts = append(acts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	parts = append(parts, strings.Join(acts, ", "))
	s := strings.Join(parts, "; ")
	if d.Ceiling > 0 {
		s += fmt.Sprintf("; total %d, ceiling %d", d.Total(), d.Ceiling)
	} else {
		s += fmt.Sprintf("; total %d", d.Total())
	}
	return s
}
