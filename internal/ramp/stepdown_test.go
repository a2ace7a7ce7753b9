package ramp

import "math"

// The step-down candidates DownStep was chosen against (BenchmarkRampStepDown,
// docs/benchmarks.md): test and benchmark code only.

type stepFunc struct {
	name string
	next func(from, step, cur, fixedSum int, g Signals) int
}

func (f stepFunc) String() string { return f.name }
func (f stepFunc) Next(from, step, cur, fixedSum int, g Signals) int {
	return f.next(from, step, cur, fixedSum, g)
}

var (
	// DownDefault is the zero Config.Down: the controller uses DownStep.
	DownDefault StepDown
	// DownFactor80 multiplies by 0.8.
	DownFactor80 StepDown = stepFunc{"x0.8", func(from, _, _, _ int, _ Signals) int {
		return int(math.Floor(float64(from) * 0.8))
	}}
	// DownHalf multiplies by 0.5.
	DownHalf StepDown = stepFunc{"x0.5", func(from, _, _, _ int, _ Signals) int { return from / 2 }}
	// DownToLimit brings the sum of ramped setpoints down to the gateway's
	// observed connection limit (less what fixed tasks hold), shared in
	// proportion to the current setpoints.
	DownToLimit StepDown = stepFunc{"to-limit", func(from, _, cur, fixedSum int, g Signals) int {
		target := g.ConnLimit - fixedSum
		if g.ConnLimit <= 0 || g.ConnFixed || cur == 0 {
			return int(math.Floor(float64(from) * 0.8))
		}
		return int(math.Floor(float64(from) * float64(max(target, 0)) / float64(cur)))
	}}
	// allStepDowns are every policy, the default (nil) first.
	allStepDowns = []StepDown{DownDefault, DownStep, DownFactor80, DownHalf, DownToLimit}
)

// policyName names a policy, the default included.
func policyName(d StepDown) string {
	if d == nil {
		return "default (" + DownStep.String() + ")"
	}
	return d.String()
}
