package connbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
)

// realShared is one real-time run of several gateways (one per
// invocation) on one key of one fake provider, on loopback.
type realShared struct {
	n       int
	latency time.Duration
	tpm     bool
	// samples at once per invocation, calls per sample; work > 0: samples
	// per invocation in all (the run ends when all are done).
	samples, calls, work int
	// stagger between starts; the first invocation stops at stopFirst
	// (0: never); the run lasts dur (work == 0).
	stagger, stopFirst, dur time.Duration
	// followLimit: samples at once follow each gateway's connection limit
	// (the Inspect-style peer: Inspect's samples follow its connections)
	// instead of samples; work > 0 and no stagger or stop.
	followLimit bool
	// tokenJitter > 0: each call's prompt is drawn from (1 ± tokenJitter)
	// × the usual one, uniformly (its tokens with it), as the simulated
	// TPM-bound cells draw their calls' tokens; seed draws them and the
	// provider's latencies (SHAREDBENCH_SEED, default 1).
	tokenJitter float64
	seed        uint64
}

type realSharedOut struct {
	goodput, share429 float64
	requests, refused int64
	makespan          time.Duration
	calls             int64
}

// runRealShared drives r with policy p: n gateways, each with its own
// agents, in front of one fake provider enforcing 20 calls a second over
// one-second intervals (RPM, or TPM at the prompt's tokens).
func runRealShared(r realShared, p gateway.Policy, tokens int) (realSharedOut, error) {
	rate := 20.0
	seed := max(r.seed, 1)
	pc := fakeprovider.Config{APIKey: loopKey, Interval: time.Second, BaseLatency: r.latency, Seed: seed, RPM: int(rate * 60)}
	if r.tpm {
		pc.RPM, pc.TPM = 3*int(rate*60), int(rate*60)*tokens
	}
	fp := fakeprovider.New(pc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fu, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return realSharedOut{}, err
	}
	body := callBody()
	// draw is the next call's body: the usual one, or with tokenJitter a
	// prompt of promptRepeats × (1 ± tokenJitter) sentences.
	var drawMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	draw := func() []byte {
		if r.tokenJitter <= 0 {
			return body
		}
		drawMu.Lock()
		f := 1 + r.tokenJitter*(2*rng.Float64()-1)
		drawMu.Unlock()
		return callBodyOf(max(1, int(math.Round(promptRepeats*f))))
	}
	var wg sync.WaitGroup
	var calls atomic.Int64
	begin := time.Now()
	var lastDone atomic.Int64
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	for i := 0; i < r.n; i++ {
		pol := p
		g, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: loopKey, Policy: &pol})
		if err != nil {
			return realSharedOut{}, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return realSharedOut{}, err
		}
		go func() { _ = g.Serve(ctx, ln) }()
		url := "http://" + ln.Addr().String() + "/v1/chat/completions"
		client := &http.Client{Transport: &http.Transport{MaxIdleConns: r.samples, MaxIdleConnsPerHost: r.samples}}
		// ictx ends when the invocation stops starting calls: the first at
		// stopFirst, as a shard that has run out of samples (its calls in
		// flight finish, as the simulator's do; they end with the run).
		ictx := runCtx
		if i == 0 && r.stopFirst > 0 {
			var c context.CancelFunc
			ictx, c = context.WithTimeout(runCtx, r.stopFirst)
			defer c()
		}
		var left atomic.Int64
		left.Store(int64(r.work))
		start := time.Duration(i) * r.stagger
		// sample runs one sample's calls one after another.
		sample := func(tok string) {
			for c := 0; c < r.calls && ictx.Err() == nil; c++ {
				req, _ := http.NewRequestWithContext(runCtx, http.MethodPost, url, bytes.NewReader(draw()))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					break
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					calls.Add(1)
				}
			}
			lastDone.Store(int64(time.Since(begin)))
		}
		if r.followLimit {
			// A sample starts whenever fewer run than the connection limit
			// (looked at when one ends, and every 20 ms as the limit moves).
			wg.Add(1)
			go func() {
				defer wg.Done()
				ended := make(chan struct{}, r.work)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				running, started := 0, 0
				for started < r.work || running > 0 {
					for started < r.work && running < g.Controller().Limit() {
						tok := g.Issue(fmt.Sprintf("inv%d-s%d", i, started), nil)
						started++
						running++
						wg.Add(1)
						go func() {
							defer wg.Done()
							sample(tok)
							ended <- struct{}{}
						}()
					}
					select {
					case <-ended:
						running--
					case <-tick.C:
					case <-ictx.Done():
						return
					}
				}
			}()
			continue
		}
		for k := 0; k < r.samples; k++ {
			// One token per sample, as each attempt has its own.
			tok := g.Issue(fmt.Sprintf("inv%d-s%d", i, k), nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-time.After(start):
				case <-ictx.Done():
					return
				}
				for ictx.Err() == nil {
					if r.work > 0 && left.Add(-1) < 0 {
						return
					}
					sample(tok)
				}
			}()
		}
	}
	var out realSharedOut
	if os.Getenv("SHAREDBENCH_DEBUG") != "" {
		// The provider's admissions and 429s every second, on stderr.
		go func() {
			var prev fakeprovider.Stats
			for t := time.NewTicker(time.Second); ; {
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				st := fp.Stats()
				lv, _ := fp.Level()
				fmt.Fprintf(os.Stderr, "%s %s t=%s adm=%d 429=%d bucket=%.1f\n", p.Name, sharedCell{r.n, r.latency, r.tpm}, time.Since(begin).Round(time.Second),
					(st.Requests-st.RateLimited)-(prev.Requests-prev.RateLimited), st.RateLimited-prev.RateLimited, lv)
				prev = st
			}
		}()
	}
	warmUp := max(10*time.Second, 2*r.latency)
	if r.work == 0 {
		// Goodput from the warm-up to the end: what the provider admitted
		// (requests, or tokens when TPM-bound) over its refill and what
		// its bucket gave up.
		t := time.NewTimer(warmUp)
		<-t.C
		warm, warmAt := fp.Stats(), time.Now()
		wr, wt := fp.Level()
		t = time.NewTimer(r.dur - warmUp)
		<-t.C
		st := fp.Stats()
		er, et := fp.Level()
		span := time.Since(warmAt).Seconds()
		if r.tpm {
			// Tokens the bucket charged at admission, as the simulator
			// counts them (tokens served would miss the calls still in
			// flight at the end and count those of before the warm-up).
			adm := float64(st.TokensCharged - warm.TokensCharged)
			out.goodput = adm / (float64(pc.TPM)/60*span + wt - et)
		} else {
			adm := float64((st.Requests - st.RateLimited) - (warm.Requests - warm.RateLimited))
			out.goodput = adm / (rate*span + wr - er)
		}
		stopAll()
	}
	wg.Wait()
	st := fp.Stats()
	out.requests, out.refused = st.Requests, st.RateLimited
	if st.Requests > 0 {
		out.share429 = float64(st.RateLimited) / float64(st.Requests)
	}
	out.makespan = time.Duration(lastDone.Load())
	out.calls = calls.Load()
	return out, nil
}

