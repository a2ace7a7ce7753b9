package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
)

// benchServe starts a gateway for a benchmark and returns its URL.
func benchServe(b *testing.B, cfg Config) (*Gateway, string) {
	b.Helper()
	g, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = g.Serve(ctx, ln); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	return g, "http://" + ln.Addr().String()
}

func benchFake(b *testing.B, cfg fakeprovider.Config) string {
	b.Helper()
	cfg.APIKey = realKey
	fp := fakeprovider.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	u, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return u
}

func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

const benchBody = `{"model":"gpt-bench","messages":[{"role":"user","content":"Say hello to the benchmark."}]}`

func do(client *http.Client, url, key string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkGatewayLatency alternates one direct call to the fake provider
// (no latency model, unlimited) with one call through the gateway, and
// reports both latency distributions and the gateway's added latency.
func BenchmarkGatewayLatency(b *testing.B) {
	fu := benchFake(b, fakeprovider.Config{})
	g, gu := benchServe(b, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey})
	tok := g.Issue("bench", nil)
	client := benchClient(4)
	direct, through := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	for i := 0; i < 50; i++ { // warm connections
		_, _ = do(client, fu+"/v1/chat/completions", realKey)
		_, _ = do(client, gu+"/v1/chat/completions", tok)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if c, err := do(client, fu+"/v1/chat/completions", realKey); err != nil || c != 200 {
			b.Fatalf("direct: %d %v", c, err)
		}
		t1 := time.Now()
		if c, err := do(client, gu+"/v1/chat/completions", tok); err != nil || c != 200 {
			b.Fatalf("gateway: %d %v", c, err)
		}
		t2 := time.Now()
		direct = append(direct, t1.Sub(t0))
		through = append(through, t2.Sub(t1))
	}
	b.StopTimer()
	b.ReportMetric(us(pct(direct, 0.5)), "direct-p50-µs")
	b.ReportMetric(us(pct(direct, 0.99)), "direct-p99-µs")
	b.ReportMetric(us(pct(through, 0.5)), "gateway-p50-µs")
	b.ReportMetric(us(pct(through, 0.99)), "gateway-p99-µs")
	b.ReportMetric(us(pct(through, 0.5)-pct(direct, 0.5)), "added-p50-µs")
	b.ReportMetric(us(pct(through, 0.99)-pct(direct, 0.99)), "added-p99-µs")
}

