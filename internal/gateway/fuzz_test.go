package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/clock"
)

// FuzzGatewayRequest throws arbitrary requests at the gateway (in process,
// mock upstream): it must answer every one, in a JSON error or a relayed
// answer, and never show the real key.
func FuzzGatewayRequest(f *testing.F) {
	f.Add("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"2+2"}]}`, true)
	f.Add("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true)
	f.Add("POST", "/v1/messages", `{"model":"c","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, true)
	f.Add("POST", "/v1/responses", `{"model":"m","input":"hi"}`, true)
	f.Add("POST", "/v1/embeddings", `{"model":"e","input":["a","b"]}`, true)
	f.Add("GET", "/v1/models", ``, true)
	f.Add("POST", "/v1/chat/completions", `{"model":`, true)
	f.Add("POST", "/v1/chat/completions", `{"stream":true,"stream_options":null}`, true)
	f.Add("POST", "/v1/chat/completions", `{"stream":true,"stream_options":7}`, true)
	f.Add("DELETE", "/v1/../etc/passwd", `x`, false)
	f.Add("POST", "/v1/messages", `[]`, false)
	g, err := New(Config{Upstream: "mock", APIKey: realKey, MaxBodyBytes: 1 << 16, Clock: clock.NewInstant(testEpoch), RetryLimit: 1})
	if err != nil {
		f.Fatal(err)
	}
	tok := g.Issue("fuzz", nil)
	f.Fuzz(func(t *testing.T, method, path, body string, auth bool) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(method, " \t\r\n") || method == "" {
			return
		}
		req, err := http.NewRequest(method, "http://gw"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 599 {
			t.Fatalf("status %d", rec.Code)
		}
		if strings.Contains(rec.Body.String(), realKey) {
			t.Fatal("the real key in a response")
		}
		if rec.Code >= 400 && !strings.Contains(rec.Body.String(), `"error"`) {
			t.Fatalf("error %d without an error body: %q", rec.Code, rec.Body.String())
		}
	})
}
