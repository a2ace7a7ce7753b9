// Package connbench measures the gateway's connection controller (issue
// 18) against the fake provider's rate limiter: call latency 0.3 s, 1.5 s,
// 10 s and 30 s × a limit enforced over a full minute or over one second ×
// RPM-bound or TPM-bound, with the limit halved mid-run, for Steward's
// adaptive policy against fixed 10, fixed 50 and the Inspect-style policy.
//
// BenchmarkConnectionMatrix runs every cell as a discrete-event simulation
// on simulated time (internal/gateway/connsim: the real controller, the
// fake provider's real limiter and headers, the gateway's retry rules), so
// 30-second calls over 20 minutes take milliseconds. BenchmarkConnectionLoopback
// runs the cells this machine can drive in real time end to end: the real
// gateway in front of the real fake provider on loopback. docs/benchmarks.md
// holds the tables; -charts DIR writes the SVG charts docs/gateway.md shows.
package connbench

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/gateway/connsim"
)

var chartsDir = flag.String("charts", "", "write the controller charts (SVG) into this directory")

// The provider: 1 200 requests a minute (20 a second), or 1 200 000 tokens
// a minute at 1 000 tokens a call on average (±50 %) with 3 600 RPM
// announced too, so the same 20 calls a second bind either way.
const (
	rpmLimit      = 1200
	tpmLimit      = 1_200_000
	tpmRPM        = 3600
	tokensPerCall = 1000
)

type cell struct {
	latency  time.Duration
	interval time.Duration // 0: a minute
	tpm      bool
}

func (c cell) String() string {
	iv := "minute"
	if c.interval > 0 {
		iv = c.interval.String()
	}
	kind := "rpm"
	if c.tpm {
		kind = "tpm"
	}
	return fmt.Sprintf("%s/%s/%s", c.latency, iv, kind)
}

func cells() []cell {
	var out []cell
	for _, lat := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 10 * time.Second, 30 * time.Second} {
		for _, iv := range []time.Duration{0, time.Second} {
			for _, tpm := range []bool{false, true} {
				out = append(out, cell{lat, iv, tpm})
			}
		}
	}
	return out
}

type policy struct {
	name string
	p    gateway.Policy
}

func policies() []policy {
	return []policy{
		{"steward", gateway.StewardPolicy()},
		{"fixed10", gateway.FixedPolicy(10)},
		{"fixed50", gateway.FixedPolicy(50)},
		{"inspect", inspectPolicy()},
	}
}

// inspectPolicy mimics Inspect's adaptive connections (start 20, ×0.8 per
// episode, min 10, max 100, grows on success, ignores rate-limit headers):
// the baseline compared against, not a policy Steward ships.
func inspectPolicy() gateway.Policy {
	return gateway.Policy{Name: "inspect", Start: 20, Min: 10, Max: 100, Cut: 0.8, MinCooldown: time.Second}
}

// scenario is a cell's simulated run: more samples than the limit needs
// (1.5 × rate × latency + 50, ten calls each), calls spread ±20 % around the
// latency, the limit halved after max(10 min, 20 latencies) and the run as
// long again after it.
func scenario(c cell, p gateway.Policy) connsim.Scenario {
	pre := max(10*time.Minute, 20*c.latency)
	s := connsim.Scenario{
		Latency: c.latency, Jitter: 0.2, Interval: c.interval, RPM: rpmLimit, TokensPerCall: tokensPerCall,
		HalveAt: pre, Duration: 2 * pre, Samples: int(1.5*20*c.latency.Seconds()) + 50, CallsPerSample: 10,
		Policy: p, Seed: 1,
	}
	if c.tpm {
		s.RPM, s.TPM, s.TokenJitter = tpmRPM, tpmLimit, 0.5
	}
	return s
}

type outcome struct {
	sum connsim.Summary
	res connsim.Result
}

