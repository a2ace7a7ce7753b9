package gateway

import (
	"math"
	"testing"
	"time"
)

// A reading is tidy when what the bucket is short of full is this
// gateway's own requests, still refilling (each a request's worth, back in
// 1/rate: 50 ms at 20 a second), and no more.
func TestKeyShareTidy(t *testing.T) {
	at := testEpoch.Add(time.Second)
	for _, tc := range []struct {
		name  string
		own   []time.Duration // this gateway's sends, before at (0: this request)
		short float64         // requests the bucket is short of full
		want  int
	}{
		{"this request only", []time.Duration{0}, 1, 1},
		{"and its request of 20 ms before (0.6 left)", []time.Duration{0, 20 * time.Millisecond}, 1.6, 1},
		{"and its request of 60 ms before (refilled)", []time.Duration{0, 60 * time.Millisecond}, 1, 1},
		{"someone else's request 10 ms before (0.8 left)", []time.Duration{0}, 1.8, -1},
		{"someone else's, 47 ms before (0.06 left: within the reset's rounding)", []time.Duration{0}, 1.06, 1},
		{"two others'", []time.Duration{0, 20 * time.Millisecond}, 3, -1},
		{"far from full (5 short): nothing tells who took it", []time.Duration{0}, 5, 0},
	} {
		var s keyShare
		for i := len(tc.own) - 1; i >= 0; i-- {
			s.sent(at.Add(-tc.own[i]))
		}
		if got := s.tidy(at, tidyBucket(tc.short), shareIn); got != tc.want {
			t.Errorf("%s: tidy %d, want %d", tc.name, got, tc.want)
		}
	}
	// A reset to the second (Anthropic's) cannot tell.
	var s keyShare
	s.sent(at)
	b := tidyBucket(1)
	b[0].Coarse = true
	if got := s.tidy(at, b, shareIn); got != 0 {
		t.Errorf("a coarse reset: tidy %d, want 0", got)
	}
	// The tokens bucket (20 000 a second, 1 000 a request on average):
	// this request's usage, an earlier one at the average still
	// refilling, and half a request's slack for the others'.
	in := shareIn
	in.tokensPerReq, in.tokens = 1000, 1500
	tok := func(short float64) [2]Bucket {
		b := tidyBucket(0)
		b[0].Reset = 0
		b[1] = Bucket{Limit: 1_200_000, Remaining: 1_200_000 - short*60, Reset: time.Duration(math.Ceil(short/20)) * time.Millisecond, OK: true}
		return b
	}
	s = keyShare{}
	s.sent(at.Add(-25 * time.Millisecond)) // 1 000 − 500 = 500 tokens left of it
	s.sent(at)
	for _, tc := range []struct {
		short float64
		want  int
	}{{2000, 1}, {2400, 1}, {2600, -1}, {3000, -1}} {
		if got := s.tidy(at, tok(tc.short), in); got != tc.want {
			t.Errorf("tokens bucket short %.0f (own 2 000): tidy %d, want %d", tc.short, got, tc.want)
		}
	}
}

// A joining gateway whose first answer found someone else's requests in
// the bucket starts at the probe's rate (the slow start finds the room),
// not at the fair guess, which a key others fill at 91 % cannot hold; a
// tidy first answer (a key nobody else uses) starts at half the lone
// pace as before.
func TestKeyShareCleanStart(t *testing.T) {
	at := testEpoch
	var s keyShare
	s.sent(at)
	s.reading(at, tidyBucket(1), false, shareIn)
	if s.frac != shareStart {
		t.Errorf("tidy first reading: start %.4f of the lone pace, want %.2f", s.frac, shareStart)
	}
	s = keyShare{}
	s.sent(at)
	s.reading(at, tidyBucket(3), false, shareIn)
	if want := 4 / shareIn.full; math.Abs(s.frac-want) > 1e-12 {
		t.Errorf("untidy first reading: start %.4f of the lone pace, want the probe's 4 a second (%.4f)", s.frac, want)
	}
}

// A lone gateway whose answers find the bucket at its top and tidy climbs
// from 97 % of the rate toward 99.5 %, 1 % of the rate a second, and falls
// back at once when a reading is below the top or untidy. The calls take
// 2.5 s: at faster ones the hold sets the lone pace (TestLoneHold).
func TestLonePaceClimbsAtTheTop(t *testing.T) {
	info := loneInfo
	const lat = 2500 * time.Millisecond
	// Alone (as the key share's update would find it); the readings below
	// come from requests sent before the share's pace began, so they move
	// only the boost. (At 2.5 s calls the first answer's bucket held less
	// than a latency of refill: the share would probe on, which is not
	// tested here.)
	c, clk := loneAfter(t, lat, bucket1s(0.5))
	pace := func() float64 { p, _, _ := c.SharePace(); return p }
	if p := pace(); math.Abs(p-0.97*20) > 1e-9 {
		t.Fatalf("lone pace %.3f, want 97 %% of the rate (19.4)", p)
	}
	answer := func(short float64) {
		tk, _ := c.TryAcquire()
		for tk == nil {
			clk.Advance(10 * time.Millisecond)
			tk, _ = c.TryAcquire()
		}
		clk.Advance(lat)
		c.Done(tk, OutcomeOK, info(tidyBucket(short)))
	}
	answer(1)
	if p := pace(); p <= 0.97*20 || p > lonePace*20+1e-9 {
		t.Fatalf("after a tidy reading at the top, pace %.3f: want above 19.4, at most 19.9", p)
	}
	for i := 0; i < 4; i++ {
		answer(1)
	}
	if p := pace(); math.Abs(p-lonePace*20) > 1e-9 {
		t.Fatalf("after 15 s of tidy readings at the top, pace %.3f, want 99.5 %% of the rate (19.9)", p)
	}
	answer(2) // someone else's request
	if p := pace(); math.Abs(p-0.97*20) > 1e-9 {
		t.Fatalf("after an untidy reading, pace %.3f, want 19.4", p)
	}
	answer(1)
	answer(1)
	answer(5) // the bucket 75 % full: below its top
	if p := pace(); math.Abs(p-0.97*20) > 1e-9 {
		t.Fatalf("after a reading below the top, pace %.3f, want 19.4", p)
	}
}

