package connbench

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/gateway/connsim"
)

// sharedCell is one cell of the shared-key matrix (issue 25): n
// invocations on one key, each with a gateway of its own.
type sharedCell struct {
	n       int
	latency time.Duration
	tpm     bool
}

func (c sharedCell) String() string {
	return fmt.Sprintf("x%d/%s/%s", c.n, c.latency, map[bool]string{false: "rpm", true: "tpm"}[c.tpm])
}

func sharedCells() []sharedCell {
	var out []sharedCell
	for _, n := range []int{2, 4, 8} {
		for _, lat := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 10 * time.Second} {
			for _, tpm := range []bool{false, true} {
				out = append(out, sharedCell{n, lat, tpm})
			}
		}
	}
	return out
}

// sharedStagger is how far apart the invocations start: two latencies,
// at least 5 s.
func sharedStagger(lat time.Duration) time.Duration { return max(5*time.Second, 2*lat) }

// sharedScenario: the provider of the matrix (1 200 RPM, or 1 200 000 TPM
// at 1 000 tokens a call, enforced per second), n invocations starting one
// stagger apart, each with enough samples to fill the key alone (1.5 ×
// rate × latency + 50, ten calls each), the first one ending early (at
// 60 % of the run), the run long enough for 20 latencies after the last
// start (at least 3 minutes).
func sharedScenario(c sharedCell, p gateway.Policy) (connsim.Shared, time.Duration) {
	st := sharedStagger(c.latency)
	lastStart := time.Duration(c.n-1) * st
	dur := lastStart + max(3*time.Minute, 20*c.latency)
	s := connsim.Shared{Scenario: connsim.Scenario{
		Latency: c.latency, Jitter: 0.2, Interval: time.Second, RPM: rpmLimit, TokensPerCall: tokensPerCall,
		Duration: dur, CallsPerSample: 10, Policy: p, Seed: 1,
	}}
	if n, _ := strconv.Atoi(os.Getenv("SHAREDBENCH_SEED")); n > 0 {
		s.Seed = uint64(n)
	}
	if c.tpm {
		s.RPM, s.TPM, s.TokenJitter = tpmRPM, tpmLimit, 0.5
	}
	samples := int(1.5*20*c.latency.Seconds()) + 50
	for i := 0; i < c.n; i++ {
		r := connsim.Runner{Start: time.Duration(i) * st, Samples: samples}
		if i == 0 {
			r.Stop = dur * 6 / 10
		}
		s.Runners = append(s.Runners, r)
	}
	// Measured from one window after the first start (warm-up) to the end.
	return s, max(10*time.Second, 2*c.latency)
}

// previousPolicy is the pacing rule before issue 25: every gateway paces
// at 97 % of the whole key's rate.
func previousPolicy() gateway.Policy {
	p := gateway.StewardPolicy()
	p.Name, p.ShareKey = "steward (previous)", false
	return p
}

func sharedEntry(s connsim.SharedSummary) string {
	g := fmt.Sprintf("%.2f", s.Goodput)
	if s.Goodput >= 0.9 && s.Share429 <= 0.01 {
		g = "**" + g + "**"
	}
	return fmt.Sprintf("%s · %.1f %% · %d", g, 100*s.Share429, s.FailedSamples)
}

