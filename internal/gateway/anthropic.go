package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Anthropic's Messages API (messages, token counting, the model list), as
// api.anthropic.com speaks it.

func init() { Register(anthropicAPI{}) }

type anthropicAPI struct{}

func (anthropicAPI) Name() string { return "anthropic" }

func (anthropicAPI) Upstream() Upstream {
	return Upstream{BaseURL: "https://api.anthropic.com", KeyEnv: "ANTHROPIC_API_KEY"}
}

// Speaks: its routes, its version header, or its key header when the
// run's upstream is Anthropic.
func (anthropicAPI) Speaks(r *http.Request, upstream string) bool {
	return strings.HasPrefix(r.URL.Path, "/v1/messages") || r.Header.Get("anthropic-version") != "" ||
		(upstream == "anthropic" && r.Header.Get("x-api-key") != "")
}

func (anthropicAPI) Route(path string) (string, bool) {
	switch path {
	case "/v1/messages", "/v1/messages/count_tokens":
		return http.MethodPost, true
	}
	return modelsRoute(path)
}

func (anthropicAPI) Token(h http.Header) string { return strings.TrimSpace(h.Get("x-api-key")) }

func (anthropicAPI) Authorize(h http.Header, key string) {
	h.Set("x-api-key", key)
	if h.Get("anthropic-version") == "" {
		h.Set("anthropic-version", "2023-06-01")
	}
}

// Forward: the version and beta flags, the browser-access opt-in, the
// SDK's X-Stainless-* telemetry; the beta flag and list paging.
func (anthropicAPI) Forward() (headers, query []string) {
	return []string{"Anthropic-Version", "Anthropic-Beta", "Anthropic-Dangerous-Direct-Browser-Access", "X-Stainless-*"},
		[]string{"beta", "limit", "after_id", "before_id"}
}

