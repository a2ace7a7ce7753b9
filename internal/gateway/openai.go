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

// The OpenAI API: chat completions, the Responses API, legacy
// completions, embeddings and the model list, as api.openai.com and the
// OpenAI-compatible servers speak it. It is the fallback: a request no
// other format claims is OpenAI's.

func init() { Register(openaiAPI{}) }

type openaiAPI struct{}

func (openaiAPI) Name() string { return "openai" }

func (openaiAPI) Upstream() Upstream {
	return Upstream{BaseURL: "https://api.openai.com/v1", KeyEnv: "OPENAI_API_KEY"}
}

// Speaks claims nothing: OpenAI's is the format of every request no other
// format claims.
func (openaiAPI) Speaks(*http.Request, string) bool { return false }

func (openaiAPI) Route(path string) (string, bool) {
	switch path {
	case "/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings":
		return http.MethodPost, true
	}
	return modelsRoute(path)
}

// modelsRoute is the model list and a model's entry (GET), which OpenAI and
// Anthropic both serve.
func modelsRoute(path string) (string, bool) {
	if path == "/v1/models" {
		return http.MethodGet, false
	}
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && modelID(id) {
		return http.MethodGet, false
	}
	return "", false
}

func (openaiAPI) Token(h http.Header) string {
	a := h.Get("Authorization")
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func (openaiAPI) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// Forward: the SDKs' beta flag, request id and X-Stainless-* telemetry;
// list paging and Azure's api-version.
func (openaiAPI) Forward() (headers, query []string) {
	return []string{"Openai-Beta", "X-Client-Request-Id", "X-Stainless-*"},
		[]string{"api-version", "limit", "after", "before", "order"}
}

func (openaiAPI) ErrorBody(status int, kind ErrorKind, code, msg string) any {
	typ := "invalid_request_error"
	switch kind {
	case ErrBusy:
		typ = "rate_limit_error"
	case ErrOverloaded:
		typ = "overloaded_error"
	case ErrBudget, ErrLimit, ErrSpendLimit:
		typ = "insufficient_quota"
	case ErrUpstream:
		typ = "api_error"
	}
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
}

// Call reads the body's model and stream fields (OpenAI's and Anthropic's
// requests name them alike).
func (openaiAPI) Call(_ string, body []byte) (string, bool) { return bodyModel(body) }

func bodyModel(body []byte) (string, bool) {
	var head struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &head)
	return head.Model, head.Stream
}

// Prepare asks chat/completions streams for their final usage chunk when
// the client did not, so the attempt is charged; the gateway then leaves
// that chunk out of what the client sees (Usage's usageOnly).
func (openaiAPI) Prepare(path string, raw []byte) ([]byte, bool) {
	if (path != "/v1/chat/completions" && path != "/v1/completions") || !bytes.Contains(raw, []byte(`"stream"`)) {
		return raw, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw, false
	}
	var stream bool
	if s, ok := obj["stream"]; !ok || json.Unmarshal(s, &stream) != nil || !stream {
		return raw, false
	}
	so := map[string]json.RawMessage{}
	if s, ok := obj["stream_options"]; ok && !bytes.Equal(bytes.TrimSpace(s), []byte("null")) {
		if json.Unmarshal(s, &so) != nil {
			return raw, false
		}
		var inc bool
		if v, ok := so["include_usage"]; ok && json.Unmarshal(v, &inc) == nil && inc {
			return raw, false
		}
	}
	so["include_usage"] = json.RawMessage("true")
	sb, err := json.Marshal(so)
	if err != nil {
		return raw, false
	}
	obj["stream_options"] = sb
	nb, err := json.Marshal(obj)
	if err != nil {
		return raw, false
	}
	return nb, true
}

// Unprepare removes the stream_options.include_usage Prepare added.
func (openaiAPI) Unprepare(_ string, b []byte) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return b
	}
	var so map[string]json.RawMessage
	if json.Unmarshal(obj["stream_options"], &so) != nil {
		return b
	}
	delete(so, "include_usage")
	if len(so) == 0 {
		delete(obj, "stream_options")
	} else if sb, err := json.Marshal(so); err == nil {
		obj["stream_options"] = sb
	}
	nb, err := json.Marshal(obj)
	if err != nil {
		return b
	}
	return nb
}

