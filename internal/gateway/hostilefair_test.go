package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
)

// paceShare runs one hostile token that keeps its 16 requests in the
// gateway at all times and honest tokens that send one request at a time,
// in front of a fake provider at 60 requests a minute: the gateway's pace,
// not the connection limit, decides when a request goes. The test drives
// a fake clock: it moves time only once every client has its requests
// queued in the gateway and nothing is in flight, so every admission is a
// choice among all of them, and the figures are counts, the same on any
// machine. It returns how many requests each token had answered over
// measured admissions, after warm admissions to settle, and how long the
// measured admissions took on the provider's clock.
func paceShare(t *testing.T, honest, warm, measured int) (hostile int64, each []int64, took time.Duration) {
	clk := clock.NewFake(testEpoch)
	fp, fu := startFake(t, fakeprovider.Config{RPM: 60, Clock: clk})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clk})
	ctl := h.g.Controller()
	perToken := h.g.limits.RequestsPerToken

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: perToken + honest, MaxConnsPerHost: perToken + honest}}
	t.Cleanup(client.CloseIdleConnections)
	// loop sends requests on tok one after the other until the test ends,
	// counting the answered ones. A 429 (the token's 17th request, sent in
	// the instant after an answer reached the client and before its
	// handler counted it out) is sent again, as a hostile agent would.
	loop := func(tok string, answered *atomic.Int64) {
		defer wg.Done()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				answered.Add(1)
			}
		}
	}
	hostileTok := h.g.Issue("att-hostile", nil)
	var hostileN atomic.Int64
	for i := 0; i < perToken; i++ {
		wg.Add(1)
		go loop(hostileTok, &hostileN)
	}
	honestN := make([]atomic.Int64, honest)
	for i := range honestN {
		wg.Add(1)
		go loop(h.g.Issue(fmt.Sprintf("att-honest-%d", i), nil), &honestN[i])
	}
	// settled waits until every request of every client is queued in the
	// controller, none is in flight (nor on its way back to its client) and
	// the head of the queue sleeps on the pace's timer (the only timer: the
	// provider answers at once and refuses nothing).
	settled := func() {
		watchdog := time.Now().Add(time.Minute)
		for {
			ctl.mu.Lock()
			queued, inflight := ctl.waiters.Len(), ctl.inflight
			ctl.mu.Unlock()
			if queued == perToken+honest && inflight == 0 && clk.Pending() > 0 {
				return
			}
			if time.Now().After(watchdog) {
				t.Fatalf("clients never all queued: %d queued, %d in flight, provider %+v", queued, inflight, fp.Stats())
			}
			runtime.Gosched()
		}
	}
	total := func() int64 {
		n := hostileN.Load()
		for i := range honestN {
			n += honestN[i].Load()
		}
		return n
	}
	snapshot := func() (int64, []int64) {
		out := make([]int64, honest)
		for i := range honestN {
			out[i] = honestN[i].Load()
		}
		return hostileN.Load(), out
	}
	// Each step admits one request or none: the pace is a schedule whose
	// gap (a second, or a sixth while the bank lasts) is far longer than
	// the catch-up it allows (paceSlack), so a second admission needs the
	// clock to move again, and it moves only once the clients settled.
	run := func(n int) {
		for goal := total() + int64(n); total() < goal; {
			settled()
			clk.Advance(50 * time.Millisecond)
		}
		settled()
	}
	run(warm)
	h0, e0 := snapshot()
	start := clk.Now()
	run(measured)
	h1, e1 := snapshot()
	took = clk.Now().Sub(start)
	if fp.Stats().RateLimited > 0 {
		t.Fatalf("the provider refused requests (%+v): the gateway was not pace-bound but over the rate", fp.Stats())
	}
	for i := range e1 {
		e1[i] -= e0[i]
	}
	return h1 - h0, e1, took
}

// A hostile agent that keeps its 16 requests queued in the gateway at all
// times gets no more of a pace-bound gateway's admissions than an honest
// one with one request at a time: the queue serves tokens in turn. Four
// honest tokens' fair share is 4/5 of the admissions; with one queue in
// arrival order they got 4/20 (each request its turn, the hostile one's 16
// of every 20).
func TestHostileAgentQueueIsFair(t *testing.T) {
	const honest, warm, measured = 4, 20, 100
	hostile, each, took := paceShare(t, honest, warm, measured)
	var sum int64
	for _, n := range each {
		sum += n
	}
	share := float64(sum) / float64(sum+hostile)
	t.Logf("admissions: hostile %d, honest %v in %s; honest share %.3f (fair %.3f, arrival order %.3f); an honest call every %s",
		hostile, each, took, share, float64(honest)/float64(honest+1), float64(honest)/float64(honest+16), (took * time.Duration(honest) / time.Duration(max(sum, 1))).Round(time.Millisecond))
	if share < 0.7 {
		t.Errorf("honest tokens got %.3f of the admissions (hostile %d, honest %v); want 0.7 or more (fair: %.2f)", share, hostile, each, float64(honest)/float64(honest+1))
	}
	for i, n := range each {
		if float64(n) < 0.7*float64(sum+hostile)/float64(honest+1) {
			t.Errorf("honest token %d got %d of %d admissions; want 0.7 of its fair share or more", i, n, sum+hostile)
		}
	}
}
