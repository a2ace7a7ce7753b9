package connbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/gateway/connsim"
)

const loopKey = "sk-connbench-5e1d"

// loopbackPre and loopbackPost are how long a real-time cell runs before
// and after the halving: three 10 s windows each.
const (
	loopbackPre  = 30 * time.Second
	loopbackPost = 30 * time.Second
)

// loopbackCells are the cells this machine drives in real time: the short
// calls, with the limit enforced per second (the case of the issue). The
// 10 s and 30 s calls need many minutes of wall time per run and hundreds
// of concurrent agents; the simulation covers them.
func loopbackCells() []cell {
	var out []cell
	for _, lat := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond} {
		for _, tpm := range []bool{false, true} {
			out = append(out, cell{lat, time.Second, tpm})
		}
	}
	return out
}

// The usual call's prompt: about a thousand tokens (input + output), so a
// TPM limit binds the way it does in the simulation.
const (
	promptSentence = "Summarise the quarterly figures for the board in plain words. "
	promptRepeats  = 50
)

func callBody() []byte { return callBodyOf(promptRepeats) }

// callBodyOf is a call whose prompt repeats the sentence n times: about
// 19 tokens a sentence (the fake provider's count), input and output.
func callBodyOf(n int) []byte {
	return []byte(`{"model":"gpt-bench","messages":[{"role":"user","content":"` + strings.Repeat(promptSentence, n) + `"}]}`)
}

// tokensPerRealCall asks an unlimited fake provider what one call costs.
func tokensPerRealCall(b *testing.B) int {
	fp := fakeprovider.New(fakeprovider.Config{APIKey: loopKey})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, u+"/v1/chat/completions", bytes.NewReader(callBody()))
	req.Header.Set("Authorization", "Bearer "+loopKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	st := fp.Stats()
	return int(st.TokensIn + st.TokensOut)
}

// loopbackRun drives one policy through a real gateway in front of a real
// fake provider on loopback, in real time, and measures it as the
// simulation does.
func loopbackRun(c cell, pol policy, tokens int) (connsim.Summary, connsim.Result, error) {
	rate := 20.0 // calls a second the limit allows
	pc := fakeprovider.Config{APIKey: loopKey, Interval: c.interval, BaseLatency: c.latency, Seed: 1, RPM: int(rate * 60)}
	if c.tpm {
		pc.RPM, pc.TPM = 3*int(rate*60), int(rate*60)*tokens
	}
	fp := fakeprovider.New(pc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fu, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return connsim.Summary{}, connsim.Result{}, err
	}
	p := pol.p
	g, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: loopKey, Policy: &p, MaxConnections: p.Fixed})
	if err != nil {
		return connsim.Summary{}, connsim.Result{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return connsim.Summary{}, connsim.Result{}, err
	}
	go func() { _ = g.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	tok := g.Issue("bench", nil)
	samples := int(1.5*rate*c.latency.Seconds()) + 50
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: samples, MaxIdleConnsPerHost: samples}}
	body := callBody()
	var done, failed atomic.Int64
	actx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < samples; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for actx.Err() == nil {
				bad := false
				for k := 0; k < 10 && !bad && actx.Err() == nil; k++ {
					req, _ := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := client.Do(req)
					if err != nil {
						if actx.Err() != nil {
							return
						}
						bad = true
						break
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					bad = resp.StatusCode != http.StatusOK
				}
				if actx.Err() != nil {
					return
				}
				done.Add(1)
				if bad {
					failed.Add(1)
				}
			}
		}()
	}
	var res connsim.Result
	var prevAdm, prev429 int64
	tick := time.NewTicker(time.Second)
	start := time.Now()
	for range tick.C {
		el := time.Since(start).Round(time.Second)
		st := fp.Stats()
		adm := st.Requests - st.RateLimited - st.QuotaRefused - st.Unauthorized - st.BadRequests
		rpm, tpm := fp.Limits()
		br, bt := fp.Level()
		p := connsim.Point{
			T: el, Admitted: int(adm - prevAdm), Tokens: int(adm-prevAdm) * tokens, RateLimited: int(st.RateLimited - prev429),
			RPM: rpm, TPM: tpm, InFlight: g.Controller().InFlight(), ConnLimit: g.Controller().Limit(),
			BucketRequests: br, BucketTokens: bt,
		}
		p.LimitRate = float64(rpm) / 60
		if tpm > 0 {
			p.LimitRate = min(p.LimitRate, float64(tpm)/60/float64(tokens))
		}
		prevAdm, prev429 = adm, st.RateLimited
		res.Series = append(res.Series, p)
		res.PeakInFlight = max(res.PeakInFlight, p.InFlight)
		if len(res.Series) == int(loopbackPre/time.Second) {
			// Halve just after the step closed, as the simulation does.
			fp.SetLimits(rpm/2, tpm/2)
		}
		if len(res.Series) >= int((loopbackPre+loopbackPost)/time.Second) {
			break
		}
	}
	tick.Stop()
	st := fp.Stats()
	res.Requests, res.RateLimited = int(st.Requests), int(st.RateLimited)
	stop()
	wg.Wait()
	res.Samples, res.FailedSamples = int(done.Load()), int(failed.Load())
	res.History = g.History()
	s := connsim.Scenario{RPM: pc.RPM, TPM: pc.TPM, Interval: c.interval, TokensPerCall: tokens, HalveAt: loopbackPre, Duration: loopbackPre + loopbackPost}
	return connsim.Summarize(s, res, 10*time.Second), res, nil
}

// BenchmarkConnectionLoopback runs the real-time cells: for each, the four
// policies side by side (each with its own gateway and fake provider).
func BenchmarkConnectionLoopback(b *testing.B) {
	tokens := tokensPerRealCall(b)
	var sb strings.Builder
	sb.WriteString("| latency | enforced per | bound by | Steward | fixed 10 | fixed 50 | Inspect-style | Steward meets the target |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range loopbackCells() {
		var mu sync.Mutex
		out := map[string]connsim.Summary{}
		b.Run("real/"+c.String(), func(b *testing.B) {
			var wg sync.WaitGroup
			for _, pol := range policies() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, _, err := loopbackRun(c, pol, tokens)
					if err != nil {
						b.Error(err)
					}
					mu.Lock()
					out[pol.name] = s
					mu.Unlock()
				}()
			}
			wg.Wait()
			s := out["steward"]
			report(b, s)
			for _, pol := range policies()[1:] {
				o := out[pol.name]
				b.ReportMetric(100*o.Goodput, pol.name+"-goodput-%")
				b.ReportMetric(100*o.Share429, pol.name+"-429-%")
			}
		})
		if len(out) == 0 {
			continue // filtered out by -bench
		}
		ok := "yes"
		if !meets(out["steward"]) {
			ok = "**no**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.latency, intervalName(c.interval), kindName(c.tpm),
			entry(out["steward"]), entry(out["fixed10"]), entry(out["fixed50"]), entry(out["inspect"]), ok)
	}
	fmt.Printf("\nConnection controller, real time on loopback (%d tokens a call): goodput ÷ limit · 429 share · failed samples · time to 0.9 of the limit · windows to recover after the halving\n\n%s", tokens, sb.String())
}