// Estimate: the output cap is max_completion_tokens, max_tokens or the
// Responses API's max_output_tokens, times n or best_of (legacy
// completions: each answer is billed); embeddings bill input only.
func (openaiAPI) Estimate(path string, body []byte, defaultOut int64) (int64, bool) {
	switch path {
	case "/v1/embeddings":
		return 0, true
	case "/v1/chat/completions", "/v1/responses", "/v1/completions":
		return outputCap(body, defaultOut, []string{"max_completion_tokens", "max_tokens", "max_output_tokens"}, "n", "best_of"), true
	}
	return 0, false
}

// outputCap is the first of caps the body names (else defaultOut), times
// the largest of counts over 1 (at most 128). Keys are matched exactly as
// spelled (the upstream's decoder is case-sensitive; Go's struct decoding
// is not, so "Max_Tokens": 1 after "max_tokens" would hide the real cap),
// numbers as the upstream reads them.
func outputCap(body []byte, defaultOut int64, caps []string, counts ...string) int64 {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(body, &m)
	num := func(k string) int64 {
		var f float64
		if json.Unmarshal(m[k], &f) != nil || f < 1 {
			return 0
		}
		if f > 1<<40 {
			return 1 << 40
		}
		return int64(f + 0.999999)
	}
	out := defaultOut
	for _, k := range caps {
		if v := num(k); v > 0 {
			out = v
			break
		}
	}
	var n int64
	for _, k := range counts {
		n = max(n, num(k))
	}
	if n > 1 {
		out *= min(n, 128)
	}
	return out
}

// openaiUsage is chat completions' usage (prompt, completion) and the
// Responses API's (input, output).
type openaiUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
}

var usageKey = []byte(`"usage"`)

// Usage reads "usage" (chat completions, completions, embeddings, the
// Responses API's answer) or "response.usage" (its stream's final
// event). usageOnly is the extra chunk include_usage adds: usage and no
// choices.
func (openaiAPI) Usage(doc []byte) (in, out int64, ok, usageOnly bool) {
	if !bytes.Contains(doc, usageKey) {
		return 0, 0, false, false
	}
	var h struct {
		Usage    *openaiUsage `json:"usage"`
		Response *struct {
			Usage *openaiUsage `json:"usage"`
		} `json:"response"`
		Choices json.RawMessage `json:"choices"`
	}
	if json.Unmarshal(doc, &h) != nil {
		return 0, 0, false, false
	}
	for _, u := range []*openaiUsage{h.Usage, responseUsage(h.Response)} {
		if u == nil {
			continue
		}
		ok = true
		in = max(in, u.PromptTokens+u.InputTokens)
		out = max(out, u.CompletionTokens+u.OutputTokens)
	}
	return in, out, ok, h.Usage != nil && bytes.Equal(bytes.TrimSpace(h.Choices), []byte("[]"))
}

func responseUsage(r *struct {
	Usage *openaiUsage `json:"usage"`
}) *openaiUsage {
	if r == nil {
		return nil
	}
	return r.Usage
}