// meets reports whether a run meets the target: ≥ 0.95 of the
// limit at steady state, ≤ 1 % 429s, no failed sample, back to ≥ 0.9
// within three windows of the halving.
func meets(s connsim.Summary) bool {
	return s.Goodput >= 0.95 && s.Share429 <= 0.01 && s.FailedSamples == 0 && s.Recovery >= 0 && s.Recovery <= 3 && s.SteadyAt >= 0
}

func BenchmarkConnectionMatrix(b *testing.B) {
	results := map[string]map[string]outcome{}
	for _, c := range cells() {
		results[c.String()] = map[string]outcome{}
		for _, pol := range policies() {
			b.Run("sim/"+c.String()+"/"+pol.name, func(b *testing.B) {
				s := scenario(c, pol.p)
				var o outcome
				for i := 0; i < b.N; i++ {
					o.res = connsim.Run(s)
				}
				o.sum = connsim.Summarize(s, o.res, 0)
				results[c.String()][pol.name] = o
				report(b, o.sum)
			})
		}
	}
	// The table docs/benchmarks.md shows, on stdout so `make bench` prints it.
	fmt.Print("\nConnection controller matrix (simulated): goodput ÷ limit · 429 share · failed samples · time to 0.9 of the limit · windows to recover after the halving\n\n")
	fmt.Print(matrixTable(results))
	if *chartsDir != "" {
		for _, ch := range []struct {
			file string
			c    cell
		}{
			{"gateway-chart-1.5s-1s-rpm.svg", cell{1500 * time.Millisecond, time.Second, false}},
			{"gateway-chart-30s-1s-tpm.svg", cell{30 * time.Second, time.Second, true}},
		} {
			st, in := results[ch.c.String()]["steward"], results[ch.c.String()]["inspect"]
			s := scenario(ch.c, gateway.StewardPolicy())
			svg := chart(fmt.Sprintf("%s calls, limit enforced per %s, %s-bound, halved at %s (simulated)", ch.c.latency, intervalName(ch.c.interval), kindName(ch.c.tpm), s.HalveAt), s, st.res, in.res)
			if err := os.WriteFile(filepath.Join(*chartsDir, ch.file), []byte(svg), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func report(b *testing.B, s connsim.Summary) {
	b.ReportMetric(100*s.Goodput, "goodput-%")
	b.ReportMetric(100*s.Share429, "429-%")
	b.ReportMetric(float64(s.FailedSamples), "failed-samples")
	b.ReportMetric(s.SteadyAt.Seconds(), "steady-s")
	b.ReportMetric(float64(s.Recovery), "recovery-windows")
	b.ReportMetric(float64(s.PeakInFlight), "peak-in-flight")
}

func intervalName(d time.Duration) string {
	if d == 0 {
		return "minute"
	}
	return d.String()
}

func kindName(tpm bool) string {
	if tpm {
		return "TPM"
	}
	return "RPM"
}

// entry renders one policy's figures in a table cell.
func entry(s connsim.Summary) string {
	steady := "never"
	if s.SteadyAt >= 0 {
		steady = s.SteadyAt.String()
	}
	rec := "never"
	if s.Recovery >= 0 {
		rec = fmt.Sprint(s.Recovery)
	}
	g := fmt.Sprintf("%.2f", s.Goodput)
	if meets(s) {
		g = "**" + g + "**"
	}
	return fmt.Sprintf("%s · %.1f %% · %d · %s · %s", g, 100*s.Share429, s.FailedSamples, steady, rec)
}

func matrixTable(results map[string]map[string]outcome) string {
	var sb strings.Builder
	sb.WriteString("| latency | enforced per | bound by | Steward | fixed 10 | fixed 50 | Inspect-style | Steward meets the target |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells() {
		r := results[c.String()]
		ok := "yes"
		if !meets(r["steward"].sum) {
			ok = "**no**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.latency, intervalName(c.interval), kindName(c.tpm),
			entry(r["steward"].sum), entry(r["fixed10"].sum), entry(r["fixed50"].sum), entry(r["inspect"].sum), ok)
	}
	return sb.String()
}
