package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway/gatewaytest"
	"github.com/steward-evals/steward/internal/transcript"
)

func mustTranscript(t *testing.T, h *harness, key string) *transcript.Transcript {
	t.Helper()
	return gatewaytest.MustTranscript(t, h.g, key)
}

var encoded = gatewaytest.Encoded

// A retried call: every try with its status and the backoff before it,
// the request as sent, the response, tokens and cost; the real key (which
// the upstream echoes), the attempt's token and a configured secret (even
// behind JSON escapes) are never kept.
func TestCaptureRetriedCallScrubbed(t *testing.T) {
	const secret = "ghp_configuredSECRET42"
	answer := `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Paris. (your key is ` + realKey + `)"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if n <= 2 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for key `+realKey+`"}}`)
			return
		}
		io.WriteString(w, answer)
	})
	clk := clock.NewInstant(testEpoch)
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clk,
		Rand: func() float64 { return 0.5 }, BackoffBase: 100 * time.Millisecond, Prices: Prices{InputPerMTok: 1e6, OutputPerMTok: 2e6},
		Capture: Capture{Secrets: []string{secret}}})
	tok := h.g.Issue("att-1", nil)
	// The agent puts its own token and the secret (once JSON-escaped) in its prompt.
	escaped := `\u0067hp_configuredSECRET42`
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"capital of France? token ` + tok + ` secret ` + escaped + `"}]}`
	resp, got := post(t, h.url, "/v1/chat/completions", tok, body, nil)
	if resp.StatusCode != 200 || !strings.Contains(got, "Paris") {
		t.Fatalf("agent saw %d %s", resp.StatusCode, got)
	}
	tr := mustTranscript(t, h, "att-1")
	if tr.Mode != transcript.ModeFull || len(tr.Calls) != 1 || tr.Truncated != "" {
		t.Fatalf("transcript %+v", tr)
	}
	c := tr.Calls[0]
	if c.Method != "POST" || c.Route != "/v1/chat/completions" || c.Model != "gpt-4o-mini" || c.Status != 200 ||
		c.InputTokens != 11 || c.OutputTokens != 7 || c.CostUSD != 25 {
		t.Errorf("call metadata %+v", c)
	}
	if len(c.Tries) != 3 || c.Tries[0].Status != 429 || c.Tries[1].Status != 429 || c.Tries[2].Status != 200 {
		t.Fatalf("tries %+v, want 429, 429, 200", c.Tries)
	}
	for _, tt := range c.Tries[1:] {
		if tt.Wait < 2*time.Second {
			t.Errorf("try %+v: the backoff it waited (Retry-After 2s) is not recorded", tt)
		}
	}
	if c.Latency < 4*time.Second {
		t.Errorf("latency %s does not include the backoffs", c.Latency)
	}
	var req struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal(c.Request, &req); err != nil || len(req.Messages) != 1 || !strings.HasPrefix(req.Messages[0].Content, "capital of France?") {
		t.Errorf("request %s (%v)", c.Request, err)
	}
	var res struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal(c.Response, &res); err != nil || len(res.Choices) != 1 || !strings.HasPrefix(res.Choices[0].Message.Content, "Paris.") {
		t.Errorf("response %s (%v)", c.Response, err)
	}
	all := encoded(t, tr)
	for _, leak := range []string{realKey, tok, "stw-", secret, "configuredSECRET"} {
		if strings.Contains(all, leak) {
			t.Errorf("the transcript keeps %q:\n%s", leak, all)
		}
	}
	if !strings.Contains(all, redacted) {
		t.Errorf("nothing was marked redacted:\n%s", all)
	}
	if h.g.Transcript("att-1") != nil {
		t.Error("a transcript taken once is handed out again (it should be forgotten)")
	}
}

// Streamed responses are assembled into the unstreamed shape; the usage
// request the gateway injected is not shown as the agent's.
func TestCaptureAssemblesStreams(t *testing.T) {
	chunks := []string{
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"content":"look.","tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"look","arguments":"{\"q\":"}}]}}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"gpt-x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`,
	}
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			io.WriteString(w, "data: "+c+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-s", nil)
	resp, _ := post(t, h.url, "/v1/chat/completions", tok, `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	tr := mustTranscript(t, h, tok)
	c := tr.Calls[0]
	if !c.Stream || c.InputTokens != 9 || c.OutputTokens != 4 {
		t.Errorf("call %+v", c)
	}
	if strings.Contains(string(c.Request), "stream_options") {
		t.Errorf("the request shows the usage option the gateway injected: %s", c.Request)
	}
	var res struct {
		Object  string
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Role, Content string
				ToolCalls     []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal(c.Response, &res); err != nil {
		t.Fatalf("response %s: %v", c.Response, err)
	}
	if res.Object != "chat.completion" || len(res.Choices) != 1 || res.Choices[0].Message.Content != "Let me look." ||
		res.Choices[0].FinishReason != "tool_calls" || len(res.Choices[0].Message.ToolCalls) != 1 ||
		res.Choices[0].Message.ToolCalls[0].Function.Name != "look" || res.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"q":"Paris"}` {
		t.Errorf("assembled response %s", c.Response)
	}

	// Anthropic: text and tool_use blocks with their JSON input.
	events := []string{
		`{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":25,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu_1","name":"look","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"Par"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\"}"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":15}}`,
		`{"type":"message_stop"}`,
	}
	aup := newUpstream(t, "anthropic", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			var head struct{ Type string }
			_ = json.Unmarshal([]byte(e), &head)
			io.WriteString(w, "event: "+head.Type+"\ndata: "+e+"\n\n")
		}
	})
	ah := startGateway(t, Config{Upstream: "anthropic", BaseURL: aup.baseURL(), APIKey: realKey})
	atok := ah.g.Issue("att-a", nil)
	resp, _ = post(t, ah.url, "/v1/messages", "", `{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"x-api-key": atok, "anthropic-version": "2023-06-01"})
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	ac := mustTranscript(t, ah, "att-a").Calls[0]
	var msg struct {
		Type, Role string
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, Name string
			Input            map[string]string
		}
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err := json.Unmarshal(ac.Response, &msg); err != nil {
		t.Fatalf("anthropic response %s: %v", ac.Response, err)
	}
	if msg.Type != "message" || msg.StopReason != "tool_use" || len(msg.Content) != 2 || msg.Content[0].Text != "Checking" ||
		msg.Content[1].Name != "look" || msg.Content[1].Input["q"] != "Paris" || msg.Usage.OutputTokens != 15 || msg.Usage.InputTokens != 25 {
		t.Errorf("assembled message %s", ac.Response)
	}
}

func TestCaptureModes(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Capture: Capture{Mode: transcript.ModeMetadata}})
	tok := h.g.Issue("att-m", nil)
	post(t, h.url, "/v1/chat/completions", tok, `{"model":"m1","messages":[{"role":"user","content":"private data"}]}`, nil)
	tr := mustTranscript(t, h, tok)
	if tr.Mode != transcript.ModeMetadata || len(tr.Calls) != 1 {
		t.Fatalf("metadata transcript %+v", tr)
	}
	c := tr.Calls[0]
	if c.Model != "m1" || c.Status != 200 || c.InputTokens != 11 || len(c.Tries) != 1 || c.Request != nil || c.Response != nil || c.Truncated {
		t.Errorf("metadata call %+v", c)
	}
	if strings.Contains(encoded(t, tr), "private") || strings.Contains(encoded(t, tr), "hi") {
		t.Errorf("metadata mode kept content: %s", encoded(t, tr))
	}

	off := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Capture: Capture{Mode: transcript.ModeOff}})
	otok := off.g.Issue("att-o", nil)
	if resp, _ := post(t, off.url, "/v1/chat/completions", otok, `{"model":"m1"}`, nil); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if tr := off.g.Transcript(otok); tr != nil {
		t.Errorf("capture off kept %+v", tr)
	}
}

// Past the per-attempt cap, calls keep their metadata and lose their
// content, marked; past the per-run cap, so do every attempt's.
func TestCaptureCaps(t *testing.T) {
	big := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 5000) + `"},"finish_reason":"stop"}]}`
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "big") {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, chatOK)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey,
		Capture: Capture{AttemptCap: 4000, RunCap: 2500}})
	tok := h.g.Issue("a1", nil)
	post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"small"}]}`, nil)
	post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"big"}]}`, nil)
	post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("y", 5000)+`"}]}`, nil)
	tr := mustTranscript(t, h, "a1")
	if len(tr.Calls) != 3 {
		t.Fatalf("%d calls", len(tr.Calls))
	}
	if tr.Calls[0].Truncated || tr.Calls[0].Response == nil {
		t.Errorf("the first small call lost its content: %+v", tr.Calls[0])
	}
	if !tr.Calls[1].Truncated || tr.Calls[1].Response != nil || tr.Calls[1].Request == nil {
		t.Errorf("the call with a response past the cap: %+v", tr.Calls[1])
	}
	if !tr.Calls[2].Truncated || tr.Calls[2].Request != nil || tr.Calls[2].Status != 200 || tr.Calls[2].InputTokens != 11 {
		t.Errorf("the call with a request past the cap kept content or lost metadata: %+v", tr.Calls[2])
	}
	if !strings.Contains(tr.Truncated, "cap") {
		t.Errorf("no truncation marker: %q", tr.Truncated)
	}
	// The run cap (2500) has less left than a second attempt's large request: it keeps metadata only.
	tok2 := h.g.Issue("a2", nil)
	post(t, h.url, "/v1/chat/completions", tok2, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("z", 2500)+`"}]}`, nil)
	post(t, h.url, "/v1/chat/completions", tok2, `{"model":"m","messages":[{"role":"user","content":"small"}]}`, nil)
	tr2 := mustTranscript(t, h, "a2")
	if !strings.Contains(tr2.Truncated, "run's transcripts") || !tr2.Calls[0].Truncated || tr2.Calls[0].Status != 200 || tr2.Calls[1].Truncated {
		t.Errorf("past the run cap: %+v", tr2)
	}
}

