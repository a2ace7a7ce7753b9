package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// quotaCalls are one model call in each wire format the gateway forwards,
// streaming or not, against the built-in mock.
var quotaCalls = []struct {
	name, path, body string
	hdr              map[string]string
	anthropic        bool
}{
	{"openai chat", "/v1/chat/completions", `{"model":"mock","max_tokens":50,"messages":[{"role":"user","content":"What is 2+2?"}]}`, nil, false},
	{"openai chat stream", "/v1/chat/completions", `{"model":"mock","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"What is 2+2?"}]}`, nil, false},
	{"openai responses", "/v1/responses", `{"model":"mock","max_output_tokens":50,"input":"What is 2+2?"}`, nil, false},
	{"openai responses stream", "/v1/responses", `{"model":"mock","max_output_tokens":50,"stream":true,"input":"What is 2+2?"}`, nil, false},
	{"anthropic messages", "/v1/messages", `{"model":"mock","max_tokens":50,"messages":[{"role":"user","content":"What is 2+2?"}]}`, map[string]string{"anthropic-version": "2023-06-01"}, true},
	{"anthropic stream", "/v1/messages", `{"model":"mock","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"What is 2+2?"}]}`, map[string]string{"anthropic-version": "2023-06-01"}, true},
}

// checkLimitRefusal says what is wrong with a limit refusal ("" if nothing).
func checkLimitRefusal(resp *http.Response, body string, anthropic bool, which string) string {
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Should-Retry") != "false" || !strings.Contains(body, "(limit: "+which+")") {
		return fmt.Sprintf("status %d, retry %q: %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
	}
	if anthropic {
		var e struct {
			Type  string                `json:"type"`
			Error struct{ Type string } `json:"error"`
		}
		if json.Unmarshal([]byte(body), &e) != nil || e.Type != "error" || e.Error.Type != "permission_error" {
			return "not Anthropic's error shape: " + body
		}
		return ""
	}
	var e struct {
		Error struct{ Type, Code string } `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.Type != "insufficient_quota" || e.Error.Code != "limit_reached" {
		return "not OpenAI's error shape: " + body
	}
	return ""
}

// Every wire format: the model-call limit admits exactly its calls, then
// refuses in the API's own shape; the token limit refuses the call after
// the one that reached it; the usage says which limit was reached.
func TestQuotaPerWireFormat(t *testing.T) {
	h := startGateway(t, Config{Upstream: "mock", Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
	for _, c := range quotaCalls {
		t.Run(c.name, func(t *testing.T) {
			id := "calls-" + c.name
			h.g.SetQuota(id, Quota{Calls: 3})
			tok := h.g.Issue(id, nil)
			for i := 1; i <= 5; i++ {
				resp, body := post(t, h.url, c.path, tok, c.body, c.hdr)
				if i <= 3 && resp.StatusCode != 200 {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
				}
				if i > 3 {
					if why := checkLimitRefusal(resp, body, c.anthropic, LimitCalls); why != "" {
						t.Fatalf("call %d: %s", i, why)
					}
				}
			}
			h.settle(t)
			u, _ := h.g.Usage(id)
			if u.Requests != 3 || u.LimitRefused != 2 || u.LimitReached != LimitCalls {
				t.Errorf("usage %+v", u)
			}

			id = "tokens-" + c.name
			h.g.SetQuota(id, Quota{Tokens: 1})
			tok = h.g.Issue(id, nil)
			if resp, body := post(t, h.url, c.path, tok, c.body, c.hdr); resp.StatusCode != 200 {
				t.Fatalf("first call under the token limit: %d %s", resp.StatusCode, body)
			}
			h.settle(t)
			resp, body := post(t, h.url, c.path, tok, c.body, c.hdr)
			if why := checkLimitRefusal(resp, body, c.anthropic, LimitTokens); why != "" {
				t.Fatalf("second call: %s", why)
			}
		})
	}
}

// answerWith answers one call in its wire format, streaming when the
// request asks, reporting 1000 input and 1000 output tokens the way each
// API reports usage (Anthropic's stream: input at message_start, output at
// message_delta; Responses: in response.completed; chat: the final chunk).
func answerWith(w http.ResponseWriter, r *http.Request, body []byte) {
	stream := strings.Contains(string(body), `"stream":true`)
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	switch {
	case r.URL.Path == "/v1/messages" && stream:
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":1000,\"output_tokens\":1}}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1000}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case r.URL.Path == "/v1/messages":
		io.WriteString(w, `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":1000,"output_tokens":1000}}`)
	case r.URL.Path == "/v1/responses" && stream:
		io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n"+
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"usage\":{\"input_tokens\":1000,\"output_tokens\":1000}}}\n\n")
	case r.URL.Path == "/v1/responses":
		io.WriteString(w, `{"id":"r","object":"response","status":"completed","output":[],"usage":{"input_tokens":1000,"output_tokens":1000}}`)
	case stream:
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"+
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":1000}}\n\n"+
			"data: [DONE]\n\n")
	default:
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":1000,"completion_tokens":1000}}`)
	}
}