// Assemble: a chat.completion or text_completion from its chunks, or the
// Responses API's response from its final event.
func (openaiAPI) Assemble(events [][]byte) []byte {
	var oa openaiAssembler
	var final json.RawMessage
	for _, d := range events {
		var head struct {
			Type     string          `json:"type"`
			Object   string          `json:"object"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(d, &head) != nil {
			continue
		}
		switch {
		case head.Object == "chat.completion.chunk" || head.Object == "text_completion":
			oa.add(d)
		case head.Type == "response.completed" || head.Type == "response.failed" || head.Type == "response.incomplete":
			final = head.Response
		}
	}
	switch {
	case len(final) > 0:
		return final
	case oa.seen:
		return oa.doc()
	}
	return nil
}

func (openaiAPI) RateHeaders() RateHeaders {
	return RateHeaders{
		Quotas: [][2]string{
			{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests"},
			{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens"},
		},
		Requests: [3]string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
		Tokens:   [3]string{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
		// The tokens a minute count a request's input (and its output cap).
		InputLimits: []string{"x-ratelimit-limit-tokens"},
	}
}

// SpendLimit: insufficient_quota, billing (OpenAI-compatible servers say
// it in Anthropic's words too, so the common reading).
func (openaiAPI) SpendLimit(h http.Header, body []byte) (string, bool) { return spendLimit(h, body) }

// InputFloor: the text of chat messages (and their tool calls), of the
// Responses API's instructions and input items, of a completion's prompt
// or an embedding's input (a token array counts its length), and the
// function tools' names, descriptions and schemas. Images, audio and
// files are not vouched for, nor is reasoning passed back. A request
// marking a prompt cache breakpoint (OpenAI-compatible servers in front
// of Anthropic take cache_control) has none.
func (openaiAPI) InputFloor(path string, body []byte) int64 {
	if bytes.Contains(body, []byte(`"cache_control"`)) {
		return 0
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return 0
	}
	var chars, tokens int64
	switch path {
	case "/v1/chat/completions":
		msgs, _ := m["messages"].([]any)
		for _, x := range msgs {
			msg, _ := x.(map[string]any)
			chars += openaiContent(msg["content"])
			calls, _ := msg["tool_calls"].([]any)
			for _, c := range calls {
				call, _ := c.(map[string]any)
				fn, _ := call["function"].(map[string]any)
				chars += textChars(fn["name"]) + textChars(fn["arguments"])
			}
		}
		chars += openaiTools(m["tools"])
	case "/v1/responses":
		chars += textChars(m["instructions"]) + openaiTools(m["tools"])
		switch in := m["input"].(type) {
		case string:
			chars += textChars(in)
		case []any:
			for _, x := range in {
				item, _ := x.(map[string]any)
				switch item["type"] {
				case nil, "message":
					chars += openaiContent(item["content"])
				case "function_call":
					chars += textChars(item["name"]) + textChars(item["arguments"])
				case "function_call_output":
					chars += openaiContent(item["output"])
				}
			}
		}
	case "/v1/completions", "/v1/embeddings":
		key := "prompt"
		if path == "/v1/embeddings" {
			key = "input"
		}
		c, t := promptSize(m[key])
		chars, tokens = chars+c, tokens+t
	default:
		return 0
	}
	return floorTokens(chars) + tokens
}

// openaiContent is the characters of a message's content: a string, or
// parts of which the text ones count.
func openaiContent(v any) int64 {
	return contentChars(v, func(p map[string]any) int64 {
		switch p["type"] {
		case "text", "input_text", "output_text":
			return textChars(p["text"])
		case "refusal":
			return textChars(p["refusal"])
		}
		return 0
	})
}

// openaiTools is the characters of the function tools, in chat's shape
// ({"function": {…}}) or the Responses API's (flat).
func openaiTools(v any) int64 {
	tools, _ := v.([]any)
	var n int64
	for _, x := range tools {
		t, _ := x.(map[string]any)
		if t["type"] != "function" {
			continue
		}
		if fn, ok := t["function"].(map[string]any); ok {
			t = fn
		}
		n += textChars(t["name"]) + textChars(t["description"]) + textChars(t["parameters"])
	}
	return n
}

// promptSize is a prompt's or an embedding input's characters (a string,
// or strings) and tokens (a token array, or arrays: each number is one).
func promptSize(v any) (chars, tokens int64) {
	switch p := v.(type) {
	case string:
		return textChars(p), 0
	case []any:
		for _, x := range p {
			switch e := x.(type) {
			case string:
				chars += textChars(e)
			case float64:
				tokens++
			case []any:
				for _, y := range e {
					if _, ok := y.(float64); ok {
						tokens++
					}
				}
			}
		}
	}
	return chars, tokens
}

func (openaiAPI) Env(baseURL, token string) []string {
	return []string{"OPENAI_BASE_URL=" + baseURL + "/v1", "OPENAI_API_KEY=" + token}
}

type openaiAssembler struct {
	seen    bool
	base    map[string]any
	choices map[int]*oaChoice
	order   []int
	usage   any
	object  string
}

type oaChoice struct {
	role, content, text, refusal string
	finish                       any
	tools                        map[int]*oaTool
	toolOrder                    []int
}

type oaTool struct{ id, typ, name, args string }

func (o *openaiAssembler) add(d []byte) {
	var ch struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
			Delta struct {
				Role      string `json:"role"`
				Content   string `json:"content"`
				Refusal   string `json:"refusal"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason any `json:"finish_reason"`
		} `json:"choices"`
		Usage any `json:"usage"`
	}
	if json.Unmarshal(d, &ch) != nil {
		return
	}
	if !o.seen {
		o.seen = true
		o.base = map[string]any{"id": ch.ID, "created": ch.Created, "model": ch.Model}
		o.choices = map[int]*oaChoice{}
	}
	o.object = ch.Object
	if ch.Usage != nil {
		o.usage = ch.Usage
	}
	for _, c := range ch.Choices {
		x := o.choices[c.Index]
		if x == nil {
			x = &oaChoice{tools: map[int]*oaTool{}}
			o.choices[c.Index] = x
			o.order = append(o.order, c.Index)
		}
		if c.Delta.Role != "" {
			x.role = c.Delta.Role
		}
		x.content += c.Delta.Content
		x.refusal += c.Delta.Refusal
		x.text += c.Text
		if c.FinishReason != nil {
			x.finish = c.FinishReason
		}
		for _, tc := range c.Delta.ToolCalls {
			t := x.tools[tc.Index]
			if t == nil {
				t = &oaTool{}
				x.tools[tc.Index] = t
				x.toolOrder = append(x.toolOrder, tc.Index)
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Type != "" {
				t.typ = tc.Type
			}
			t.name += tc.Function.Name
			t.args += tc.Function.Arguments
		}
	}
}

func (o *openaiAssembler) doc() []byte {
	doc := o.base
	var choices []any
	sort.Ints(o.order)
	for _, i := range o.order {
		x := o.choices[i]
		c := map[string]any{"index": i, "finish_reason": x.finish}
		if o.object == "text_completion" {
			c["text"] = x.text
		} else {
			role := x.role
			if role == "" {
				role = "assistant"
			}
			m := map[string]any{"role": role, "content": nil}
			if x.content != "" {
				m["content"] = x.content
			}
			if x.refusal != "" {
				m["refusal"] = x.refusal
			}
			var tools []any
			sort.Ints(x.toolOrder)
			for _, k := range x.toolOrder {
				t := x.tools[k]
				typ := t.typ
				if typ == "" {
					typ = "function"
				}
				tools = append(tools, map[string]any{"id": t.id, "type": typ, "function": map[string]any{"name": t.name, "arguments": t.args}})
			}
			if len(tools) > 0 {
				m["tool_calls"] = tools
			}
			c["message"] = m
		}
		choices = append(choices, c)
	}
	doc["choices"] = choices
	if o.object == "text_completion" {
		doc["object"] = "text_completion"
	} else {
		doc["object"] = "chat.completion"
	}
	if o.usage != nil {
		doc["usage"] = o.usage
	}
	b, _ := json.Marshal(doc)
	return b
}

// Ask is a chat completion of one user message.
func (openaiAPI) Ask(model, prompt string, maxTokens int) (string, []byte) {
	b, _ := json.Marshal(map[string]any{"model": model, "max_completion_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	return "/v1/chat/completions", b
}

// Reply is the text of a chat completion's first choice.
func (openaiAPI) Reply(data []byte) (string, error) {
	var c struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("the answer is not a chat completion: %v", err)
	}
	if len(c.Choices) == 0 || c.Choices[0].Message.Content == nil {
		return "", errors.New("the chat completion has no text")
	}
	return *c.Choices[0].Message.Content, nil
}
