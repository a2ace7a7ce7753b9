package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestInputFloorIsALowerBound: a request's input floor counts the text the
// model reads at 8 characters a token (its characters, not its JSON's
// escaped bytes), and nothing it cannot vouch for: base64 images and
// documents, data URLs, thinking and reasoning passed back; a request
// with a prompt cache breakpoint, or on a route no bucket counts, has none.
func TestInputFloorIsALowerBound(t *testing.T) {
	ant, _ := LookupAPI("anthropic")
	oai, _ := LookupAPI("openai")
	text := strings.Repeat("lorem ipsum ", 1000) // 12 000 characters: 1 500 tokens at least
	cjk := strings.Repeat("中", 8000)             // 8 000 characters, 48 000 bytes escaped
	blob := strings.Repeat("QUJD", 250000)       // a megabyte of base64
	js := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	user := func(content any) map[string]any { return map[string]any{"role": "user", "content": content} }
	for _, c := range []struct {
		name string
		api  API
		path string
		body []byte
		want int64
	}{
		{"anthropic text", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10, "system": text, "messages": []any{user(text)}}), 3000},
		{"anthropic blocks, tools, tool calls and results", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10,
			"system": []any{map[string]any{"type": "text", "text": text}},
			"tools":  []any{map[string]any{"name": "run", "description": text, "input_schema": map[string]any{"type": "object"}}},
			"messages": []any{user([]any{map[string]any{"type": "text", "text": text}}),
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "run", "input": map[string]any{"cmd": text}}}},
				user([]any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{map[string]any{"type": "text", "text": text}}}})}}),
			(5*12000 + 3 + 6 + 3) / 8},
		{"anthropic characters, not escaped bytes", ant, "/v1/messages", []byte(`{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat(`\u4e2d`, 8000) + `"}]}`), 1000},
		{"anthropic raw UTF-8", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10, "messages": []any{user(cjk)}}), 1000},
		{"anthropic image and PDF: not vouched for", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10, "messages": []any{user([]any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": blob}},
			map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": blob}},
			map[string]any{"type": "text", "text": "what is this?"}})}}), 13 / 8},
		{"anthropic thinking: dropped by the provider", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10, "messages": []any{user("hi"),
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": text, "signature": blob}, map[string]any{"type": "redacted_thinking", "data": blob}}}}}), 0},
		{"anthropic cache breakpoint: no floor", ant, "/v1/messages", js(map[string]any{"model": "c", "max_tokens": 10, "system": []any{map[string]any{"type": "text", "text": text, "cache_control": map[string]any{"type": "ephemeral"}}}, "messages": []any{user(text)}}), 0},
		{"anthropic count_tokens", ant, "/v1/messages/count_tokens", js(map[string]any{"model": "c", "messages": []any{user(text)}}), 0},
		{"anthropic not JSON", ant, "/v1/messages", []byte(text), 0},
		{"openai chat", oai, "/v1/chat/completions", js(map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "system", "content": text},
			user([]any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + blob}}}),
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "run", "arguments": text}}}}},
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "run", "description": text, "parameters": map[string]any{"type": "object"}}}}}),
			(4*12000 + 3 + 3 + 6) / 8},
		{"openai responses", oai, "/v1/responses", js(map[string]any{"model": "m", "instructions": text, "input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}, map[string]any{"type": "input_image", "image_url": "data:image/png;base64," + blob}}},
			map[string]any{"type": "reasoning", "encrypted_content": blob, "summary": []any{map[string]any{"type": "summary_text", "text": text}}},
			map[string]any{"type": "function_call_output", "call_id": "c", "output": text}}}), 3 * 12000 / 8},
		{"openai embeddings of token arrays", oai, "/v1/embeddings", js(map[string]any{"model": "e", "input": []any{[]any{1, 2, 3}, []any{4, 5}}}), 5},
		{"openai completions", oai, "/v1/completions", js(map[string]any{"model": "m", "prompt": text}), 1500},
		{"openai-compatible server in front of Anthropic, cache breakpoint", oai, "/v1/chat/completions", js(map[string]any{"model": "m", "messages": []any{user([]any{map[string]any{"type": "text", "text": text, "cache_control": map[string]any{"type": "ephemeral"}}})}}), 0},
		{"openai models", oai, "/v1/models", nil, 0},
	} {
		if got := c.api.InputFloor(c.path, c.body); got != c.want {
			t.Errorf("%s: floor %d, want %d", c.name, got, c.want)
		}
	}
}

// TestTooLargeForKeyErrsTowardCongestion: a 429 is taken for a request too
// large for the key only when its floor exceeds the whole limit of a
// bucket that counts input, read from the headers the answer carries: not
// what is left, not a limit that is no positive number, and not
// Anthropic's tokens bucket where the input tokens are announced (the more
// specific bucket is the one the input is held to).
func TestTooLargeForKeyErrsTowardCongestion(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	const in, tok, oai = "anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-tokens-limit", "x-ratelimit-limit-tokens"
	for _, c := range []struct {
		name  string
		h     http.Header
		floor int64
		want  bool
	}{
		{"over the input tokens a minute", hdr(in, "30000", "anthropic-ratelimit-input-tokens-remaining", "30000"), 30001, true},
		{"at the limit: may pass", hdr(in, "30000"), 30000, false},
		{"over what is left only: congestion", hdr(in, "30000", "anthropic-ratelimit-input-tokens-remaining", "1000"), 5000, false},
		{"no floor", hdr(in, "1"), 0, false},
		{"the input limit, not the smaller tokens limit", hdr(in, "30000", tok, "8000"), 10000, false},
		{"the tokens bucket where no input limit is announced", hdr(tok, "8000"), 10000, true},
		{"an input limit that is no number is not passed over", hdr(in, "NaN", tok, "8000"), 10000, false},
		{"a zero limit", hdr(in, "0"), 10000, false},
		{"a negative limit", hdr(in, "-5"), 10000, false},
		{"an infinite limit", hdr(in, "+Inf"), 10000, false},
		{"openai tokens a minute", hdr(oai, "30000"), 40000, true},
		{"no headers", hdr(), 40000, false},
	} {
		if _, _, got := tooLargeForKey(c.h, c.floor); got != c.want {
			t.Errorf("%s: too large %v, want %v", c.name, got, c.want)
		}
	}
}
