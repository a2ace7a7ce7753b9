package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
)

// Load tests. The benchmarks (BenchmarkLoad*, run by `make bench`) push the
// full sizes from issue 8: 10 000 attempts through 200 concurrent local
// sandboxes, with and without model calls through the gateway, and 1 000
// concurrent streaming requests through the gateway. TestLoadSmall runs the
// same code at CI size and checks correctness and a memory bound.

type loadResult struct {
	attempts    int
	elapsed     time.Duration
	peakRSS     int64 // bytes, summed over every Steward process alive at one moment
	peakHeap    int64 // bytes, the largest heap any Steward process reached (gctrace)
	peakProcs   int   // the most Steward processes alive at once
	upstreamReq int64
}

func (r loadResult) perSecond() float64 { return float64(r.attempts) / r.elapsed.Seconds() }

// stewardRSS sums VmRSS over the processes running the test's steward
// binary (the supervisor and its workers). A process that shares its
// parent's command line is a fork that has not yet exec'ed its sandbox
// command (it shares the parent's memory); it is left out so that memory is
// not counted twice.
func stewardRSS() (int64, int) {
	type proc struct {
		ppid int
		cmd  string
		rss  int64
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || target != exe {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		p := proc{cmd: string(cmd)}
		for _, line := range strings.Split(string(st), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "VmRSS:":
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				p.rss = kb << 10
			case "PPid:":
				p.ppid, _ = strconv.Atoi(f[1])
			}
		}
		procs[pid] = p
	}
	var sum int64
	n := 0
	for _, p := range procs {
		if parent, ok := procs[p.ppid]; ok && parent.cmd == p.cmd {
			continue // a fork about to exec a sandbox command
		}
		sum += p.rss
		n++
	}
	return sum, n
}

var gctraceRe = regexp.MustCompile(`gc \d+ @[^:]+: .* (\d+)->(\d+)->(\d+) MB`)

// peakHeapFrom reads GODEBUG=gctrace=1 lines: the heap size at which a GC
// started is the most the heap held.
func peakHeapFrom(out string) int64 {
	var peak int64
	for _, m := range gctraceRe.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		if v > peak {
			peak = v
		}
	}
	return peak << 20
}