func (anthropicAPI) ErrorBody(status int, kind ErrorKind, code, msg string) any {
	typ := "invalid_request_error"
	switch kind {
	case ErrNotFound:
		typ = "not_found_error"
	case ErrAuth:
		typ = "authentication_error"
	case ErrTooLarge:
		typ = "request_too_large"
	case ErrBusy, ErrSpendLimit:
		typ = "rate_limit_error"
	case ErrOverloaded:
		typ = "overloaded_error"
	case ErrBudget:
		typ = "billing_error"
	case ErrLimit:
		typ = "permission_error"
	case ErrUpstream:
		typ = "api_error"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

func (anthropicAPI) Call(_ string, body []byte) (string, bool) { return bodyModel(body) }

func (anthropicAPI) Prepare(_ string, body []byte) ([]byte, bool) { return body, false }
func (anthropicAPI) Unprepare(_ string, body []byte) []byte       { return body }

// Estimate: messages are billed, up to max_tokens; counting tokens is free.
func (anthropicAPI) Estimate(path string, body []byte, defaultOut int64) (int64, bool) {
	if path != "/v1/messages" {
		return 0, false
	}
	return outputCap(body, defaultOut, []string{"max_tokens"}), true
}

type anthropicUsage struct {
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
}

// Usage reads "usage" (a message, a stream's message_delta) or
// "message.usage" (message_start); input counts the cache's writes and
// reads, which are billed as input. A stream reports input at its start
// and its cumulative output at the end: the meter keeps the largest.
func (anthropicAPI) Usage(doc []byte) (in, out int64, ok, usageOnly bool) {
	if !bytes.Contains(doc, usageKey) {
		return 0, 0, false, false
	}
	var h struct {
		Usage   *anthropicUsage `json:"usage"`
		Message *struct {
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(doc, &h) != nil {
		return 0, 0, false, false
	}
	us := []*anthropicUsage{h.Usage}
	if h.Message != nil {
		us = append(us, h.Message.Usage)
	}
	for _, u := range us {
		if u == nil {
			continue
		}
		ok = true
		in = max(in, u.InputTokens+u.CacheCreation+u.CacheRead)
		out = max(out, u.OutputTokens)
	}
	return in, out, ok, false
}

// Assemble: the message from message_start, its content blocks and
// message_delta.
func (anthropicAPI) Assemble(events [][]byte) []byte {
	var an anthropicAssembler
	for _, d := range events {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(d, &head) != nil {
			continue
		}
		if strings.HasPrefix(head.Type, "message_") || strings.HasPrefix(head.Type, "content_block_") {
			an.add(head.Type, d)
		}
	}
	if an.msg == nil {
		return nil
	}
	return an.doc()
}

// RateHeaders: requests, tokens, input and output tokens; a reset is a
// time, to the second.
func (anthropicAPI) RateHeaders() RateHeaders {
	return RateHeaders{
		Quotas: [][2]string{
			{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining"},
			{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining"},
			{"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining"},
			{"anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining"},
		},
		Requests: [3]string{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
		Tokens:   [3]string{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
		// The input tokens a minute (ITPM), else the tokens bucket, which
		// counts input and output together (where seen, its limit is
		// ITPM + OTPM).
		InputLimits: []string{"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-tokens-limit"},
	}
}

// SpendLimit: a 429 naming the spend limit or the credit balance.
func (anthropicAPI) SpendLimit(h http.Header, body []byte) (string, bool) { return spendLimit(h, body) }

// InputFloor: a message's text (system, messages, tool calls and results,
// text documents) and its tools' names, descriptions and schemas.
// Images, PDFs and other sources are not vouched for (their base64 is no
// measure of their tokens), nor are thinking blocks (Anthropic drops
// those of earlier turns from the input). A request that marks a prompt
// cache breakpoint has none: cache reads do not count against the input
// tokens a minute, so its input may pass however large it is.
func (anthropicAPI) InputFloor(path string, body []byte) int64 {
	if path != "/v1/messages" || bytes.Contains(body, []byte(`"cache_control"`)) {
		return 0
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return 0
	}
	n := anthropicContent(m["system"])
	msgs, _ := m["messages"].([]any)
	for _, x := range msgs {
		if msg, ok := x.(map[string]any); ok {
			n += anthropicContent(msg["content"])
		}
	}
	tools, _ := m["tools"].([]any)
	for _, x := range tools {
		if tool, ok := x.(map[string]any); ok {
			n += textChars(tool["name"]) + textChars(tool["description"]) + textChars(tool["input_schema"])
		}
	}
	return floorTokens(n)
}

// anthropicContent is the characters of a content: a string, or blocks.
func anthropicContent(v any) int64 { return contentChars(v, anthropicBlock) }

// anthropicBlock is the characters of one content block the model reads.
func anthropicBlock(b map[string]any) int64 {
	switch b["type"] {
	case "text":
		return textChars(b["text"])
	case "tool_use", "server_tool_use":
		return textChars(b["name"]) + textChars(b["input"])
	case "tool_result", "search_result":
		return anthropicContent(b["content"])
	case "document":
		src, _ := b["source"].(map[string]any)
		switch src["type"] {
		case "text":
			return textChars(src["data"])
		case "content":
			return anthropicContent(src["content"])
		}
	}
	return 0
}

func (anthropicAPI) Env(baseURL, token string) []string {
	return []string{"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_API_KEY=" + token}
}

type anthropicAssembler struct {
	msg    map[string]any
	blocks map[int]map[string]any
	order  []int
	json   map[int]*strings.Builder
}

func (a *anthropicAssembler) add(typ string, d []byte) {
	var ev struct {
		Message      map[string]any `json:"message"`
		Index        int            `json:"index"`
		ContentBlock map[string]any `json:"content_block"`
		Delta        map[string]any `json:"delta"`
		Usage        map[string]any `json:"usage"`
	}
	if json.Unmarshal(d, &ev) != nil {
		return
	}
	if a.msg == nil {
		a.msg = map[string]any{"type": "message", "role": "assistant"}
		a.blocks = map[int]map[string]any{}
		a.json = map[int]*strings.Builder{}
	}
	switch typ {
	case "message_start":
		for k, v := range ev.Message {
			if k != "content" {
				a.msg[k] = v
			}
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return
		}
		if _, ok := a.blocks[ev.Index]; !ok {
			a.order = append(a.order, ev.Index)
		}
		a.blocks[ev.Index] = ev.ContentBlock
	case "content_block_delta":
		b := a.blocks[ev.Index]
		if b == nil {
			b = map[string]any{"type": "text", "text": ""}
			a.blocks[ev.Index] = b
			a.order = append(a.order, ev.Index)
		}
		switch ev.Delta["type"] {
		case "text_delta":
			s, _ := b["text"].(string)
			t, _ := ev.Delta["text"].(string)
			b["text"] = s + t
		case "input_json_delta":
			sb := a.json[ev.Index]
			if sb == nil {
				sb = &strings.Builder{}
				a.json[ev.Index] = sb
			}
			p, _ := ev.Delta["partial_json"].(string)
			sb.WriteString(p)
		case "thinking_delta":
			s, _ := b["thinking"].(string)
			t, _ := ev.Delta["thinking"].(string)
			b["thinking"] = s + t
		}
	case "message_delta":
		for k, v := range ev.Delta {
			a.msg[k] = v
		}
		if ev.Usage != nil {
			u, _ := a.msg["usage"].(map[string]any)
			if u == nil {
				u = map[string]any{}
			}
			for k, v := range ev.Usage {
				u[k] = v
			}
			a.msg["usage"] = u
		}
	}
}

func (a *anthropicAssembler) doc() []byte {
	sort.Ints(a.order)
	var content []any
	for _, i := range a.order {
		b := a.blocks[i]
		if sb := a.json[i]; sb != nil {
			var v any
			if json.Unmarshal([]byte(sb.String()), &v) == nil {
				b["input"] = v
			} else {
				b["input"] = sb.String()
			}
		}
		content = append(content, b)
	}
	a.msg["content"] = content
	b, _ := json.Marshal(a.msg)
	return b
}

// Ask is a message of one user turn.
func (anthropicAPI) Ask(model, prompt string, maxTokens int) (string, []byte) {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	return "/v1/messages", b
}

// Reply is the text of a message's text blocks.
func (anthropicAPI) Reply(data []byte) (string, error) {
	var m struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("the answer is not a message: %v", err)
	}
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	if b.Len() == 0 {
		return "", errors.New("the message has no text")
	}
	return b.String(), nil
}
