package run

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

// The built-in `agent chat` sends the sample's whole message list (system
// prompt and history) and the model settings, as the fake provider sees
// them. (It used to send only the last user message, and no settings.)
func TestAgentChatSendsMessagesAndSettings(t *testing.T) {
	t.Parallel()
	fp := fakeprovider.New(fakeprovider.Config{APIKey: "real-key"})
	var mu sync.Mutex
	var bodies []map[string]any
	h := fp.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var m map[string]any
			if err := json.Unmarshal(b, &m); err == nil {
				mu.Lock()
				bodies = append(bodies, m)
				mu.Unlock()
			}
		}
		h.ServeHTTP(w, r) // the fake checks the request as a provider would
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	dir := t.TempDir()
	path := write(t, dir, "steward.yaml", `
model:
  upstream: openai
  name: gpt-fake
  base_url: http://`+ln.Addr().String()+`/v1
  api_key_env: FAKE_KEY
  settings: {temperature: 0.2, max_tokens: 64, top_p: 0.9}
tasks:
  - name: chat
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - id: history
        input:
          - {role: system, content: "Answer with a number only."}
          - {role: user, content: "What is 2+2?"}
          - {role: assistant, content: "4"}
          - {role: user, content: "What is 3+3?"}
        target: "6"
`)
	exe := buildSteward(t)
	r := launchSet(t, path, func(o *Options) {
		o.Exe = exe
		o.Getenv = func(k string) string {
			if k == "FAKE_KEY" {
				return "real-key"
			}
			return ""
		}
	})
	if got := statuses(r.rep); got != "history:p" {
		t.Fatalf("statuses %s (%s)\n%s", got, r.rep.Attempts[0].Reason, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("the provider saw %d chat requests, want 1", len(bodies))
	}
	b := bodies[0]
	want := []any{
		map[string]any{"role": "system", "content": "Answer with a number only."},
		map[string]any{"role": "user", "content": "What is 2+2?"},
		map[string]any{"role": "assistant", "content": "4"},
		map[string]any{"role": "user", "content": "What is 3+3?"},
	}
	if !reflect.DeepEqual(b["messages"], want) {
		t.Fatalf("messages sent: %v\nwant %v", b["messages"], want)
	}
	if b["temperature"] != 0.2 || b["max_tokens"] != float64(64) || b["top_p"] != 0.9 || b["model"] != "gpt-fake" {
		t.Fatalf("model settings not sent: %v", b)
	}
}
