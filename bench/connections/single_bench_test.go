package connbench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/gateway/connsim"
	"github.com/steward-evals/steward/internal/ramp"
)

// singleCell is one workload of a single runner: samples × calls of
// latency, RPM- or TPM-bound.
type singleCell struct {
	latency        time.Duration
	tpm            bool
	samples, calls int
}

func (c singleCell) String() string {
	return fmt.Sprintf("%s/%s/%dx%d", c.latency, kindName(c.tpm), c.samples, c.calls)
}

// singleCells: 400 samples × 3 calls at 0.3 s and 1.5 s (ideal 60 s), and
// 1 000 × 3 at 10 s (ideal 150 s: the provider keeps about 200 calls
// busy, more than the ramp starts with and than Inspect's 100), RPM- and
// TPM-bound.
func singleCells() []singleCell {
	var out []singleCell
	for _, c := range []struct {
		lat     time.Duration
		samples int
	}{{300 * time.Millisecond, 400}, {1500 * time.Millisecond, 400}, {10 * time.Second, 1000}} {
		for _, tpm := range []bool{false, true} {
			out = append(out, singleCell{c.lat, tpm, c.samples, 3})
		}
	}
	return out
}

// singleIdeal is the provider-bound ideal: calls ÷ 20 a second.
func singleIdeal(c singleCell) time.Duration {
	return time.Duration(float64(c.samples*c.calls) / 20 * float64(time.Second))
}

type singlePeer int

const (
	peerSteward singlePeer = iota // StewardPolicy, samples at once by the real ramp
	peerInspect                   // the Inspect-style controller, samples following its connections
	// What Steward's margin is made of (not shipped): the ramp as above,
	// with the key share off (a lone gateway without the join's probe and
	// slow start: the previous rule), and that paced at 100 % of the rate.
	peerNoShare
	peerNoSharePace1
)

func (p singlePeer) String() string {
	return [...]string{"steward", "inspect", "steward, key share off", "steward, key share off, pace 100 %"}[p]
}

// singleScenario: the matrix's provider (1 200 RPM, or 1 200 000 TPM at
// 1 000 tokens a call ±50 % with 3 600 RPM announced, enforced per
// second), calls ±20 %, one runner with the cell's work. Steward: the
// real gateway controller and the real ramp (samples_ramp's default
// [50, 200], +20 a passing window, tend_interval 10 s, Next), read as
// the tend loop reads them. Inspect-style: its controller (start 20,
// ×0.8 per episode, 10–100, headers ignored) with as many samples at
// once as connections.
func singleScenario(c singleCell, peer singlePeer, seed uint64, record func(time.Duration, ramp.Decision)) connsim.Shared {
	s := connsim.Shared{Scenario: connsim.Scenario{
		Latency: c.latency, Jitter: 0.2, Interval: time.Second, RPM: rpmLimit, TokensPerCall: tokensPerCall,
		Duration: 10 * singleIdeal(c), CallsPerSample: c.calls, Seed: seed,
	}, EndWhenDone: true, KeepCost: true}
	if c.tpm {
		s.RPM, s.TPM, s.TokenJitter = tpmRPM, tpmLimit, 0.5
	}
	r := connsim.Runner{Work: c.samples}
	switch peer {
	case peerSteward, peerNoShare, peerNoSharePace1:
		s.Policy = gateway.StewardPolicy()
		if peer != peerSteward {
			s.Policy.Name, s.Policy.ShareKey = "steward (key share off)", false
		}
		if peer == peerNoSharePace1 {
			s.Policy.PaceFactor = 1
		}
		rc, err := ramp.New(ramp.Config{Range: ramp.DefaultRange}, []ramp.TaskSpec{{Name: "task"}})
		if err != nil {
			panic(err)
		}
		r.Tend = connsim.RampTend(rc, 10*time.Second, record)
	case peerInspect:
		s.Policy = inspectPolicy()
		r.FollowLimit = true
	}
	s.Runners = []connsim.Runner{r}
	return s
}

// singleOut is one run: makespan ÷ ideal and 429 share.
type singleOut struct {
	ratio, share429           float64
	requests, refused, failed int
	done                      bool
}

func runSingle(c singleCell, peer singlePeer, seed uint64, record func(time.Duration, ramp.Decision)) (singleOut, connsim.SharedResult) {
	s := singleScenario(c, peer, seed, record)
	r := connsim.RunShared(s)
	rr := r.Runners[0]
	o := singleOut{requests: rr.Requests, refused: rr.RateLimited, failed: rr.FailedSamples, done: rr.Finished > 0}
	if rr.Requests > 0 {
		o.share429 = float64(rr.RateLimited) / float64(rr.Requests)
	}
	o.ratio = rr.Finished.Seconds() / singleIdeal(c).Seconds()
	if !o.done {
		o.ratio = s.Duration.Seconds() / singleIdeal(c).Seconds()
	}
	return o, r
}

