// Package rampbench measures the sample ramp end to end (issue 5): real
// `steward launch` processes run the same workload under four sample
// policies against the fake model provider on loopback, limited by requests
// per minute, by tokens per minute, and by a limit halved mid-run. It is a
// benchmark only (`make bench`); docs/benchmarks.md ("Ramp (end to end)")
// holds the measured table and how to reproduce it.
package rampbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/record"
)

const (
	apiKey = "sk-rampbench-41c7"
	// window is how long each run is measured; the workload is larger than
	// any policy finishes in it, so every policy is measured over the same time.
	window = 20 * time.Second
	// latency of one model call: the provider sustains reqRate × latency
	// calls in flight.
	latency = 2 * time.Second
	// reqRate is what the provider sustains, in requests per second: 5/s at
	// 2 s per call is 10 samples in flight. Each sample is a real agent
	// process (about 65 ms of CPU to start), so this is what a small shared
	// runner can drive while the provider stays the bottleneck.
	reqRate = 5
	samples = 400
	// left is the share of the provider's bucket left when a run starts: a
	// bucket starts full (a minute's worth), which would hide the limit for
	// most of a 20 s run, so the benchmark drains it first, as another
	// client sharing the quota would have.
	left = 0.15
)

var (
	buildOnce sync.Once
	exe       string
	buildErr  error
)

func stewardBin(b *testing.B) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rampbench-")
		if err != nil {
			buildErr = err
			return
		}
		exe = filepath.Join(dir, "steward")
		_, self, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", exe, "./cmd/steward")
		cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build steward: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return exe
}

// switchClock is the wall clock, except that while fast is set its timers
// fire at once: the fake's latencies are skipped to drain its buckets
// before a run in no time.
type switchClock struct {
	clock.Clock
	fast atomic.Bool
}

func (c *switchClock) NewTimer(d time.Duration) clock.Timer {
	if c.fast.Load() {
		d = 0
	}
	return c.Clock.NewTimer(d)
}

type scenario struct {
	name   string
	tokens bool // limited by TPM (else RPM)
	halve  bool // the limit halves at half the window
}

type policy struct {
	name  string
	fleet string // _steward.yaml
	task  string // extra task keys
	model string // extra model keys
	// probe adds a one-sample task that ramps in a frozen range (kept as an
	// option; no policy needs it since the tend loop leaves the gateway's
	// ceiling alone when no ramp is active).
	probe bool
}

var scenarios = []scenario{
	{name: "rpm"},
	{name: "tpm", tokens: true},
	{name: "rpm-halved", halve: true},
}

var policies = []policy{
	{name: "steward ramp"}, // the default range [50, 200]
	{name: "fixed max_samples 50", task: "    max_samples: 50\n"},
	// Inspect's samples follow its adaptive connections (start 20, max 100):
	// approximated by no sample ramp with 100 samples allowed (the Inspect
	// controller's maximum) and the gateway's adaptive connections deciding
	// how many make progress.
	{name: "inspect-style", fleet: "samples_ramp: false\n", task: "    max_samples: 100\n"},
	// Unlimited: 150 samples and connections at once, 15 times what the
	// provider sustains (more would spend the runner's CPU on process starts).
	{name: "unlimited", task: "    max_samples: 150\n", model: "  max_connections: 150\n"},
}

// prompt is sample i's input: an arithmetic question, padded with words of
// varying length so that requests cost different numbers of tokens.
func prompt(i int) string {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	var b strings.Builder
	fmt.Fprintf(&b, "What is %d+%d? Context:", i, 17)
	for k := 0; k < 20+(i*37)%100; k++ {
		b.WriteString(" " + words[(i+k)%len(words)])
	}
	return b.String()
}