// Twelve callers on one attempt's token, each in a loop until refused, in
// every wire format, streaming or not, against each kind of limit. Every
// admitted call holds its estimate (here its whole use: max_tokens 1000 and
// a body of ~1000 tokens' size) until it ends and is charged, so:
//   - model_calls is exact: the attempt makes its N calls and not one more;
//   - tokens and cost_usd end within one call of the limit (the call
//     admitted just under it), never more, however many run at once.
func TestQuotaUnderConcurrency(t *testing.T) {
	const perCall = 2000 // 1000 in + 1000 out
	const perCallUSD = perCall * 1.0 / 1e6
	prices := Prices{InputPerMTok: 1, OutputPerMTok: 1}
	oa := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) { answerWith(w, r, body) })
	an := newUpstream(t, "anthropic", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) { answerWith(w, r, body) })
	hOA := startGateway(t, Config{Upstream: "openai", BaseURL: oa.baseURL(), APIKey: realKey, Prices: prices})
	hAN := startGateway(t, Config{Upstream: "anthropic", BaseURL: an.baseURL(), APIKey: realKey, Prices: prices})
	content := strings.Repeat("x", 3900)
	for _, c := range quotaCalls {
		h := hOA
		if c.anthropic {
			h = hAN
		}
		// The same call with ~1000 tokens of input and 1000 of output.
		body := strings.Replace(c.body, `"What is 2+2?"`, `"`+content+`"`, 1)
		body = strings.Replace(strings.Replace(body, `"max_tokens":50`, `"max_tokens":1000`, 1), `"max_output_tokens":50`, `"max_output_tokens":1000`, 1)
		for _, lim := range []struct {
			name string
			q    Quota
		}{
			{LimitCalls, Quota{Calls: 7}},
			{LimitTokens, Quota{Tokens: 20_000}},
			{LimitCost, Quota{CostUSD: 10 * perCallUSD}},
		} {
			t.Run(c.name+"/"+lim.name, func(t *testing.T) {
				id := "loop-" + c.name + "-" + lim.name
				h.g.SetQuota(id, lim.q)
				tok := h.g.Issue(id, nil)
				var wg sync.WaitGroup
				for k := 0; k < 12; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < 100; i++ {
							resp, body := post(t, h.url, c.path, tok, body, c.hdr)
							if resp.StatusCode != 200 {
								if why := checkLimitRefusal(resp, body, c.anthropic, lim.name); why != "" {
									t.Errorf("refused but not at %s: %s", lim.name, why)
								}
								return
							}
						}
					}()
				}
				wg.Wait()
				h.settle(t)
				u, _ := h.g.Usage(id)
				used := u.InputTokens + u.OutputTokens
				if u.LimitReached != lim.name || used%perCall != 0 {
					t.Fatalf("usage %+v: want limit %s reached, and each call's %d tokens counted", u, lim.name, perCall)
				}
				switch lim.name {
				case LimitCalls:
					if u.Requests != lim.q.Calls {
						t.Errorf("%d calls made under a %d-call limit with 12 callers: %+v", u.Requests, lim.q.Calls, u)
					}
				case LimitTokens:
					if used > lim.q.Tokens+perCall || used < lim.q.Tokens {
						t.Errorf("used %d tokens of a %d limit with 12 callers (most allowed %d): %+v", used, lim.q.Tokens, lim.q.Tokens+perCall, u)
					}
				case LimitCost:
					if u.CostUSD > lim.q.CostUSD+perCallUSD+1e-12 || u.CostUSD < lim.q.CostUSD-1e-12 {
						t.Errorf("spent $%.6f of a $%.6f limit with 12 callers (most allowed $%.6f): %+v", u.CostUSD, lim.q.CostUSD, lim.q.CostUSD+perCallUSD, u)
					}
				}
			})
		}
	}
}

// The deadline: calls after it are refused (limit: agent_time), and the
// remaining endpoint counts down to it with what is left of each bound.
func TestQuotaDeadlineAndRemaining(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	h := startGateway(t, Config{Upstream: "mock", Clock: clk, Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
	h.g.SetQuota("a", Quota{Tokens: 100000, Calls: 10, CostUSD: 1, Deadline: clk.Now().Add(90 * time.Second)})
	tok := h.g.Issue("a", nil)
	get := func(tok string) (int, Remaining) {
		req, _ := http.NewRequest(http.MethodGet, h.url+RemainingPath, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r Remaining
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("remaining without a token: %d", code)
	}
	c := quotaCalls[0]
	if resp, body := post(t, h.url, c.path, tok, c.body, c.hdr); resp.StatusCode != 200 {
		t.Fatalf("call before the deadline: %d %s", resp.StatusCode, body)
	}
	h.settle(t)
	code, r := get(tok)
	if code != 200 || r.SecondsLeft == nil || *r.SecondsLeft != 90 || r.CallsLeft == nil || *r.CallsLeft != 9 ||
		r.TokensLeft == nil || *r.TokensLeft != 100000-r.Used.InputTokens-r.Used.OutputTokens || r.USDLeft == nil || r.Deadline == nil {
		t.Fatalf("remaining: %d %+v", code, r)
	}
	clk.Advance(90 * time.Second)
	resp, body := post(t, h.url, c.path, tok, c.body, c.hdr)
	if why := checkLimitRefusal(resp, body, false, LimitAgentTime); why != "" {
		t.Fatalf("call after the deadline: %s", why)
	}
	if _, r := get(tok); *r.SecondsLeft != 0 || r.LimitReached != LimitAgentTime {
		t.Errorf("remaining after the deadline: %+v", r)
	}
	// No quota: every bound is null (unlimited).
	if _, r := get(h.g.Issue("free", nil)); r.Deadline != nil || r.TokensLeft != nil || r.CallsLeft != nil || r.USDLeft != nil {
		t.Errorf("an attempt without limits: %+v", r)
	}
}