// loadLaunch runs n attempts of a trivial agent through conc concurrent local
// sandboxes; with fp != nil each agent makes one chat call through the
// gateway to fp.
func loadLaunch(tb testing.TB, n, conc int, fp *fakeprovider.Server, key string) loadResult {
	tb.Helper()
	dir := tb.TempDir()
	var jl bytes.Buffer
	for i := 0; i < n; i++ {
		if fp != nil {
			fmt.Fprintf(&jl, `{"id":"s%05d","input":"What is %d+1?","target":"%d"}`+"\n", i, i, i+1)
		} else {
			fmt.Fprintf(&jl, `{"id":"s%05d","input":"ok","target":"ok"}`+"\n", i)
		}
	}
	loadWrite(tb, filepath.Join(dir, "samples.jsonl"), jl.String())
	model, agent, scorer := "", `echo "$STEWARD_INPUT"`, "{match: exact}"
	if fp != nil {
		model = "model:\n  upstream: openai\n  name: gpt-load\n  base_url: " + fp.URL() + "/v1\n  api_key_env: LOAD_KEY\n"
		// One non-streaming chat call with busybox wget (a small static client).
		agent = `busybox wget -q -O- --header "Authorization: Bearer $OPENAI_API_KEY" --header "Content-Type: application/json" --post-data "{\"model\":\"gpt-load\",\"messages\":[{\"role\":\"user\",\"content\":\"$STEWARD_INPUT\"}]}" "$OPENAI_BASE_URL/chat/completions"`
		scorer = "{match: includes}"
	}
	loadWrite(tb, filepath.Join(dir, "steward.yaml"), model+`
tasks:
  - name: load
    sandbox: {provider: local}
    exclusive: false
    max_samples: `+strconv.Itoa(conc)+`
    retries: 0
    agent: '`+agent+`'
    scorer: `+scorer+`
    samples_file: samples.jsonl
`)
	cmd := exec.Command(exe, "launch", "--max-concurrency", strconv.Itoa(conc))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1", "LOAD_KEY="+key, "STEWARD_IN_CONTAINER=0")
	var out syncBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	var res loadResult
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			rss, procs := stewardRSS()
			if rss > res.peakRSS {
				res.peakRSS = rss
			}
			if procs > res.peakProcs {
				res.peakProcs = procs
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	err := cmd.Run()
	res.elapsed = time.Since(start)
	close(stop)
	wg.Wait()
	text := out.String()
	c := crashCounts(text)
	if err != nil || c == nil || c[0] != n || c[4] != n {
		tb.Fatalf("load run (%d attempts, %d concurrent): %v\n%s", n, conc, err, tail(text, 4000))
	}
	res.attempts = n
	res.peakHeap = peakHeapFrom(text)
	if fp != nil {
		st := fp.Stats()
		res.upstreamReq = st.Succeeded
		if st.Succeeded < int64(n) || len(st.APIKeys) != 1 || st.APIKeys[0] != key {
			tb.Fatalf("provider saw %+v", st)
		}
	}
	return res
}

func loadWrite(tb testing.TB, p, body string) {
	tb.Helper()
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func loadSizes(defN, defConc int) (int, int) {
	n, conc := defN, defConc
	if v, err := strconv.Atoi(os.Getenv("STEWARD_LOAD_ATTEMPTS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("STEWARD_LOAD_CONCURRENCY")); err == nil && v > 0 {
		conc = v
	}
	return n, conc
}

func reportLoad(b *testing.B, r loadResult) {
	b.ReportMetric(r.perSecond(), "attempts/s")
	b.ReportMetric(float64(r.peakRSS)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(r.peakHeap)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(r.peakProcs), "steward-procs")
	b.Logf("%d attempts in %v: %.0f attempts/s, peak RSS %.0f MiB over %d Steward processes, peak Go heap %.0f MiB, upstream answers %d",
		r.attempts, r.elapsed.Round(time.Millisecond), r.perSecond(), float64(r.peakRSS)/(1<<20), r.peakProcs, float64(r.peakHeap)/(1<<20), r.upstreamReq)
}

func fastProvider(tb testing.TB, key string) *fakeprovider.Server {
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	if _, err := fp.Start(context.Background(), "127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fp.Close() })
	return fp
}

// BenchmarkLoadAttempts: 10 000 attempts of a trivial agent through 200
// concurrent local sandboxes (STEWARD_LOAD_ATTEMPTS / _CONCURRENCY resize it).
func BenchmarkLoadAttempts(b *testing.B) {
	n, conc := loadSizes(10000, 200)
	for i := 0; i < b.N; i++ {
		reportLoad(b, loadLaunch(b, n, conc, nil, ""))
	}
}

// BenchmarkLoadAttemptsGateway: the same, each agent making one chat call
// through the gateway to a fast fake provider.
func BenchmarkLoadAttemptsGateway(b *testing.B) {
	n, conc := loadSizes(10000, 200)
	const key = "sk-load-bench-key"
	for i := 0; i < b.N; i++ {
		fp := fastProvider(b, key)
		reportLoad(b, loadLaunch(b, n, conc, fp, key))
	}
}

// ---- the gateway under 1 000 concurrent streams ----------------------------

type streamResult struct {
	requests   int
	elapsed    time.Duration
	peakHeap   uint64
	peakRSS    int64
	peakGor    int
	upstreamIn int64
	chunks     int64
}

// vmHWM is this process's peak resident set size.
func vmHWM() int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// streamLoad sends conc streaming chat requests at once through a real
// gateway (adaptive connections, or fixed when fixed > 0) to a fake provider
// that takes a little time per token, and reads every stream to its end.
func streamLoad(tb testing.TB, conc, fixed int) streamResult {
	const key = "sk-stream-load-key"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key, BaseLatency: 500 * time.Millisecond, PerTokenLatency: 20 * time.Millisecond})
	furl, err := fp.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer fp.Close()
	g, err := gateway.New(gateway.Config{Upstream: "openai", BaseURL: furl + "/v1", APIKey: key, MaxConnections: fixed})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()

	var res streamResult
	var chunks atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > res.peakHeap {
				res.peakHeap = ms.HeapInuse
			}
			if n := runtime.NumGoroutine(); n > res.peakGor {
				res.peakGor = n
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	errs := make(chan error, conc)
	var ready, wg sync.WaitGroup
	ready.Add(1)
	start := time.Now()
	for i := 0; i < conc; i++ {
		tok := g.Issue(fmt.Sprintf("load/%d", i), nil)
		wg.Add(1)
		go func(i int, tok string) {
			defer wg.Done()
			ready.Wait()
			body := fmt.Sprintf(`{"model":"gpt-load","stream":true,"messages":[{"role":"user","content":"Count the stars over sample %d and say something long about them"}]}`, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				errs <- fmt.Errorf("status %d: %s", resp.StatusCode, b)
				return
			}
			sc := bufio.NewScanner(resp.Body)
			done := false
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "data: ") {
					chunks.Add(1)
				}
				if line == "data: [DONE]" {
					done = true
				}
			}
			if !done {
				errs <- fmt.Errorf("stream %d ended without [DONE]: %v", i, sc.Err())
			}
		}(i, tok)
	}
	ready.Done()
	wg.Wait()
	res.elapsed = time.Since(start)
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		tb.Fatalf("streaming request: %v", err)
	}
	res.requests = conc
	res.chunks = chunks.Load()
	res.peakRSS = vmHWM()
	st := fp.Stats()
	res.upstreamIn = st.MaxInFlight
	if st.Succeeded != int64(conc) || len(st.APIKeys) != 1 || st.APIKeys[0] != key {
		tb.Fatalf("provider stats %+v", st)
	}
	return res
}