// realSharedCells: the subset this machine runs by default, or the full
// matrix with SHAREDBENCH_FULL=1 (2, 4, 8 invocations × 0.3, 1.5, 10 s ×
// RPM, TPM; about an hour). Each run ends 12 latencies (at least 90 s)
// after the last start, or with SHAREDBENCH_LONG=1 20 latencies (at least
// 3 minutes), as the simulated matrix does.
func realSharedCells() []realShared {
	mk := func(n int, lat time.Duration, tpm bool) realShared {
		st := max(5*time.Second, 2*lat)
		dur := time.Duration(n-1)*st + max(90*time.Second, 12*lat)
		if os.Getenv("SHAREDBENCH_LONG") != "" {
			// The simulated matrix's length: 20 latencies after the last
			// start, at least 3 minutes (sharedScenario).
			dur = time.Duration(n-1)*st + max(3*time.Minute, 20*lat)
		}
		c := realShared{n: n, latency: lat, tpm: tpm, samples: int(1.5*20*lat.Seconds()) + 20, calls: 10,
			stagger: st, stopFirst: dur * 6 / 10, dur: dur}
		if n, _ := strconv.Atoi(os.Getenv("SHAREDBENCH_SEED")); n > 0 {
			c.seed = uint64(n)
		}
		if tpm {
			// The simulated TPM-bound cells' token jitter (sharedScenario):
			// calls of 0.5–1.5 × the mean tokens.
			c.tokenJitter = 0.5
			if v, err := strconv.ParseFloat(os.Getenv("SHAREDBENCH_TOKEN_JITTER"), 64); err == nil {
				c.tokenJitter = v
			}
		}
		return c
	}
	if os.Getenv("SHAREDBENCH_FULL") != "" {
		var out []realShared
		for _, n := range []int{2, 4, 8} {
			for _, lat := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 10 * time.Second} {
				for _, tpm := range []bool{false, true} {
					out = append(out, mk(n, lat, tpm))
				}
			}
		}
		return out
	}
	if os.Getenv("SHAREDBENCH_ONE") != "" {
		return []realShared{mk(4, 1500*time.Millisecond, false)}
	}
	return []realShared{mk(4, 1500*time.Millisecond, false), mk(8, 300*time.Millisecond, true), mk(4, 10*time.Second, false)}
}