func evalSet(url string, p policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model:\n  upstream: openai\n  name: gpt-fake\n  base_url: %s/v1\n  api_key_env: RAMPBENCH_KEY\n%s", url, p.model)
	fmt.Fprintf(&b, "tasks:\n  - name: chat\n    sandbox: {provider: local}\n    exclusive: false\n    agent: '\"$STEWARD_BIN\" agent chat'\n    scorer: {match: numeric}\n    timeout: 5m\n%s    samples:\n", p.task)
	for i := 0; i < samples; i++ {
		fmt.Fprintf(&b, "      - {id: s%04d, input: %q, target: \"%d\"}\n", i, prompt(i), i+17)
	}
	if p.probe {
		b.WriteString("  - name: probe\n    sandbox: {provider: local}\n    exclusive: false\n    agent: echo 1\n    scorer: {match: numeric}\n    samples: [{id: p, input: \"\", target: \"1\"}]\n")
	}
	return b.String()
}

// call sends one chat request through the fake's handler and returns the
// remaining requests and tokens it reported.
func call(h http.Handler, content string) (code int, remReq, remTok float64) {
	body, _ := json.Marshal(map[string]any{"model": "gpt-fake", "messages": []map[string]string{{"role": "user", "content": content}}})
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	remReq, _ = strconv.ParseFloat(w.Header().Get("x-ratelimit-remaining-requests"), 64)
	remTok, _ = strconv.ParseFloat(w.Header().Get("x-ratelimit-remaining-tokens"), 64)
	return w.Code, remReq, remTok
}

// tokensPerRequest measures what the workload's requests cost on the fake.
func tokensPerRequest() float64 {
	fp := fakeprovider.New(fakeprovider.Config{APIKey: apiKey})
	for i := 0; i < samples; i++ {
		call(fp.Handler(), prompt(i))
	}
	st := fp.Stats()
	return float64(st.TokensIn+st.TokensOut) / float64(st.Succeeded)
}

type point struct {
	at            time.Duration
	ok, limited   int64
	requests, tok int64
}

type result struct {
	scenario, policy string
	goodput          float64 // served ÷ what the limit allowed over the window
	share429         float64
	failed, passed   int
	steady           float64 // seconds; -1 never
	reversals        int
	swing            float64
	meanSetpoint     float64
	connLimit        int
}

func BenchmarkRampPolicies(b *testing.B) {
	bin := stewardBin(b)
	tpr := tokensPerRequest()
	var results []result
	for _, sc := range scenarios {
		for _, p := range policies {
			b.Run(sc.name+"/"+strings.ReplaceAll(p.name, " ", "-"), func(b *testing.B) {
				var r result
				for i := 0; i < b.N; i++ {
					r = runOne(b, bin, sc, p, tpr)
				}
				b.ReportMetric(r.goodput, "goodput/limit")
				b.ReportMetric(r.share429, "429/request")
				b.ReportMetric(float64(r.failed), "failed-samples")
				b.ReportMetric(r.steady, "steady-s")
				b.ReportMetric(float64(r.reversals), "reversals")
				b.ReportMetric(r.swing, "swing")
				results = append(results, r)
			})
		}
	}
	if len(results) == 0 {
		return
	}
	var t strings.Builder
	fmt.Fprintf(&t, "\n| limit | policy | goodput | 429 share | failed samples | passed in window | steady after | setpoint reversals | setpoint swing | mean setpoint | final connection limit |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		steady := "never"
		if r.steady >= 0 {
			steady = fmt.Sprintf("%.0f s", r.steady)
		}
		fmt.Fprintf(&t, "| %s | %s | %.1f%% | %.2f%% | %d | %d | %s | %d | %.1f%% | %.0f | %d |\n",
			r.scenario, r.policy, 100*r.goodput, 100*r.share429, r.failed, r.passed, steady, r.reversals, 100*r.swing, r.meanSetpoint, r.connLimit)
	}
	fmt.Print(t.String())
	if p := os.Getenv("RAMPBENCH_TABLE"); p != "" {
		_ = os.WriteFile(p, []byte(t.String()), 0o644)
	}
}

