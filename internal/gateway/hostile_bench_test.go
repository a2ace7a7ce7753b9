package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

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

// BenchmarkGatewayHostileSandbox measures a polite sandbox's calls (from
// 127.0.0.1) with and without a hostile sandbox (127.0.0.2) attacking the
// same gateway: thousands of connections trickling their headers, huge
// chunked bodies in a loop, bodies trickled a byte at a time, and a flood of
// concurrent requests on its token. It reports the polite p99 under attack
// as a ratio of the quiet p99 (quiet phases run before and after), and the
// peak RSS and heap of the whole test process (gateway, fake provider and
// both clients together, so an upper bound for the gateway).
func BenchmarkGatewayHostileSandbox(b *testing.B) {
	fu := benchFake(b, fakeprovider.Config{BaseLatency: 50 * time.Millisecond})
	g, gu := benchServe(b, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey})
	polite := g.Issue("polite", nil)
	hostile := g.Issue("hostile", nil)
	pc := clientFrom("127.0.0.1", 8)

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

	// STEWARD_HOSTILE picks the attacks (default all): c = trickling
	// connections, b = huge bodies, f = request flood.
	attack := func(k string) bool {
		v := os.Getenv("STEWARD_HOSTILE")
		return v == "" || strings.Contains(v, k)
	}
	for i := 0; i < b.N; i++ {
		quiet1, f1 := politePhase()

		stop := make(chan struct{})
		var hwg sync.WaitGroup
		var refused, tooLarge, busy atomic.Int64
		stopped := func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
		// Connections trickling their headers: 3000 held open; a refused one
		// is redialled after the Retry-After it was given.
		for w := 0; w < 10 && attack("c"); w++ {
			hwg.Add(1)
			go func() {
				defer hwg.Done()
				var open []interface{ Close() error }
				defer func() {
					for _, c := range open {
						c.Close()
					}
				}()
				for k := 0; k < 300 && !stopped(); k++ {
					hwg.Add(1)
					go func() {
						defer hwg.Done()
						for !stopped() {
							c, err := dialFrom("127.0.0.2", gu)
							if err != nil {
								return
							}
							fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Trickle: ")
							go func() { <-stop; c.Close() }()
							resp, err := http.ReadResponse(bufio.NewReader(c), nil)
							c.Close()
							if err == nil && resp.StatusCode == 429 {
								refused.Add(1)
							}
							select {
							case <-stop:
							case <-time.After(time.Second): // the Retry-After
							}
						}
					}()
				}
			}()
		}
		hc := clientFrom("127.0.0.2", 64)
		send := func(body io.Reader) int {
			req, _ := http.NewRequest("POST", gu+"/v1/chat/completions", body)
			req.Header.Set("Authorization", "Bearer "+hostile)
			resp, err := hc.Do(req)
			if err != nil {
				return 0
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		// Huge chunked bodies, in a loop.
		for w := 0; w < 6 && attack("b"); w++ {
			hwg.Add(1)
			go func() {
				defer hwg.Done()
				for !stopped() {
					switch send(&zeros{max: 64 << 20}) {
					case 413:
						tooLarge.Add(1)
					case 429, 503:
						busy.Add(1)
					}
				}
			}()
		}
		// A flood of concurrent requests on the hostile token.
		for w := 0; w < 32 && attack("f"); w++ {
			hwg.Add(1)
			go func() {
				defer hwg.Done()
				for !stopped() {
					if c := send(strings.NewReader(benchBody)); c == 429 {
						busy.Add(1)
						time.Sleep(10 * time.Millisecond) // the attacker's pace
					}
				}
			}()
		}
		var peakRSS, peakHeap atomic.Uint64
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			var ms runtime.MemStats
			for !stopped() {
				if r := rssBytes(); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(time.Second) // let the attack build up before measuring
		under, fu2 := politePhase()
		close(stop)
		hwg.Wait()
		quiet2, f3 := politePhase()

		quiet := append(quiet1, quiet2...)
		qp99, hp99 := pct(quiet, 0.99), pct(under, 0.99)
		b.ReportMetric(float64(hp99)/float64(qp99), "p99-ratio")
		b.ReportMetric(float64(qp99)/1e6, "quiet-p99-ms")
		b.ReportMetric(float64(hp99)/1e6, "hostile-p99-ms")
		b.ReportMetric(float64(peakRSS.Load())/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(f1+fu2+f3), "polite-failures")
		b.Logf("quiet p50 %v p99 %v; under attack p50 %v p99 %v; polite failures %d; hostile: %d connections refused, %d bodies 413, %d busy",
			pct(quiet, 0.5), qp99, pct(under, 0.5), hp99, f1+fu2+f3, refused.Load(), tooLarge.Load(), busy.Load())
	}
}