// BenchmarkSharedKey runs the shared-key matrix on simulated time: 2, 4
// and 8 invocations on one key, at 0.3 s, 1.5 s and 10 s a call, RPM- and
// TPM-bound, staggered starts, the first invocation ending early; the
// key-share rule against the previous one side by side.
func BenchmarkSharedKey(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("| invocations | latency | bound by | previous rule | key share | meets the target |\n|---|---|---|---|---|---|\n")
	for _, c := range sharedCells() {
		var got [2]connsim.SharedSummary
		ran := false
		for k, p := range []gateway.Policy{previousPolicy(), gateway.StewardPolicy()} {
			name := map[int]string{0: "previous", 1: "share"}[k]
			b.Run("sim/"+c.String()+"/"+name, func(b *testing.B) {
				s, warm := sharedScenario(c, p)
				var r connsim.SharedResult
				for i := 0; i < b.N; i++ {
					r = connsim.RunShared(s)
				}
				got[k] = connsim.SummarizeShared(s, r, warm, s.Duration)
				b.ReportMetric(100*got[k].Goodput, "goodput-%")
				b.ReportMetric(100*got[k].Share429, "429-%")
				b.ReportMetric(float64(got[k].FailedSamples), "failed-samples")
				ran = true
				if os.Getenv("SHAREDBENCH_DEBUG") != "" {
					for _, pt := range r.Series {
						fmt.Fprintf(os.Stderr, "%s %s t=%s adm=%d 429=%d inflight=%d conn=%d bucket=%.1f tokens=%.0f paces=%.1f\n", c, name, pt.T, pt.Admitted, pt.RateLimited, pt.InFlight, pt.ConnLimit, pt.BucketRequests, pt.BucketTokens, pt.Paces)
					}
				}
			})
		}
		if !ran {
			continue
		}
		ok := "yes"
		if !(got[1].Goodput >= 0.9 && got[1].Share429 <= 0.01) {
			ok = "**no**"
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %s |\n", c.n, c.latency, kindName(c.tpm), sharedEntry(got[0]), sharedEntry(got[1]), ok)
	}
	fmt.Printf("\nOne key, many invocations (simulated): goodput ÷ limit · 429 share · failed samples\n\n%s", sb.String())
	if n, _ := strconv.Atoi(os.Getenv("SHAREDBENCH_SEEDS")); n > 1 {
		sharedSeeds(n)
	}
}

// sharedSeeds runs every cell of the matrix on seeds 1…n (the latencies'
// and tokens' jitter) and prints, for each rule, the worst goodput and
// the worst 429 share over the seeds, and how many runs meet the target.
func sharedSeeds(n int) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| invocations | latency | bound by | previous rule | key share | key-share runs meeting the target |\n|---|---|---|---|---|---|\n")
	meetAll, runs := 0, 0
	only := regexp.MustCompile(os.Getenv("SHAREDBENCH_ONLY"))
	first, _ := strconv.Atoi(os.Getenv("SHAREDBENCH_FIRST")) // seeds first…first+n−1 (default 1)
	first = max(first, 1)
	skipPrev := os.Getenv("SHAREDBENCH_SKIP_PREVIOUS") != ""
	for _, c := range sharedCells() {
		if !only.MatchString(c.String()) {
			continue
		}
		var worst [2]connsim.SharedSummary
		meet := 0
		for k, p := range []gateway.Policy{previousPolicy(), gateway.StewardPolicy()} {
			worst[k].Goodput = 2
			if k == 0 && skipPrev {
				continue
			}
			for seed := first; seed < first+n; seed++ {
				s, warm := sharedScenario(c, p)
				s.Seed = uint64(seed)
				got := connsim.SummarizeShared(s, connsim.RunShared(s), warm, s.Duration)
				worst[k].Goodput = min(worst[k].Goodput, got.Goodput)
				worst[k].Share429 = max(worst[k].Share429, got.Share429)
				worst[k].FailedSamples = max(worst[k].FailedSamples, got.FailedSamples)
				if k == 1 && got.Goodput >= 0.9 && got.Share429 <= 0.01 {
					meet++
				}
				if k == 1 && os.Getenv("SHAREDBENCH_VERBOSE") != "" {
					// Exact figures (the table's 0.90 may be 0.895) and
					// the verdict on them (1.000 % may be over 1 %).
					verdict := "misses"
					if got.Goodput >= 0.9 && got.Share429 <= 0.01 {
						verdict = "meets"
					}
					fmt.Printf("%s seed %d: %.4f · %.4f %% · %d · %s\n", c, seed, got.Goodput, 100*got.Share429, got.FailedSamples, verdict)
				}
			}
		}
		meetAll += meet
		runs += n
		prev := sharedEntry(worst[0])
		if skipPrev {
			prev = "(not run)"
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %d of %d |\n", c.n, c.latency, kindName(c.tpm), prev, sharedEntry(worst[1]), meet, n)
	}
	fmt.Printf("\nOne key, many invocations (simulated), the worst of seeds %d–%d: goodput ÷ limit · 429 share · failed samples; %d of %d key-share runs meet the target\n\n%s", first, first+n-1, meetAll, runs, sb.String())
}