// BenchmarkGatewayCapture measures a chat call through the gateway with
// transcripts off, metadata-only and full, interleaved round by round so a
// busy machine slows all three alike; the ratio against off is the cost of
// capture. Each attempt's transcript is taken after its 20 calls, as the
// supervisor does.
func BenchmarkGatewayCapture(b *testing.B) {
	fu := benchFake(b, fakeprovider.Config{})
	modes := []string{transcript.ModeOff, transcript.ModeMetadata, transcript.ModeFull}
	gws, urls := map[string]*Gateway{}, map[string]string{}
	for _, m := range modes {
		gws[m], urls[m] = benchServe(b, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, MaxConnections: 64, Capture: Capture{Mode: m}})
	}
	client := benchClient(4)
	const calls = 20
	spent := map[string]time.Duration{}
	rounds := max(b.N, 60)
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for k := range modes {
			m := modes[(i+k)%len(modes)]
			g, id := gws[m], fmt.Sprintf("bench-%d", i)
			start := time.Now()
			tok := g.Issue(id, nil)
			for c := 0; c < calls; c++ {
				if code, err := do(client, urls[m]+"/v1/chat/completions", tok); err != nil || code != 200 {
					b.Fatalf("%d %v", code, err)
				}
			}
			g.Revoke(tok)
			_ = g.Drain(context.Background(), id)
			if tr := g.Transcript(id); (tr == nil) != (m == transcript.ModeOff) {
				b.Fatalf("mode %s: transcript %v", m, tr)
			}
			spent[m] += time.Since(start)
		}
	}
	b.StopTimer()
	for _, m := range modes {
		b.ReportMetric(float64(spent[m].Microseconds())/float64(rounds*calls), m+"-µs/call")
	}
	b.ReportMetric(float64(spent[transcript.ModeMetadata])/float64(spent[transcript.ModeOff]), "metadata-x-off")
	b.ReportMetric(float64(spent[transcript.ModeFull])/float64(spent[transcript.ModeOff]), "full-x-off")
}