// singleSeeds is how many seeds each cell runs (SINGLEBENCH_SEEDS, default 5).
func singleSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("SINGLEBENCH_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// BenchmarkSingleRunner puts a single runner's makespan side by side,
// Steward (its gateway controller with samples at once driven by the
// ramp) against the Inspect-style peer (its samples following its
// connections), at 0.3 s, 1.5 s and 10 s calls, RPM- and TPM-bound, on
// simulated time: makespan ÷ the provider-bound ideal (calls ÷ 20 a
// second) and the share of requests answered 429, the worst and the
// median of seeds 1…n. A second table shows what Steward's margin is made
// of: the same runs with the key share off, and paced at 100 %.
func BenchmarkSingleRunner(b *testing.B) {
	n := singleSeeds()
	peers := []singlePeer{peerSteward, peerInspect, peerNoShare, peerNoSharePace1}
	var sb, pb strings.Builder
	fmt.Fprintf(&sb, "| latency | bound by | work | ideal | Steward (ramp) | Inspect-style | Steward ahead (seeds) |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&pb, "| latency | bound by | Steward | %s | %s | Inspect-style |\n|---|---|---|---|---|---|\n", peerNoShare, peerNoSharePace1)
	for _, c := range singleCells() {
		var all [4][]singleOut
		ran := false
		b.Run("sim/"+c.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				all = [4][]singleOut{}
				for seed := uint64(1); seed <= uint64(n); seed++ {
					for k, peer := range peers {
						o, _ := runSingle(c, peer, seed, nil)
						all[k] = append(all[k], o)
					}
				}
			}
			ran = true
			st, in := singleStats(all[0]), singleStats(all[1])
			b.ReportMetric(st.median.ratio, "makespan/ideal")
			b.ReportMetric(100*st.worst.share429, "429-%")
			b.ReportMetric(in.median.ratio, "inspect-makespan/ideal")
			b.ReportMetric(100*in.worst.share429, "inspect-429-%")
		})
		if !ran {
			continue
		}
		ahead := func(k int) int {
			n := 0
			for i := range all[k] {
				if all[k][i].ratio < all[1][i].ratio {
					n++
				}
			}
			return n
		}
		mark := fmt.Sprintf("%d of %d", ahead(0), len(all[0]))
		if ahead(0) < len(all[0]) {
			mark = "**" + mark + "**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %d × %d | %.0f s | %s | %s | %s |\n", c.latency, kindName(c.tpm), c.samples, c.calls,
			singleIdeal(c).Seconds(), singleEntry(singleStats(all[0])), singleEntry(singleStats(all[1])), mark)
		m := func(k int) string {
			st := singleStats(all[k])
			out := fmt.Sprintf("%.3f× · %.1f %%", st.median.ratio, 100*st.median.share429)
			if k != 1 {
				out += fmt.Sprintf(" · ahead on %d", ahead(k))
			}
			return out
		}
		fmt.Fprintf(&pb, "| %s | %s | %s | %s | %s | %s |\n", c.latency, kindName(c.tpm), m(0), m(2), m(3), m(1))
	}
	fmt.Printf("\nA single runner against the Inspect-style peer (simulated), seeds 1–%d: makespan ÷ ideal, worst · median; 429 share, worst · median; on how many seeds Steward finished first\n\n%s", n, sb.String())
	fmt.Printf("\nWhat Steward's margin is made of (simulated, the median of seeds 1–%d): makespan ÷ ideal · 429 share · on how many seeds it finished before the Inspect-style peer\n\n%s", n, pb.String())
	if os.Getenv("SINGLEBENCH_TRACE") != "" {
		singleTrace()
	}
}

type singleStat struct {
	worst, median singleOut
	failed        int
}

// singleStats: the worst and the median makespan ratio and 429 share over
// the seeds (each taken on its own), and the failed samples in all.
func singleStats(os []singleOut) singleStat {
	var st singleStat
	rs := make([]float64, len(os))
	qs := make([]float64, len(os))
	for i, o := range os {
		rs[i], qs[i] = o.ratio, o.share429
		st.failed += o.failed
	}
	slices.Sort(rs)
	slices.Sort(qs)
	st.worst = singleOut{ratio: rs[len(rs)-1], share429: qs[len(qs)-1]}
	st.median = singleOut{ratio: rs[len(rs)/2], share429: qs[len(qs)/2]}
	return st
}

func singleEntry(s singleStat) string {
	r := fmt.Sprintf("%.2f× · %.2f×", s.worst.ratio, s.median.ratio)
	if s.worst.ratio <= 1.10 {
		r = "**" + r + "**"
	}
	out := fmt.Sprintf("%s; %.1f %% · %.1f %% 429s", r, 100*s.worst.share429, 100*s.median.share429)
	if s.failed > 0 {
		out += fmt.Sprintf("; %d failed samples", s.failed)
	}
	return out
}

// singleTrace prints, for seed 1 of each cell, the series every second
// (admitted, 429s, samples running and allowed, calls in flight and the
// connection limit) and the ramp's decisions, on stderr.
func singleTrace() {
	for _, c := range singleCells() {
		for _, peer := range []singlePeer{peerSteward, peerInspect} {
			name := peer.String()
			o, r := runSingle(c, peer, 1, func(at time.Duration, d ramp.Decision) {
				fmt.Fprintf(os.Stderr, "%s %s tend t=%s: %s (%s)\n", c, name, at.Round(10*time.Millisecond), d.Reason, d.Tasks[0].Reason)
			})
			for _, p := range r.Series {
				fmt.Fprintf(os.Stderr, "%s %s t=%s adm=%d 429=%d running=%d samples=%d inflight=%d conn=%d bucket=%.1f\n",
					c, name, p.T, p.Admitted, p.RateLimited, p.Running, p.Setpoint, p.InFlight, p.ConnLimit, p.BucketRequests)
			}
			fmt.Fprintf(os.Stderr, "%s %s makespan/ideal %.3f, 429s %d of %d\n", c, name, o.ratio, o.refused, o.requests)
		}
	}
}
