package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

// attackerEnv makes the test binary act as the hostile sandbox (see
// TestMain): "URL TOKEN".
const attackerEnv = "STEWARD_TEST_HOSTILE_SANDBOX"

func TestMain(m *testing.M) {
	if v := os.Getenv(attackerEnv); v != "" {
		url, tok, _ := strings.Cut(v, " ")
		stop := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stop) }() // the parent closes stdin to stop
		hostileAttack(url, tok, os.Getenv("STEWARD_HOSTILE"), stop)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rssBytes reads the process's resident set size from /proc (0 elsewhere).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// hostileAttack is what the hostile sandbox does until stop closes. which
// picks the attacks (empty: all): c = 3000 connections trickling their
// headers, redialled after the Retry-After they are refused with; b = huge
// chunked bodies in a loop; f = a flood of concurrent requests on its token.
func hostileAttack(url, token, which string, stop <-chan struct{}) {
	attack := func(k string) bool { return which == "" || strings.Contains(which, k) }
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	if attack("c") {
		for k := 0; k < 3000; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped() {
					c, err := dialFrom("127.0.0.2", url)
					if err != nil {
						time.Sleep(100 * time.Millisecond) // the attacker's pace
						continue
					}
					fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Trickle: ")
					go func() { <-stop; c.Close() }()
					_, _ = http.ReadResponse(bufio.NewReader(c), nil)
					c.Close()
					select {
					case <-stop:
					case <-time.After(time.Second): // the Retry-After
					}
				}
			}()
		}
	}
	hc := clientFrom("127.0.0.2", 64)
	send := func(body io.Reader) int {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", body)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if attack("b") {
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped() {
					send(&zeros{max: 64 << 20})
				}
			}()
		}
	}
	if attack("f") {
		for w := 0; w < 32; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped() {
					if send(strings.NewReader(benchBody)) == 429 {
						time.Sleep(10 * time.Millisecond) // the attacker's pace
					}
				}
			}()
		}
	}
	wg.Wait()
}

// BenchmarkGatewayHostileSandbox measures a polite sandbox's calls (from
// 127.0.0.1, 4 clients, a provider answering in 50 ms) with and without a
// hostile sandbox attacking the same gateway from 127.0.0.2. The attacker is
// a separate process limited to one CPU (GOMAXPROCS=1), like a default
// Docker sandbox (cpus: 1). Reported: the polite p99 under attack as a ratio
// of the quiet p99 (quiet phases before and after), and the peak RSS and heap
// of the process holding the gateway (with the fake provider and the polite
// client). STEWARD_HOSTILE picks the attacks (see hostileAttack).
func BenchmarkGatewayHostileSandbox(b *testing.B) {
	fu := benchFake(b, fakeprovider.Config{BaseLatency: 50 * time.Millisecond})
	g, gu := benchServe(b, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey})
	polite := g.Issue("polite", nil)
	hostile := g.Issue("hostile", nil)
	pc := clientFrom("127.0.0.1", 8)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}

	politePhase := func() ([]time.Duration, int) {
		var mu sync.Mutex
		var lat []time.Duration
		fails := 0
		var wg sync.WaitGroup
		for c := 0; c < 4; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					t0 := time.Now()
					code, err := do(pc, gu+"/v1/chat/completions", polite)
					d := time.Since(t0)
					mu.Lock()
					if err != nil || code != 200 {
						fails++
					} else {
						lat = append(lat, d)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return lat, fails
	}

	for i := 0; i < b.N; i++ {
		quiet1, f1 := politePhase()

		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), attackerEnv+"="+gu+" "+hostile, "GOMAXPROCS=1")
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		var peakRSS, peakHeap atomic.Uint64
		var mwg sync.WaitGroup
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			var ms runtime.MemStats
			for {
				if r := rssBytes(); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		time.Sleep(2 * time.Second) // let the attack build up before measuring
		under, f2 := politePhase()
		open := g.conns.Open()
		in.Close()
		_ = cmd.Wait()
		close(stop)
		mwg.Wait()
		quiet2, f3 := politePhase()

		quiet := append(quiet1, quiet2...)
		qp99, hp99 := pct(quiet, 0.99), pct(under, 0.99)
		b.ReportMetric(float64(hp99)/float64(qp99), "p99-ratio")
		b.ReportMetric(float64(qp99)/1e6, "quiet-p99-ms")
		b.ReportMetric(float64(hp99)/1e6, "hostile-p99-ms")
		b.ReportMetric(float64(peakRSS.Load())/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(f1+f2+f3), "polite-failures")
		b.Logf("quiet p50 %v p99 %v; under attack p50 %v p99 %v; polite failures %d; gateway connections open under attack %d",
			pct(quiet, 0.5), qp99, pct(under, 0.5), hp99, f1+f2+f3, open)
	}
}
