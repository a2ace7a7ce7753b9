package mockmodel_test

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/mockmodel"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mockmodel.New())
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string, hdr map[string]string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post %s: %v", url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return resp.StatusCode, m, resp.Header
}

func TestValidation(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantAnthropic    bool
		wantMsg          string
	}{
		{"openai bad json", "/v1/chat/completions", `{"model":`, 400, false, "could not parse the JSON body"},
		{"openai no model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, false, "you must provide a model parameter"},
		{"openai no messages", "/v1/chat/completions", `{"model":"mock"}`, 400, false, "Missing required parameter: 'messages'."},
		{"openai empty messages", "/v1/chat/completions", `{"model":"mock","messages":[]}`, 400, false, "empty array"},
		{"openai bad role", "/v1/chat/completions", `{"model":"mock","messages":[{"role":"robot","content":"hi"}]}`, 400, false, "Invalid value: 'robot'"},
		{"openai stream_options without stream", "/v1/chat/completions", `{"model":"mock","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, false, "only allowed when 'stream' is enabled"},
		{"responses no input", "/v1/responses", `{"model":"mock"}`, 400, false, "'input'"},
		{"completions no prompt", "/v1/completions", `{"model":"mock"}`, 400, false, "'prompt'"},
		{"embeddings no input", "/v1/embeddings", `{"model":"mock"}`, 400, false, "'input'"},
		{"anthropic bad json", "/v1/messages", `nope`, 400, true, "error parsing the body"},
		{"anthropic no model", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 400, true, "model: Field required"},
		{"anthropic no max_tokens", "/v1/messages", `{"model":"mock","messages":[{"role":"user","content":"hi"}]}`, 400, true, "max_tokens: Field required"},
		{"anthropic no messages", "/v1/messages", `{"model":"mock","max_tokens":5}`, 400, true, "messages: Field required"},
		{"anthropic bad role", "/v1/messages", `{"model":"mock","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, 400, true, "messages.0.role"},
		{"anthropic zero max_tokens", "/v1/messages", `{"model":"mock","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, 400, true, "greater than or equal to 1"},
		{"openai unknown route", "/v1/nope", `{}`, 404, false, "Invalid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, hdr := post(t, srv.URL+tt.path, tt.body, nil)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%v)", status, tt.wantStatus, body)
			}
			var msg string
			if tt.wantAnthropic {
				e, _ := body["error"].(map[string]any)
				if body["type"] != "error" || e == nil || e["type"] != "invalid_request_error" || hdr.Get("request-id") == "" {
					t.Fatalf("not the Anthropic error shape: %v", body)
				}
				msg, _ = e["message"].(string)
			} else {
				e, _ := body["error"].(map[string]any)
				if e == nil || e["type"] != "invalid_request_error" {
					t.Fatalf("not the OpenAI error shape: %v", body)
				}
				if _, ok := e["param"]; !ok {
					t.Fatalf("OpenAI error without param: %v", body)
				}
				if _, ok := e["code"]; !ok {
					t.Fatalf("OpenAI error without code: %v", body)
				}
				msg, _ = e["message"].(string)
			}
			if !strings.Contains(msg, tt.wantMsg) {
				t.Fatalf("message %q does not contain %q", msg, tt.wantMsg)
			}
		})
	}
}

// The raw chat stream ends with the usage chunk and then data: [DONE].
func TestChatStreamWire(t *testing.T) {
	srv := newServer(t)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"mock","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"What is 2+3?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if len(data) < 3 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream = %q", data)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(data[len(data)-2]), &last); err != nil {
		t.Fatal(err)
	}
	u, _ := last["usage"].(map[string]any)
	if ch, _ := last["choices"].([]any); len(ch) != 0 || u == nil || u["completion_tokens"].(float64) != 1 {
		t.Fatalf("usage chunk = %v", last)
	}
}

func TestEmbeddingsBase64(t *testing.T) {
	srv := newServer(t)
	status, body, _ := post(t, srv.URL+"/v1/embeddings", `{"model":"mock","input":"hello","encoding_format":"base64","dimensions":4}`, nil)
	if status != 200 {
		t.Fatalf("status %d %v", status, body)
	}
	s := body["data"].([]any)[0].(map[string]any)["embedding"].(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("base64 embedding %q: %v", s, err)
	}
	want := mockmodel.Embedding("hello", 4)
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != want[i] {
			t.Fatalf("[%d] = %v, want %v", i, got, want[i])
		}
	}
}

// The "created" timestamp comes from the handler's clock.
func TestCreatedFromClock(t *testing.T) {
	at := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	srv := httptest.NewServer(mockmodel.NewWithOptions(mockmodel.Options{Clock: clock.NewFake(at)}))
	t.Cleanup(srv.Close)
	code, m, _ := post(t, srv.URL+"/v1/chat/completions", `{"model":"mock","messages":[{"role":"user","content":"hi"}]}`, nil)
	if code != 200 || m["created"] != float64(at.Unix()) {
		t.Fatalf("status %d, created %v, want %d", code, m["created"], at.Unix())
	}
}
