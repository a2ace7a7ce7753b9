package connsim

import (
	"time"

	"github.com/steward-evals/steward/internal/ramp"
)

// RampTend is a Runner.Tend that drives the real ramp controller r (one
// task) the way the supervisor's tend loop does (internal/tend): at the
// start the samples at once are the ramp's setpoint and the gateway's
// ceiling the ramp's; then, at every tend (window apart, or sooner when
// r.Next says so), the gateway's window (Controller.Window) becomes the
// ramp's signals, the runner's saturation its task signal (withheld while
// the gateway is the bound, as tend.gatewayBound does), and the decision
// moves the samples at once and the ceiling (Clamp, SetCeiling). The
// ramp's rule is r's own; only the reading of the signals is copied here.
// Each decision is passed to record when it is not nil.
func RampTend(r *ramp.Controller, window time.Duration, record func(time.Duration, ramp.Decision)) func(*Tending) time.Duration {
	started := false
	return func(v *Tending) time.Duration {
		if !started {
			started = true
			if c := r.Ceiling(); c > 0 {
				v.Controller.SetCeiling(c)
			}
			v.Samples = r.Setpoints()[0]
			return window
		}
		w := v.Controller.Window()
		g := ramp.Signals{Pushback: w.Pushback || w.Episodes > 0, Retries: v.Retries, Requests: v.Requests,
			ConnLimit: w.Limit, ConnNeed: w.Need}
		// tend.gatewayBound: requests filled the connection limit (or ran
		// at 90 % of the pace) while it sat below its ceiling.
		bound := w.Saturated && w.Ceiling > 0 && w.Limit < w.Ceiling
		d := r.Tend(v.Now, g, []ramp.TaskSignals{{Saturated: v.Saturated && !bound, Errored: v.Errored}})
		v.Samples = d.Setpoints[0]
		if d.Clamp {
			v.Controller.Clamp()
		}
		if d.Ceiling > 0 {
			v.Controller.SetCeiling(d.Ceiling)
		}
		if record != nil {
			record(v.At, d)
		}
		return r.Next(window)
	}
}
