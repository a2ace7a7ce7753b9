package gateway

import (
	"math"
	"testing"
	"time"
)

// The busy top's probe counters (probeTidy, probeUntidy) count the answers
// before the pace starts. unread drops the share, so the next reading that
// tells a bucket is a new first reading and may start a new long probe; the
// counters of the old join must not decide how that one starts. Before they
// were reset there: a first join whose first answer read untidy makes a later long
// probe whose answers all cannot tell (coarse resets) start at the probe's
// rate instead of half the lone pace, and a first join whose first answer
// read tidy disables the busy-top start of a later long probe whose answers
// all read untidy.
func TestKeyShareBusyTopForgetsAnOldJoin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  [2]Bucket // the first join's first answer (fast: no long probe)
		second [2]Bucket // the long probe's answers after unread
		want   float64   // as TestKeyShareLongProbeBusyTop on a fresh share
	}{
		{"untidy, then cannot tell", tidyBucket(2), bucket1s(0.9), shareStart * shareIn.full},
		{"tidy, then untidy", tidyBucket(1), tidyBucket(2), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s keyShare
			t0 := testEpoch
			s.sent(t0)
			in := shareIn
			in.now = t0.Add(100 * time.Millisecond)
			if !s.reading(t0, tc.first, false, in) || s.longProbe || s.lone() {
				t.Fatalf("setup: the first answer did not set a share (frac %v, long probe %v)", s.frac, s.longProbe)
			}
			// Completions without buckets for a span: the share drops.
			s.unread(t0.Add(3*time.Second), time.Second)
			if s.haveAnchor || !s.lone() {
				t.Fatal("setup: unread did not drop the share")
			}
			// A new first reading, slow: a new long probe, four a second.
			t1 := t0.Add(10 * time.Second)
			for k := 0; k < 60; k++ {
				s.sent(t1.Add(time.Duration(k) * shareProbeGap))
			}
			in.latency, in.now = 10*time.Second, t1.Add(10*time.Second)
			if s.reading(t1, tc.second, false, in) || !s.longProbe {
				t.Fatal("setup: a slow first answer did not go on probing")
			}
			in.now = t1.Add(15 * time.Second)
			s.reading(t1.Add(5*time.Second), tc.second, false, in)
			if got := s.frac * in.full; s.longProbe || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("start %.4f, want %.4f as on a fresh share (probeTidy %d, probeUntidy %d carried over the unread)", got, tc.want, s.probeTidy, s.probeUntidy)
			}
		})
	}
}

// After unread the gateway has heard (it does not probe at four
// a second again) and paces at the lone pace, so a long probe that starts
// at its next reading runs at the lone pace. The busy-top start takes "the
// probe's admitted rate, which the slow start doubles": here that is the
// lone pace itself, on a key whose every answer said someone else keeps it
// busy. The busy top starts at most at half the lone pace, as a start at
// the top did before it.
func TestKeyShareBusyTopAtMostHalfTheLonePace(t *testing.T) {
	var s keyShare
	t0 := testEpoch
	s.sent(t0)
	in := shareIn
	in.now = t0.Add(100 * time.Millisecond)
	s.reading(t0, bucket1s(0.5), false, in) // cannot tell: no count
	s.unread(t0.Add(3*time.Second), time.Second)
	if s.haveAnchor || s.probeTidy != 0 || s.probeUntidy != 0 {
		t.Fatal("setup")
	}
	// The lone pace (19.4 a second) while the long probe goes on.
	t1 := t0.Add(10 * time.Second)
	gap := time.Duration(float64(time.Second) / in.full)
	// The others keep the key busy: a third of them refused.
	for k := 0; k < 300; k++ {
		s.sent(t1.Add(time.Duration(k) * gap))
		if k%3 == 2 {
			s.refuse(t1.Add(time.Duration(k) * gap))
		}
	}
	in.latency, in.now = 10*time.Second, t1.Add(10*time.Second)
	if s.reading(t1, tidyBucket(2), false, in) || !s.longProbe {
		t.Fatal("setup: a slow first answer did not go on probing")
	}
	in.now = t1.Add(15 * time.Second)
	s.reading(t1.Add(5*time.Second), tidyBucket(2), false, in)
	if got := s.frac * in.full; s.lone() || got > shareStart*in.full+1e-9 {
		t.Errorf("a busy key (every answer untidy) re-joined after unread at %.2f a second (lone %v) (the lone pace is %.2f); half of it (%.2f) before the busy-top rule", got, s.lone(), in.full, shareStart*in.full)
	}
}

// A long probe at the top that read a tidy answer or two among at least
// twice as many untidy ones joins a busy key all the same: with seven
// others at 10 s calls such a joiner started at half the lone pace and sent
// the key 9–10 requests a second more than it allowed for a latency, the
// largest cluster of 429s left in those runs. It starts at twice the
// probe's admitted rate (one doubling ahead of a probe that read no tidy
// answer); a probe with more tidy answers, or fewer untidy ones for each,
// still starts at half the lone pace.
func TestKeyShareBusyTopWithATidyAnswerOrTwo(t *testing.T) {
	tidy, untidy := tidyBucket(1), tidyBucket(2) // 1 request short: its own; 2: one someone else's
	half := shareStart * shareIn.full
	for _, tc := range []struct {
		name    string
		answers [][2]Bucket // the probe's answers, half a second apart; the last ends it
		want    float64
	}{
		{"1 tidy, 5 untidy", [][2]Bucket{tidy, untidy, untidy, untidy, untidy, untidy}, 8}, // the probe admitted 4 a second
		{"2 tidy, 4 untidy", [][2]Bucket{untidy, tidy, untidy, tidy, untidy, untidy}, 8},
		{"no tidy (as before)", [][2]Bucket{untidy, untidy, untidy, untidy, untidy, untidy}, 4},
		{"2 tidy, 3 untidy", [][2]Bucket{tidy, untidy, tidy, untidy, untidy}, half},
		{"3 tidy, 6 untidy", [][2]Bucket{tidy, untidy, tidy, untidy, tidy, untidy, untidy, untidy, untidy}, half},
		{"all tidy", [][2]Bucket{tidy, tidy, tidy, tidy, tidy, tidy}, half},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s keyShare
			t0 := testEpoch
			for k := 0; k < 80; k++ { // four a second
				s.sent(t0.Add(time.Duration(k) * shareProbeGap))
			}
			in := shareIn
			in.latency = 10 * time.Second
			n := len(tc.answers)
			for i, b := range tc.answers {
				// Half a second apart, the last one a span (5 s) after the first.
				at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
				if i == n-1 {
					at = t0.Add(5 * time.Second)
				}
				in.now = at.Add(10 * time.Second)
				moved := s.reading(at, b, false, in)
				if i < n-1 && (moved || !s.longProbe) {
					t.Fatalf("answer %d ended the probe (a slow first answer goes on probing until a span later)", i)
				}
			}
			if got := s.frac * in.full; s.longProbe || !s.slow || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("start %.4f (long probe %v, slow start %v; %d tidy, %d untidy), want %.4f", got, s.longProbe, s.slow, s.probeTidy, s.probeUntidy, tc.want)
			}
		})
	}
}