// BenchmarkSharedKeyLoopback runs shared-key cells in real time: n real
// gateways in front of one real fake provider on loopback, the previous
// pacing rule and the key-share rule side by side (each with its own
// provider), and the issue's makespan case: 4 invocations × 100 samples ×
// 3 calls of 1 s, and one invocation of 400 samples × 3 calls of 1.5 s,
// and of 0.3 s (ideal: calls ÷ 20 a second), where the Inspect-style peer
// runs beside the two rules.
func BenchmarkSharedKeyLoopback(b *testing.B) {
	tokens := tokensPerRealCall(b)
	var sb strings.Builder
	sb.WriteString("| invocations | latency | bound by | previous rule | key share |\n|---|---|---|---|---|\n")
	pols := []gateway.Policy{previousPolicy(), gateway.StewardPolicy()}
	both := func(r realShared) [2]realSharedOut {
		var got [2]realSharedOut
		var wg sync.WaitGroup
		for k, p := range pols {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, err := runRealShared(r, p, tokens)
				if err != nil {
					b.Error(err)
				}
				got[k] = o
			}()
		}
		wg.Wait()
		return got
	}
	for _, c := range realSharedCells() {
		name := sharedCell{c.n, c.latency, c.tpm}.String()
		var got [2]realSharedOut
		ran := false
		b.Run("real/"+name, func(b *testing.B) {
			got = both(c)
			ran = true
			b.ReportMetric(100*got[1].goodput, "goodput-%")
			b.ReportMetric(100*got[1].share429, "429-%")
			b.ReportMetric(100*got[0].goodput, "previous-goodput-%")
			b.ReportMetric(100*got[0].share429, "previous-429-%")
		})
		if ran {
			e := func(o realSharedOut) string {
				return fmt.Sprintf("%.2f · %.1f %% (%d of %d)", o.goodput, 100*o.share429, o.refused, o.requests)
			}
			fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s |\n", c.n, c.latency, kindName(c.tpm), e(got[0]), e(got[1]))
		}
	}
	fmt.Printf("\nOne key, many invocations (real time, loopback): goodput ÷ limit · 429 share (refused of requests)\n\n%s", sb.String())
	var mb strings.Builder
	mb.WriteString("| workload | ideal | previous rule | key share | Inspect-style |\n|---|---|---|---|---|\n")
	for _, m := range []struct {
		name string
		r    realShared
	}{
		{"x4/1s/100x3", realShared{n: 4, latency: time.Second, samples: 100, calls: 3, work: 100}},
		{"x1/1.5s/400x3", realShared{n: 1, latency: 1500 * time.Millisecond, samples: 50, calls: 3, work: 400}},
		{"x1/0.3s/400x3", realShared{n: 1, latency: 300 * time.Millisecond, samples: 50, calls: 3, work: 400}},
	} {
		var got [3]realSharedOut
		ran := false
		b.Run("makespan/"+m.name, func(b *testing.B) {
			got = [3]realSharedOut{}
			runs := []func() realSharedOut{}
			for _, p := range pols {
				runs = append(runs, func() realSharedOut {
					o, err := runRealShared(m.r, p, tokens)
					if err != nil {
						b.Error(err)
					}
					return o
				})
			}
			if m.r.n == 1 {
				// The Inspect-style peer: its controller, its samples
				// following its connections (up to its maximum of 100).
				ri := m.r
				ri.samples, ri.followLimit = 100, true
				runs = append(runs, func() realSharedOut {
					o, err := runRealShared(ri, inspectPolicy(), tokens)
					if err != nil {
						b.Error(err)
					}
					return o
				})
			}
			// Side by side, each with its own provider.
			var wg sync.WaitGroup
			for k, run := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[k] = run()
				}()
			}
			wg.Wait()
			ran = true
			ideal := time.Duration(float64(m.r.n*m.r.work*m.r.calls) / 20 * float64(time.Second))
			b.ReportMetric(got[1].makespan.Seconds()/ideal.Seconds(), "makespan/ideal")
			b.ReportMetric(100*got[1].share429, "429-%")
			if m.r.n == 1 {
				b.ReportMetric(got[2].makespan.Seconds()/ideal.Seconds(), "inspect-makespan/ideal")
				b.ReportMetric(100*got[2].share429, "inspect-429-%")
			}
		})
		if ran {
			ideal := time.Duration(float64(m.r.n*m.r.work*m.r.calls) / 20 * float64(time.Second))
			e := func(o realSharedOut) string {
				return fmt.Sprintf("%.1f s (%.2f×) · %.1f %% 429s (%d of %d)", o.makespan.Seconds(), o.makespan.Seconds()/ideal.Seconds(), 100*o.share429, o.refused, o.requests)
			}
			in := "–"
			if m.r.n == 1 {
				in = e(got[2])
			}
			fmt.Fprintf(&mb, "| %s | %.0f s | %s | %s | %s |\n", m.name, ideal.Seconds(), e(got[0]), e(got[1]), in)
		}
	}
	fmt.Printf("\nMakespan against the provider-bound ideal (calls ÷ 20 a second), real time on loopback\n\n%s", mb.String())
}
