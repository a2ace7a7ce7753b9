package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHardBudgetStopsLoopingAttempts plays attempts that call the model in
// a loop, one after another and 12 at once. The gateway refuses the first
// request the remaining budget cannot cover, in the error shape of the API
// called; total spend stays within the budget plus what the requests in
// flight at the time can overspend (one request each).
func TestHardBudgetStopsLoopingAttempts(t *testing.T) {
	const perCall = 0.002 // 1000 in + 1000 out at $1/Mtok each
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	})
	for _, conc := range []int{1, 12} {
		t.Run(fmt.Sprint(conc), func(t *testing.T) {
			const budget = 0.02
			h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, BudgetUSD: budget,
				Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
			var wg sync.WaitGroup
			var mu sync.Mutex
			refusals := 0
			for c := 0; c < conc; c++ {
				tok := h.g.Issue(fmt.Sprintf("loop-%d", c), nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 200; i++ {
						resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","max_tokens":500,"messages":[{"role":"user","content":"again"}]}`, nil)
						if resp.StatusCode == 200 {
							continue
						}
						var e struct {
							Error struct{ Type, Code, Message string } `json:"error"`
						}
						if resp.StatusCode != http.StatusPaymentRequired || json.Unmarshal([]byte(body), &e) != nil ||
							e.Error.Type != "insufficient_quota" || e.Error.Code != "budget_exhausted" || !strings.Contains(e.Error.Message, "budget") ||
							resp.Header.Get("X-Should-Retry") != "false" {
							t.Errorf("refusal: %d %v %s", resp.StatusCode, resp.Header, body)
						}
						mu.Lock()
						refusals++
						mu.Unlock()
						return
					}
				}()
			}
			wg.Wait()
			h.settle(t)
			spent := h.g.Spent()
			if refusals != conc {
				t.Fatalf("%d of %d looping attempts were refused", refusals, conc)
			}
			if max := budget + float64(conc)*perCall; spent > max+1e-9 {
				t.Fatalf("spent $%.4f of a $%.2f budget with %d in flight (most allowed $%.4f)", spent, budget, conc, max)
			}
			if h.g.BudgetRefusals() < int64(conc) {
				t.Fatalf("refusals counted: %d", h.g.BudgetRefusals())
			}
			// Anthropic callers get Anthropic's shape.
			tok := h.g.Issue("anthropic", nil)
			resp, body := post(t, h.url, "/v1/messages", tok, `{"model":"m","max_tokens":10,"messages":[]}`, map[string]string{"anthropic-version": "2023-06-01"})
			if resp.StatusCode != 402 || !strings.Contains(body, `"type":"billing_error"`) || !strings.Contains(body, `"type":"error"`) {
				t.Fatalf("anthropic refusal: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestBudgetEstimate checks the estimate a request is admitted against.
func TestBudgetEstimate(t *testing.T) {
	g, err := New(Config{Upstream: "mock", Prices: Prices{InputPerMTok: 1e6, OutputPerMTok: 1e6}, DefaultMaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, body string
		in, out    int64
	}{
		{"/v1/chat/completions", `{"max_completion_tokens":7,"max_tokens":9}`, 11, 7},
		{"/v1/chat/completions", `{"max_tokens":9, "n":3}`, 6, 27},
		{"/v1/messages", `{"max_tokens":50}`, 5, 50},
		{"/v1/responses", `{"max_output_tokens":12}`, 6, 12},
		{"/v1/chat/completions", `{"model":"m"}`, 4, 100},
		{"/v1/embeddings", `{"input":"abcdefgh"}`, 5, 0},
		{"/v1/messages/count_tokens", `{"max_tokens":50}`, 0, 0},
		// What the upstream reads, not what Go's case-insensitive decoder
		// would: the key as spelled, numbers written as floats, every
		// completion best_of makes (each is billed).
		{"/v1/chat/completions", `{"max_tokens":5000,"Max_Tokens":1}`, 9, 5000},
		{"/v1/chat/completions", `{"max_tokens":20.0,"n":2.0}`, 7, 40},
		{"/v1/completions", `{"max_tokens":9,"best_of":4,"n":2}`, 9, 36},
	} {
		own, _, _ := routeOf(c.path)
		e := g.estimate(own, c.path, []byte(c.body), g.cfg.Prices)
		if e.in != c.in || e.out != c.out || e.cost != float64(c.in+c.out) {
			t.Errorf("%s %s: got %+v, want in %d out %d", c.path, c.body, e, c.in, c.out)
		}
	}
}

// TestCutStreamIsCharged plays an agent that reads the first chunk of a
// stream and hangs up. The provider bills the whole answer: the gateway reads
// on to the stream's usage and charges it; when the upstream never finishes
// within CutDrain, it charges the request's estimate.
func TestCutStreamIsCharged(t *testing.T) {
	cut := make(chan struct{})
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"he"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-cut // the client has gone
		if strings.Contains(r.URL.RawQuery, "hang") {
			<-r.Context().Done() // never finishes: the gateway gives up after CutDrain
			return
		}
		for i := 0; i < 50; i++ {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"llo"}}]}`+"\n\n")
		}
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":300}}`+"\n\ndata: [DONE]\n\n")
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, CutDrain: 200 * time.Millisecond,
		Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
	for _, c := range []struct {
		query   string
		in, out int64
	}{
		{"", 40, 300},
		{"?after=hang", 25, 777}, // the estimate: the 98 bytes sent upstream (with the stream_options the gateway added) / 4, and max_tokens
	} {
		cut = make(chan struct{})
		tok := h.g.Issue("cut"+c.query, nil)
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions"+c.query, strings.NewReader(`{"model":"m","stream":true,"max_tokens":777,"messages":[]}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, `"he"`) {
			t.Fatalf("first chunk: %q %v", line, err)
		}
		resp.Body.Close() // the agent hangs up mid-stream
		tr.CloseIdleConnections()
		close(cut)
		u, _ := h.usage(t, tok)
		if u.InputTokens != c.in || u.OutputTokens != c.out {
			t.Fatalf("%s: charged %d in, %d out; want %d, %d", c.query, u.InputTokens, u.OutputTokens, c.in, c.out)
		}
	}
}