// BenchmarkGatewayThroughput measures requests/s with 32 concurrent
// clients, direct and through the gateway (fixed 256 connections, so the
// proxy is measured, not the controller).
func BenchmarkGatewayThroughput(b *testing.B) {
	fu := benchFake(b, fakeprovider.Config{})
	for _, mode := range []string{"direct", "gateway"} {
		b.Run(mode, func(b *testing.B) {
			url, key := fu+"/v1/chat/completions", realKey
			if mode == "gateway" {
				g, gu := benchServe(b, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, MaxConnections: 256})
				url, key = gu+"/v1/chat/completions", g.Issue("bench", nil)
			}
			client := benchClient(64)
			b.SetParallelism(16)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if c, err := do(client, url, key); err != nil || c != 200 {
						b.Errorf("%s: %d %v", mode, c, err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

type goodputResult struct {
	goodput, share429, share429All, failed float64
	limit, episodes                        int
}

// goodputRun offers more load than the provider takes (agents in a loop)
// through a gateway with the given policy, for warm+measure provider
// minutes, and measures the second part.
func goodputRun(b *testing.B, kind string, policy Policy, fixed int) goodputResult {
	if v := benchPolicyTweak; v != nil {
		v(&policy)
	}
	const (
		k       = 30.0 // one provider minute per 2 real seconds
		agents  = 120
		warm    = 60 * time.Second
		measure = 90 * time.Second
		rpm     = 400
		tpm     = 60_000
	)
	clk := clock.Scaled(k) // shared by the fake provider and the gateway: every ratio of their times holds
	clkStart := clk.Now()
	pc := fakeprovider.Config{APIKey: realKey, BaseLatency: 7 * time.Second, PerTokenLatency: 30 * time.Millisecond, Clock: clk, Seed: 1}
	body := benchBody
	switch kind {
	case "rpm":
		pc.RPM = rpm
	case "tpm":
		pc.TPM = tpm
		body = `{"model":"gpt-bench","messages":[{"role":"user","content":"` + strings.Repeat("Summarise the quarterly figures for the board. ", 60) + `"}]}`
	}
	fp := fakeprovider.New(pc)
	// Start with empty buckets, as when the account is already busy, so
	// the measured window is steady state and not the initial burst.
	fp.SetLimits(min(pc.RPM, 1), min(pc.TPM, 1))
	fp.SetLimits(pc.RPM, pc.TPM)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fu, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clk, Policy: &policy, MaxConnections: fixed}
	g, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = g.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	tok := g.Issue("bench", nil)
	client := benchClient(agents)
	var ok, failed atomic.Int64
	var measuring atomic.Bool
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < agents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for actx.Err() == nil {
				req, _ := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader([]byte(body)))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if !measuring.Load() {
					continue
				}
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	// probe reads what is left in the provider's bucket (a one-token call).
	probe := func() float64 {
		req, _ := http.NewRequest(http.MethodPost, fu+"/v1/embeddings", strings.NewReader(`{"model":"e","input":"x"}`))
		req.Header.Set("Authorization", "Bearer "+realKey)
		req, _ = http.NewRequest(http.MethodPost, fu+"/v1/chat/completions", strings.NewReader(`{"model":"p","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+realKey)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := "x-ratelimit-remaining-requests"
		if kind == "tpm" {
			h = "x-ratelimit-remaining-tokens"
		}
		var v float64
		_, _ = fmt.Sscan(resp.Header.Get(h), &v)
		return v
	}
	if testing.Verbose() && benchHistory {
		go func() {
			for clock.Sleep(actx, clk, 5*time.Second) == nil {
				w := g.Window()
				b.Logf("  t=%s limit %d in-flight %d peak %d saturated %v pushback %v pacing %v 429s %d",
					clk.Now().Sub(clkStart).Round(time.Second), w.Limit, w.InFlight, w.PeakInFlight, w.Saturated, w.Pushback, g.Controller().Pacing(), w.RateLimited)
			}
		}()
	}
	_ = clock.Sleep(ctx, clk, warm)
	sw := fp.Stats()
	fp.ResetStats()
	t0 := clk.Now()
	left0 := probe()
	measuring.Store(true)
	_ = clock.Sleep(ctx, clk, measure)
	st := fp.Stats()
	left1 := probe()
	minutes := clk.Now().Sub(t0).Minutes()
	measuring.Store(false)
	stop()
	wg.Wait()
	var res goodputResult
	// Goodput counts what the provider admitted during the window (answers
	// finishing in it may have been admitted before it).
	// The provider's capacity in the window is its refill plus what its
	// bucket held at the start and no longer holds at the end.
	admitted := st.Requests - st.RateLimited - st.QuotaRefused - st.Unauthorized - st.BadRequests
	switch kind {
	case "rpm":
		res.goodput = float64(admitted) / (rpm*minutes + left0 - left1)
	case "tpm":
		perReq := float64(st.TokensIn+st.TokensOut) / float64(max(st.Succeeded, 1))
		res.goodput = float64(admitted) * perReq / (tpm*minutes + left0 - left1)
	}
	b.Logf("%s %s: measured window: admitted %d in %.2f provider minutes, bucket %.0f -> %.0f, requests %d, 429 %d", kind, policy.Name, admitted, minutes, left0, left1, st.Requests, st.RateLimited)
	if st.Requests > 0 {
		res.share429 = float64(st.RateLimited) / float64(st.Requests)
	}
	if n := st.Requests + sw.Requests; n > 0 {
		res.share429All = float64(st.RateLimited+sw.RateLimited) / float64(n)
	}
	if n := ok.Load() + failed.Load(); n > 0 {
		res.failed = float64(failed.Load()) / float64(n)
	}
	if testing.Verbose() && benchHistory {
		for _, h := range g.History() {
			b.Logf("  %s %d -> %d (%s ×%d)", h.At.Sub(clkStart).Round(time.Second), h.From, h.To, h.Reason, h.Count)
		}
	}
	res.limit = g.Controller().Limit()
	res.episodes = g.Controller().Episodes()
	return res
}

// BenchmarkGatewayGoodput runs the same overload (120 agents in a loop)
// against the fake provider limited by RPM and, separately, by TPM, for
// Steward's controller, fixed 10 connections and an Inspect-style
// controller, time-scaled 30× (each run is 2.5 provider minutes: 5 s).
func BenchmarkGatewayGoodput(b *testing.B) {
	policies := []struct {
		name  string
		p     Policy
		fixed int
	}{
		{"steward", StewardPolicy(), 0},
		{"fixed10", FixedPolicy(10), 10},
		{"inspect", InspectPolicy(), 0},
	}
	for _, kind := range []string{"rpm", "tpm"} {
		for _, pol := range policies {
			name := kind + "/" + pol.name
			b.Run(name, func(b *testing.B) {
				// One run is the measurement; whatever b.N the framework
				// asks for again reports the same run.
				r, done := goodputCache[name]
				if !done {
					r = goodputRun(b, kind, pol.p, pol.fixed)
					goodputCache[name] = r
				}
				b.ReportMetric(100*r.goodput, "goodput-%")
				b.ReportMetric(100*r.share429, "429-%")
				b.ReportMetric(100*r.share429All, "429-whole-run-%")
				b.ReportMetric(100*r.failed, "agent-errors-%")
				b.ReportMetric(float64(r.limit), "final-limit")
				b.ReportMetric(float64(r.episodes), "episodes")
				b.Logf("%s %s: goodput %.1f%% of the limit, %.1f%% of upstream requests got 429 (%.1f%% over the whole run), %.2f%% agent errors, limit %d after %d episodes",
					kind, pol.name, 100*r.goodput, 100*r.share429, 100*r.share429All, 100*r.failed, r.limit, r.episodes)
			})
		}
	}
}

var _ = fmt.Sprint

// benchPolicyTweak lets an experiment adjust the policies under test.
var benchPolicyTweak func(*Policy)

var benchHistory = false

var goodputCache = map[string]goodputResult{}