func runOne(b *testing.B, bin string, sc scenario, p policy, tpr float64) result {
	b.Helper()
	clk := &switchClock{Clock: clock.Real()}
	cfg := fakeprovider.Config{APIKey: apiKey, BaseLatency: latency, Clock: clk, Seed: 7}
	// The token limit is set so that the workload's mean request fits the
	// same 5 requests/s; requests differ in size, so TPM binds differently.
	tpm := int(math.Round(reqRate * 60 * tpr))
	if sc.tokens {
		cfg.TPM = tpm
	} else {
		cfg.RPM = reqRate * 60
	}
	fp := fakeprovider.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer fp.Close()

	// Drain the bucket to `left` of its capacity, instantly.
	clk.fast.Store(true)
	h := fp.Handler()
	capacity := float64(cfg.RPM)
	if sc.tokens {
		capacity = float64(cfg.TPM)
	}
	var leftover float64
	big := strings.Repeat(" alpha bravo", 400)
	for n := 0; ; n++ {
		content := "What is 1+1?"
		if sc.tokens {
			content += big
		}
		code, rr, rt := call(h, content)
		rem := rr
		if sc.tokens {
			rem = rt
		}
		if code != http.StatusOK || n > 100000 {
			b.Fatalf("draining the fake: status %d after %d requests", code, n)
		}
		if rem <= left*capacity {
			leftover = rem
			break
		}
	}
	clk.fast.Store(false)
	drained := time.Now()
	fp.ResetStats()

	dir := b.TempDir()
	rec := filepath.Join(dir, "rec")
	if err := os.WriteFile(filepath.Join(dir, "steward.yaml"), []byte(evalSet(url, p)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_steward.yaml"), []byte(p.fleet+"tend_interval: 1s\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "launch", "--record", rec, "--grace", "3s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RAMPBENCH_KEY="+apiKey, "CI=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// The window starts at the first model request (the launch's own start-up
	// is not the policy's doing).
	start := time.Now()
	for fp.Stats().Requests == 0 {
		select {
		case <-done:
			b.Fatalf("launch ended before any model request:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("no model request within a minute:\n%s", out.String())
		}
	}
	start = time.Now()
	// What the bucket held when the window opened: it refilled while the
	// launch started up.
	leftover = math.Min(capacity, leftover+capacity/60*start.Sub(drained).Seconds())

	var series []point
	snap := func() {
		st := fp.Stats()
		series = append(series, point{at: time.Since(start), ok: st.Succeeded, limited: st.RateLimited, requests: st.Requests, tok: st.TokensIn + st.TokensOut})
	}
	halved := false
	tick := time.NewTicker(250 * time.Millisecond)
	for time.Since(start) < window {
		<-tick.C
		if sc.halve && !halved && time.Since(start) >= window/2 {
			halve(b, url, sc, cfg)
			halved = true
		}
		snap()
	}
	tick.Stop()
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}

	// Goodput over the window against what the limit allowed in it.
	rate := capacity / 60
	allowed := leftover + rate*window.Seconds()
	if sc.halve {
		allowed = leftover + rate*window.Seconds()/2 + rate/2*window.Seconds()/2
	}
	last := series[len(series)-1]
	served := float64(last.ok)
	if sc.tokens {
		served = float64(last.tok)
	}
	r := result{scenario: sc.name, policy: p.name, goodput: served / allowed, steady: -1}
	if last.requests > 0 {
		r.share429 = float64(last.limited) / float64(last.requests)
	}
	r.steady = steadyAfter(series, sc)

	// Samples and the ramp history from the record.
	db, err := record.Open(context.Background(), rec)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs(context.Background())
	if err != nil || len(runs) == 0 {
		b.Fatalf("no run in the record: %v\n%s", err, out.String())
	}
	as, _ := db.Attempts(context.Background(), runs[0].ID)
	for _, a := range as {
		switch a.Status {
		case "errored", "failed", "infra":
			r.failed++
		case "passed":
			r.passed++
		}
	}
	pts, _ := db.Ramp(context.Background(), runs[0].ID)
	var sp []float64
	for _, pt := range pts {
		if pt.Task == "chat" && pt.At.Sub(start) <= window {
			sp = append(sp, float64(pt.Setpoint))
			r.connLimit = pt.ConnLimit
		}
	}
	r.reversals, r.swing, r.meanSetpoint = oscillation(sp)
	if os.Getenv("RAMPBENCH_DEBUG") != "" {
		for _, pt := range series {
			fmt.Fprintf(os.Stderr, "%5.1fs ok=%d 429=%d req=%d tok=%d\n", pt.at.Seconds(), pt.ok, pt.limited, pt.requests, pt.tok)
		}
		for _, pt := range pts {
			fmt.Fprintf(os.Stderr, "%5.1fs %s sp=%d ceil=%d limit=%d push=%v sat=%v %s\n", pt.At.Sub(start).Seconds(), pt.Decision, pt.Setpoint, pt.Ceiling, pt.ConnLimit, pt.Pushback, pt.Saturated, pt.Reason)
		}
	}
	return r
}

func halve(b *testing.B, url string, sc scenario, cfg fakeprovider.Config) {
	body := fmt.Sprintf(`{"rpm": %d}`, cfg.RPM/2)
	if sc.tokens {
		body = fmt.Sprintf(`{"tpm": %d}`, cfg.TPM/2)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/_fake/limits", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("POST /_fake/limits: %s", resp.Status)
	}
}

// steadyAfter is the time until the served rate (3 s moving average) came
// within 20 % of its plateau (the mean rate over the last 40 % of the
// segment) and stayed there for 4 s; measured from the start, or from the
// halving. -1: never.
func steadyAfter(series []point, sc scenario) float64 {
	from := time.Duration(0)
	if sc.halve {
		from = window / 2
	}
	served := func(p point) float64 {
		if sc.tokens {
			return float64(p.tok)
		}
		return float64(p.ok)
	}
	// served at whole seconds, by the last snapshot at or before each.
	var at []float64
	for s := 0; s <= int(window.Seconds()); s++ {
		v := 0.0
		for _, p := range series {
			if p.at <= time.Duration(s)*time.Second {
				v = served(p)
			}
		}
		at = append(at, v)
	}
	n := len(at) - 1
	f := int(from.Seconds())
	seg := n - f
	if seg < 8 {
		return -1
	}
	p0 := n - seg*2/5
	plateau := (at[n] - at[p0]) / float64(n-p0)
	if plateau <= 0 {
		return -1
	}
	ma := func(s int) float64 { // rate over [s-3, s]
		lo := max(s-3, f)
		if s <= lo {
			return 0
		}
		return (at[s] - at[lo]) / float64(s-lo)
	}
	for s := f + 1; s+4 <= n; s++ {
		ok := true
		for k := s; k <= s+4; k++ {
			if math.Abs(ma(k)-plateau) > 0.2*plateau {
				ok = false
				break
			}
		}
		if ok {
			return float64(s - f)
		}
	}
	return -1
}

// oscillation counts the direction changes of the setpoint, and its swing
// (standard deviation ÷ mean) and mean over the second half of the tends.
func oscillation(sp []float64) (reversals int, swing, mean float64) {
	dir := 0
	for i := 1; i < len(sp); i++ {
		d := 0
		switch {
		case sp[i] > sp[i-1]:
			d = 1
		case sp[i] < sp[i-1]:
			d = -1
		}
		if d != 0 {
			if dir != 0 && d != dir {
				reversals++
			}
			dir = d
		}
	}
	half := sp[len(sp)/2:]
	if len(half) == 0 {
		return reversals, 0, 0
	}
	for _, v := range half {
		mean += v
	}
	mean /= float64(len(half))
	var ss float64
	for _, v := range half {
		ss += (v - mean) * (v - mean)
	}
	if mean > 0 {
		swing = math.Sqrt(ss/float64(len(half))) / mean
	}
	return reversals, swing, mean
}
