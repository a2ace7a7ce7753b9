package ramp

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// tendAt is one tend of the early-tend tests: when it ran (since the
// start) and the setpoint after it.
type tendAt struct {
	at time.Duration
	sp int
}

// driveEarly runs a one-task ramp [50, 200] on a fake clock, each tend
// coming when Next says, against a provider that keeps need calls busy
// (the gateway's pace × latency): the task is saturated while its
// setpoint is no more than that (beyond it the gateway, not the setpoint,
// holds samples back), and pushback comes in the windows pushback lists
// (1-based).
func driveEarly(t *testing.T, need, tends int, pushback map[int]bool, hold bool) []tendAt {
	t.Helper()
	c, err := New(Config{Range: DefaultRange}, specs(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if hold {
		c.Hold("provider looks unhappy")
	}
	clk := newClock()
	start := clk.Now()
	var out []tendAt
	for i := 1; i <= tends; i++ {
		clk.Advance(c.Next(10 * time.Second))
		sp := c.Setpoints()[0]
		g := Signals{Pushback: pushback[i], ConnNeed: need, ConnLimit: 100}
		d := c.Tend(clk.Now(), g, []TaskSignals{{Saturated: sp <= need}})
		out = append(out, tendAt{clk.Now().Sub(start), d.Setpoints[0]})
	}
	return out
}

func fmtTends(ts []tendAt) string {
	var parts []string
	for _, x := range ts {
		parts = append(parts, fmt.Sprintf("%s:%d", x.at, x.sp))
	}
	return strings.Join(parts, " ")
}

// A provider known to be idle (its rate keeps 105 calls busy, the ramp
// starts at 50) no longer waits 10 s per step: passing tends come every
// 2.5 s until the setpoint covers it; the gates and the step are the
// seed's. A provider that is already full (it keeps 40 busy, fewer than
// the ramp starts with) is never tended sooner and the ramp never climbs
// into it; one with a little room gets one step and then the window; a
// pushback window, a hold or an unknown need (no rate announced) keep the
// seed's window.
func TestNextTendsSoonerOnlyWhileTheProviderHasRoom(t *testing.T) {
	s := time.Second
	cases := []struct {
		name     string
		need     int
		pushback map[int]bool
		hold     bool
		want     string
	}{
		{"idle provider", 105, nil, false, fmtTends([]tendAt{{10 * s, 70}, {12500 * time.Millisecond, 90}, {15 * s, 110}, {25 * s, 110}, {35 * s, 110}})},
		{"full provider", 40, nil, false, fmtTends([]tendAt{{10 * s, 50}, {20 * s, 50}, {30 * s, 50}, {40 * s, 50}, {50 * s, 50}})},
		{"a little room", 60, nil, false, fmtTends([]tendAt{{10 * s, 70}, {20 * s, 70}, {30 * s, 70}, {40 * s, 70}, {50 * s, 70}})},
		{"pushback", 200, map[int]bool{2: true}, false, fmtTends([]tendAt{{10 * s, 70}, {12500 * time.Millisecond, 70}, {22500 * time.Millisecond, 90}, {25 * s, 110}, {27500 * time.Millisecond, 130}})},
		{"held", 200, nil, true, fmtTends([]tendAt{{10 * s, 50}, {20 * s, 50}, {30 * s, 50}, {40 * s, 50}, {50 * s, 50}})},
		{"need unknown", 0, nil, false, fmtTends([]tendAt{{10 * s, 50}, {20 * s, 50}, {30 * s, 50}, {40 * s, 50}, {50 * s, 50}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fmtTends(driveEarly(t, tc.need, 5, tc.pushback, tc.hold))
			if got != tc.want {
				t.Fatalf("tends\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// On a provider already full the early rule adds no climb and no
// pushback: over many windows where the provider refuses whenever the
// setpoint exceeds what it keeps busy, the ramp with Next climbs no higher
// and meets no more pushback windows than the seed's fixed window.
func TestNextDoesNotClimbIntoPushback(t *testing.T) {
	for _, need := range []int{30, 50, 65, 90} {
		run := func(early bool) (top, pushed int) {
			c, _ := New(Config{Range: DefaultRange}, specs(1, 0))
			clk := newClock()
			for i := 0; i < 60; i++ {
				w := 10 * time.Second
				if early {
					w = c.Next(w)
				}
				clk.Advance(w)
				sp := c.Setpoints()[0]
				// The provider pushes back once the samples overrun it by
				// more than a step (the gateway's pace absorbs less).
				pb := sp > need+DefaultStep
				if pb {
					pushed++
				}
				d := c.Tend(clk.Now(), Signals{Pushback: pb, ConnNeed: need, ConnLimit: need}, []TaskSignals{{Saturated: sp <= need}})
				top = max(top, d.Setpoints[0])
			}
			return top, pushed
		}
		topSeed, pbSeed := run(false)
		topEarly, pbEarly := run(true)
		if topEarly != topSeed || pbEarly != pbSeed || pbEarly != 0 {
			t.Errorf("need %d: top %d with Next, %d without; pushback windows %d with Next, %d without (want equal, none)", need, topEarly, topSeed, pbEarly, pbSeed)
		}
	}
}
