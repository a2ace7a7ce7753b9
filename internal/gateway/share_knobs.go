package gateway

// TEMPORARY experiment knobs (branch tune): read from KS_* env vars.

import (
	"os"
	"strconv"
)

func knob(name string, def float64) float64 {
	if v := os.Getenv("KS_" + name); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return def
}

var (
	kAlone     = knob("ALONE", 0.9)
	kS         = knob("S", 1)     // probeScale on
	kSSlow     = knob("SSLOW", 1) // probeScale only at slow calls
	kJ2        = knob("J2", 1)
	kA         = knob("A", 0)
	kLPGap     = knob("LPGAP", 0.25) // seconds between long-probe requests
	kAddSlow   = knob("ADDSLOW", 1)  // additive × at slow calls
	kSlack     = knob("SLACK", 0.94)
	kSlackSlow = knob("SLACKSLOW", 0.94)
	kStartMode = knob("STARTMODE", 2) // probeStart when over: 0 probe step, 1 fair guess, 2 half of (tau-others) floored at probe's rate
	kAccelWait = knob("ACCELWAIT", 0) // 1: accelerate at top only after a full round of feedback at the top
	kAccel     = knob("ACCEL", 1.5)
	kRuns      = knob("RUNS", 4)
	kTopStart  = knob("TOPSTART", 0.5)
	kFairCut   = knob("FAIRCUT", 1)
	kLPGapLow  = knob("LPGAPLOW", 0.25)
	kLPLowF    = knob("LPLOWF", 0.5)
	kDebug     = knob("DEBUG", 0)
	kTokSlow   = knob("TOKSLOW", 8)
	kTopHold   = knob("TOPHOLD", 0.65)
	kAccel2    = knob("ACCEL2", 2)
	kRuns2     = knob("RUNS2", 4)
	kHalve     = knob("HALVE", 0)
	kSFair     = knob("SFAIR", 0)
	kTopPeak   = knob("TOPPEAK", 0)
	kFairAll   = knob("FAIRALL", 2)
	kLP429     = knob("LP429", 0)
	kRoomEq    = knob("ROOMEQ", 0)
	kJ2F       = knob("J2F", 2) // >0: extra cut weight for a gateway above its fair-ish share
)

func init() {
	shareScaleK = knob("SK", shareScaleK)
	shareScaleMin = knob("SMIN", shareScaleMin)
	shareScaleMax = knob("SMAX", shareScaleMax)
	expStartGuess = kA != 0
}
