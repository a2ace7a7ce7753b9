package ramp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// earlyRun is a small time-stepped model of one task ramping against a
// provider paced at rate calls a second (the gateway holds the pace), each
// sample making calls calls of lat seconds one after another: how long
// the work takes with the seed's window between tends, or with Next.
type earlyRun struct {
	rate     float64
	lat      float64
	samples  int
	calls    int
	window   float64
	useEarly bool
}

type earlyOut struct {
	makespan, ideal float64
	// waiting is the mean number of samples whose call waited for the
	// pace (sandboxes paid for and idle); top the highest setpoint.
	waiting float64
	top     int
	tends   int
	// full is when the admissions of the last window-long stretch first
	// reached 90 % of the rate (-1: never).
	full float64
}

func (e earlyRun) run() earlyOut {
	const dt = 0.01
	c, _ := New(Config{Range: DefaultRange}, specs(1, 0))
	type sample struct {
		left  int
		until float64 // call ends at; 0: waiting for the pace
	}
	var running []*sample
	started, done := 0, 0
	credit := 0.0 // the pace's bucket, at most a second's worth
	now, nextTend := 0.0, e.window
	latKnown := false
	sat := false
	admitted, winStart := 0, 0.0
	var waitSum float64
	var adms []float64 // admission times, for full
	out := earlyOut{ideal: float64(e.samples*e.calls) / e.rate}
	rng := rand.New(rand.NewPCG(1, 2)) // calls take lat ± 20 %
	for done < e.samples && now < 10000 {
		now += dt
		credit = math.Min(credit+e.rate*dt, math.Max(1, e.rate))
		// Finished calls: the next call, or the sample ends.
		keep := running[:0]
		for _, s := range running {
			if s.until > 0 && now >= s.until {
				latKnown = true
				s.left--
				s.until = 0
				if s.left == 0 {
					done++
					continue
				}
			}
			keep = append(keep, s)
		}
		running = keep
		sp := c.Setpoints()[0]
		for len(running) < sp && started < e.samples {
			running = append(running, &sample{left: e.calls})
			started++
		}
		if len(running) >= sp && started < e.samples {
			sat = true
		}
		waiting := 0
		for _, s := range running {
			if s.until == 0 {
				if credit >= 1 {
					credit--
					admitted++
					adms = append(adms, now)
					s.until = now + e.lat*(0.8+0.4*rng.Float64())
				} else {
					waiting++
				}
			}
		}
		waitSum += float64(waiting) * dt
		if now >= nextTend {
			need := 0
			if latKnown {
				need = int(math.Ceil(e.rate * e.lat))
			}
			// As the supervisor reads the gateway (gatewayBound in
			// internal/run): admissions at 90 % of the pace or more while
			// the connection limit (Little's target, 1.2 × need + 2) sat
			// below its ceiling (the sum of the setpoints).
			limit := math.Inf(1)
			if need > 0 {
				limit = 1.2*float64(need) + 2
			}
			bound := float64(admitted) >= 0.9*e.rate*(now-winStart) && limit < float64(sp)
			d := c.Tend(time.Unix(0, 0).Add(time.Duration(now*float64(time.Second))), Signals{ConnNeed: need},
				[]TaskSignals{{Saturated: sat && !bound}})
			out.top = max(out.top, d.Setpoints[0])
			out.tends++
			sat, admitted, winStart = false, 0, now
			w := time.Duration(e.window * float64(time.Second))
			if e.useEarly {
				w = c.Next(w)
			}
			nextTend = now + w.Seconds()
		}
	}
	out.makespan = now
	out.waiting = waitSum / now
	out.full = -1
	for i, j := 0, 0; j < len(adms); j++ {
		for adms[i] < adms[j]-e.window {
			i++
		}
		if float64(j-i+1) >= 0.9*e.rate*e.window && adms[j] >= e.window {
			out.full = adms[j]
			break
		}
	}
	return out
}

// BenchmarkRampEarlyTend: one invocation of 1000 samples × 3 calls of 10 s
// against a provider whose rate keeps 105 calls busy (10.5 a second), the
// ramp starting at 50 with +20 per passing 10 s window: the seed's window
// against Next side by side, as makespan over the provider-bound ideal
// (calls ÷ rate); and against a provider already full (4 a second, 40
// busy: fewer than the ramp starts with), where Next must change nothing.
func BenchmarkRampEarlyTend(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("| provider | calls | seed's window | with Next |\n|---|---|---|---|\n")
	for _, p := range []struct {
		name string
		rate float64
		lat  float64
	}{
		{"idle, 105 busy", 10.5, 10},
		{"idle, 105 busy", 70, 1.5},
		{"full, 40 busy", 4, 10},
	} {
		var got [2]earlyOut
		b.Run(fmt.Sprintf("rate%.1f/lat%.1fs", p.rate, p.lat), func(b *testing.B) {
			for k := range got {
				r := earlyRun{rate: p.rate, lat: p.lat, samples: 1000, calls: 3, window: 10, useEarly: k == 1}
				for i := 0; i < b.N; i++ {
					got[k] = r.run()
				}
			}
			b.ReportMetric(got[1].makespan/got[1].ideal, "makespan/ideal")
			b.ReportMetric(got[1].full, "full-s")
			b.ReportMetric(got[0].full, "seed-full-s")
			b.ReportMetric(got[0].makespan/got[0].ideal, "seed-makespan/ideal")
		})
		e := func(o earlyOut) string {
			return fmt.Sprintf("at 0.9 of the rate after %.0f s · %.0f s (%.2f× the ideal %.0f s) · top %d · %.0f samples waiting on average", o.full, o.makespan, o.makespan/o.ideal, o.ideal, o.top, o.waiting)
		}
		fmt.Fprintf(&sb, "| %s | %.1f s | %s | %s |\n", p.name, p.lat, e(got[0]), e(got[1]))
	}
	fmt.Printf("\nRamp start, one task of 1000 samples × 3 calls (modelled)\n\n%s", sb.String())
}