// BenchmarkLoadGatewayStreams: 1 000 concurrent streaming requests through
// the gateway, adaptive and with 1 000 fixed connections.
func BenchmarkLoadGatewayStreams(b *testing.B) {
	conc := 1000
	if v, err := strconv.Atoi(os.Getenv("STEWARD_LOAD_STREAMS")); err == nil && v > 0 {
		conc = v
	}
	for _, mode := range []struct {
		name  string
		fixed int
	}{{"adaptive", 0}, {"fixed1000", 1000}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := streamLoad(b, conc, mode.fixed)
				b.ReportMetric(float64(r.requests)/r.elapsed.Seconds(), "streams/s")
				b.ReportMetric(float64(r.peakHeap)/(1<<20), "peak-heap-MB")
				b.ReportMetric(float64(r.peakRSS)/(1<<20), "peak-rss-MB")
				b.ReportMetric(float64(r.upstreamIn), "upstream-in-flight")
				b.Logf("%d streams (%d chunks) in %v: %.0f streams/s, peak heap %.0f MiB, process peak RSS %.0f MiB, %d goroutines at most, %d upstream requests in flight at most",
					r.requests, r.chunks, r.elapsed.Round(time.Millisecond), float64(r.requests)/r.elapsed.Seconds(),
					float64(r.peakHeap)/(1<<20), float64(r.peakRSS)/(1<<20), r.peakGor, r.upstreamIn)
			}
		})
	}
}

// TestLoadSmall is the CI-size load test: 400 attempts through 50 concurrent
// local sandboxes with and without gateway calls, and 200 concurrent streams.
// Memory must stay bounded (well under what the full-size benchmark uses).
func TestLoadSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	r := loadLaunch(t, 400, 50, nil, "")
	t.Logf("plain: %d attempts in %v (%.0f/s), peak RSS %d MiB over %d processes, peak heap %d MiB",
		r.attempts, r.elapsed, r.perSecond(), r.peakRSS>>20, r.peakProcs, r.peakHeap>>20)
	if r.peakRSS == 0 || r.peakRSS > 1<<30 {
		t.Fatalf("peak RSS %d", r.peakRSS)
	}
	const key = "sk-load-small-key"
	fp := fastProvider(t, key)
	r = loadLaunch(t, 400, 50, fp, key)
	t.Logf("gateway: %d attempts in %v (%.0f/s), peak RSS %d MiB, peak heap %d MiB, upstream answers %d",
		r.attempts, r.elapsed, r.perSecond(), r.peakRSS>>20, r.peakHeap>>20, r.upstreamReq)
	if r.peakRSS > 1<<30 {
		t.Fatalf("peak RSS %d", r.peakRSS)
	}
	s := streamLoad(t, 200, 200)
	t.Logf("streams: %d in %v, peak heap %d MiB, %d upstream in flight", s.requests, s.elapsed, s.peakHeap>>20, s.upstreamIn)
	if s.peakHeap > 512<<20 {
		t.Fatalf("peak heap %d for 200 streams", s.peakHeap)
	}
}