// A gateway holding a share of the key whose answers, over a span and at
// least shareTidyRun of them in a row, all read tidy (the bucket at its
// top with nothing in it but its own requests) takes the lone pace at
// once: the others have left, and at slow calls probing the top back took
// 30–60 s. One untidy reading (someone else's request) starts the run
// over. At these slow calls the lone pace comes at the answer that
// completes the run (a span of them, from the request of 0.2 s to that of
// 5.4 s, the first more than a quarter second after the update of 5 s),
// not at the next update.
func TestKeyShareOthersLeft(t *testing.T) {
	t0 := testEpoch
	in := shareIn
	in.latency = 10 * time.Second
	for _, tc := range []struct {
		name    string
		untidy  int // the reading that finds someone else's request (0: none)
		refused int // the answer that is a 429 (0: none)
		wantSet bool
	}{
		{"every reading tidy", 0, 0, true},
		{"one untidy reading within the run's span", 25, 0, false},
		{"a 429 within the run's span", 0, 25, false}, // it keeps the last answer's tidy reading, but ends the run
	} {
		s := keyShare{frac: 0.25, anchor: shareReading{at: t0, f: [2]float64{0.95}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{1}}
		// Five requests a second for 10 s, each answered a latency later
		// with the bucket a request short (its own) or two (and another's).
		for k := 1; k <= 50; k++ {
			at := t0.Add(time.Duration(k) * 200 * time.Millisecond)
			s.sent(at)
			s.held(at)
			short := 1.0
			if k == tc.untidy {
				short = 2
			}
			in.now = at.Add(in.latency)
			if k == tc.refused {
				s.refuse(at)
			}
			s.reading(at, tidyBucket(short), k == tc.refused, in)
		}
		if lone := s.lone(); lone != tc.wantSet {
			t.Errorf("%s: lone pace %v (pace %.3f of it), want %v", tc.name, lone, s.frac, tc.wantSet)
		}
		if tc.wantSet && !s.paceSince.Equal(t0.Add(5400*time.Millisecond+in.latency)) {
			t.Errorf("%s: the lone pace began at %v, want the arrival of the answer that completed the run (15.4 s)", tc.name, s.paceSince.Sub(t0))
		}
	}
}

// At slow calls answers come back out of order (a 10 s call's latency
// varies by ± 2 s, the requests are 200 ms apart), so answers to requests
// sent before the others left, untidy, arrive among the tidy answers to
// later ones. For a gateway with at most half of the key's use such an
// answer ends only the part of the run sent before it: the other
// gateway's last request went at 1 s, and by the answer to the request of
// 6.4 s, a span (5 s) of tidy answers from that of 1.2 s on, it takes the
// lone pace, though the last untidy answer came after the tidy one of
// 3.6 s (a run counted by arrival restarts there and needs until the
// request of 8.8 s, and the update cadence later still). One with more
// than half of the key keeps the run by arrival: beside a joiner starved
// to a few per cent, a run by send time read the others gone while the
// joiner's requests were in flight.
func TestKeyShareOthersLeftOutOfOrder(t *testing.T) {
	t0 := testEpoch
	sentAt := func(k int) time.Time { return t0.Add(time.Duration(k) * 200 * time.Millisecond) }
	// The order the answers come in: those to the requests of 0.6, 0.8
	// and 1 s (the other gateway's requests still in the bucket) late,
	// after those of 2.4, 3 and 3.6 s.
	var order []int
	for k := 1; k <= 50; k++ {
		if k >= 3 && k <= 5 {
			continue
		}
		order = append(order, k)
		switch k {
		case 12:
			order = append(order, 3)
		case 15:
			order = append(order, 4)
		case 18:
			order = append(order, 5)
		}
	}
	for _, tc := range []struct {
		name     string
		ownShare float64
		wantLone bool
	}{
		{"a fifth of the key", 0.2, true},
		{"most of the key", 0.8, false},
	} {
		in := shareIn
		in.latency = 10 * time.Second
		s := keyShare{frac: 0.25, ownShare: tc.ownShare, anchor: shareReading{at: t0, f: [2]float64{0.95}, ok: [2]bool{true}}, haveAnchor: true, ivl: [2]float64{1}}
		for k := 1; k <= 50; k++ {
			s.sent(sentAt(k))
			s.held(sentAt(k))
		}
		for _, k := range order {
			short := 1.0
			if k <= 5 {
				short = 2
			}
			at := sentAt(k)
			if late := at.Add(in.latency); late.After(in.now) {
				in.now = late
			} else {
				in.now = in.now.Add(time.Millisecond) // just after the answer before it
			}
			s.reading(at, tidyBucket(short), false, in)
			if k == 32 {
				break
			}
		}
		if s.lone() != tc.wantLone {
			t.Errorf("%s: by the answer to the request of 6.4 s (the others left at 1 s), lone pace %v (pace %.3f of it), want %v", tc.name, s.lone(), s.frac, tc.wantLone)
		}
	}
}
