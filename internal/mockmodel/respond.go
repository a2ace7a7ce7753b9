package mockmodel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Pacer is called before each piece of output is sent, with the number of
// output tokens in it; a non-streaming response calls it once with the total.
// It lets a caller model generation latency. A non-nil error stops the
// response (the client sees a cut-off stream or no answer).
type Pacer func(ctx context.Context, tokens int) error

// Meta is what a response carries besides the answer.
type Meta struct {
	ID        string    // suffix of the response id (chatcmpl-…, msg_…)
	RequestID string    // x-request-id / request-id header; empty: none
	Now       time.Time // created timestamps
}

// ModelList is the set of models the mock lists.
var ModelList = []string{"mock"}

// Write sends the call's response in its wire format: JSON, or SSE when the
// call streams. Headers already set on w are kept.
func (c *Call) Write(ctx context.Context, w http.ResponseWriter, m Meta, pace Pacer) error {
	if pace == nil {
		pace = func(context.Context, int) error { return nil }
	}
	if m.RequestID != "" {
		if c.API == Anthropic {
			w.Header().Set("request-id", m.RequestID)
		} else {
			w.Header().Set("x-request-id", m.RequestID)
		}
	}
	if c.Stream {
		sw := newSSE(w)
		switch c.Endpoint {
		case ChatCompletions:
			return c.streamChat(ctx, sw, m, pace)
		case Completions:
			return c.streamCompletions(ctx, sw, m, pace)
		case Responses:
			return c.streamResponses(ctx, sw, m, pace)
		case Messages:
			return c.streamMessages(ctx, sw, m, pace)
		}
	}
	if c.Endpoint.Generates() && c.Endpoint != Embeddings {
		if err := pace(ctx, int(c.OutputTokens())); err != nil {
			return err
		}
	}
	var v any
	switch c.Endpoint {
	case ChatCompletions:
		v = c.chatBody(m)
	case Completions:
		v = c.completionsBody(m)
	case Responses:
		v = c.responseObject(m, "completed")
	case Embeddings:
		v = c.embeddingsBody()
	case Messages:
		v = c.messageBody(m)
	case CountTokensEP:
		v = map[string]any{"input_tokens": c.InputTokens}
	case Models:
		v = c.modelsBody(m)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(append(b, '\n'))
	return err
}

// ---- bodies --------------------------------------------------------------

func openaiUsage(in, out int64) map[string]any {
	return map[string]any{
		"prompt_tokens":     in,
		"completion_tokens": out,
		"total_tokens":      in + out,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": 0, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": 0, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

func finish(a Answer) string {
	if a.Truncated {
		return "length"
	}
	return "stop"
}

func (c *Call) chatBody(m Meta) map[string]any {
	a := c.Answers[0]
	return map[string]any{
		"id":      "chatcmpl-" + m.ID,
		"object":  "chat.completion",
		"created": m.Now.Unix(),
		"model":   c.Model,
		"choices": []any{map[string]any{
			"index": 0,
			"message": map[string]any{
				"role": "assistant", "content": a.Text(), "refusal": nil, "annotations": []any{},
			},
			"logprobs":      nil,
			"finish_reason": finish(a),
		}},
		"usage":              openaiUsage(c.InputTokens, c.OutputTokens()),
		"service_tier":       "default",
		"system_fingerprint": "fp_mock",
	}
}

func (c *Call) completionsBody(m Meta) map[string]any {
	var choices []any
	for i, a := range c.Answers {
		choices = append(choices, map[string]any{
			"text": a.Text(), "index": i, "logprobs": nil, "finish_reason": finish(a),
		})
	}
	out := c.OutputTokens()
	return map[string]any{
		"id":                 "cmpl-" + m.ID,
		"object":             "text_completion",
		"created":            m.Now.Unix(),
		"model":              c.Model,
		"system_fingerprint": "fp_mock",
		"choices":            choices,
		"usage": map[string]any{
			"prompt_tokens": c.InputTokens, "completion_tokens": out, "total_tokens": c.InputTokens + out,
		},
	}
}

func (c *Call) embeddingsBody() map[string]any {
	var data []any
	for i, p := range c.Prompts {
		v := Embedding(p, c.Dimensions)
		var emb any = v
		if c.Base64 {
			emb = base64.StdEncoding.EncodeToString(embeddingBytes(v))
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	return map[string]any{
		"object": "list",
		"data":   data,
		"model":  c.Model,
		"usage":  map[string]any{"prompt_tokens": c.InputTokens, "total_tokens": c.InputTokens},
	}
}

func (c *Call) responseOutputItem(m Meta, status string, text string) map[string]any {
	content := []any{}
	if status == "completed" {
		content = append(content, map[string]any{
			"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{},
		})
	}
	return map[string]any{
		"id": "msg_" + m.ID, "type": "message", "status": status, "role": "assistant", "content": content,
	}
}

func (c *Call) responseObject(m Meta, status string) map[string]any {
	a := c.Answers[0]
	output := []any{}
	var usage any
	var incomplete any
	if status != "in_progress" {
		output = append(output, c.responseOutputItem(m, "completed", a.Text()))
		out := c.OutputTokens()
		usage = map[string]any{
			"input_tokens":          c.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": 0},
			"output_tokens":         out,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          c.InputTokens + out,
		}
		if a.Truncated {
			status = "incomplete"
			incomplete = map[string]any{"reason": "max_output_tokens"}
		}
	}
	var maxOut any
	if c.MaxTokens > 0 {
		maxOut = c.MaxTokens
	}
	return map[string]any{
		"id":                   "resp_" + m.ID,
		"object":               "response",
		"created_at":           m.Now.Unix(),
		"status":               status,
		"error":                nil,
		"incomplete_details":   incomplete,
		"instructions":         nil,
		"max_output_tokens":    maxOut,
		"model":                c.Model,
		"output":               output,
		"parallel_tool_calls":  true,
		"previous_response_id": nil,
		"reasoning":            map[string]any{"effort": nil, "summary": nil},
		"store":                false,
		"temperature":          1.0,
		"text":                 map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice":          "auto",
		"tools":                []any{},
		"top_p":                1.0,
		"truncation":           "disabled",
		"usage":                usage,
		"metadata":             map[string]any{},
	}
}

func stopReason(a Answer) string {
	if a.Truncated {
		return "max_tokens"
	}
	return "end_turn"
}

func anthropicUsage(in, out int64) map[string]any {
	return map[string]any{
		"input_tokens":                in,
		"output_tokens":               out,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     0,
		"cache_creation":              map[string]any{"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
		"output_tokens_details":       map[string]any{"thinking_tokens": 0},
		"service_tier":                "standard",
	}
}

func (c *Call) messageBody(m Meta) map[string]any {
	a := c.Answers[0]
	return map[string]any{
		"id":            "msg_" + m.ID,
		"type":          "message",
		"role":          "assistant",
		"model":         c.Model,
		"content":       []any{map[string]any{"type": "text", "text": a.Text()}},
		"stop_reason":   stopReason(a),
		"stop_sequence": nil,
		"usage":         anthropicUsage(c.InputTokens, c.OutputTokens()),
	}
}

func (c *Call) modelsBody(m Meta) any {
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := func(id string) map[string]any {
		if c.API == Anthropic {
			return map[string]any{"type": "model", "id": id, "display_name": id, "created_at": created.Format(time.RFC3339)}
		}
		return map[string]any{"id": id, "object": "model", "created": created.Unix(), "owned_by": "steward"}
	}
	if c.ModelID != "" {
		return entry(c.ModelID)
	}
	var data []any
	for _, id := range ModelList {
		data = append(data, entry(id))
	}
	if c.API == Anthropic {
		return map[string]any{"data": data, "has_more": false, "first_id": ModelList[0], "last_id": ModelList[len(ModelList)-1]}
	}
	return map[string]any{"object": "list", "data": data}
}

// ---- streaming -----------------------------------------------------------

type sse struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
}

func newSSE(w http.ResponseWriter) *sse {
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
}

// event writes one SSE event; name may be empty (data-only, as OpenAI chat).
func (s *sse) event(name string, data any) error {
	s.start()
	var b []byte
	if raw, ok := data.(string); ok {
		b = []byte(raw)
	} else {
		var err error
		if b, err = json.Marshal(data); err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
	}
	var msg []byte
	if name != "" {
		msg = append(msg, "event: "+name+"\n"...)
	}
	msg = append(msg, "data: "...)
	msg = append(msg, b...)
	msg = append(msg, "\n\n"...)
	if _, err := s.w.Write(msg); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if s.f != nil {
		s.f.Flush()
	}
	return nil
}

func (c *Call) streamChat(ctx context.Context, s *sse, m Meta, pace Pacer) error {
	a := c.Answers[0]
	chunk := func(delta map[string]any, fin any) map[string]any {
		ch := map[string]any{
			"id": "chatcmpl-" + m.ID, "object": "chat.completion.chunk", "created": m.Now.Unix(),
			"model": c.Model, "service_tier": "default", "system_fingerprint": "fp_mock",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": fin}},
		}
		if c.IncludeUsage {
			ch["usage"] = nil
		}
		return ch
	}
	// The first chunk (role) goes out with the first token, as a provider's
	// time to first token covers both.
	for i, tok := range a.Tokens {
		if err := pace(ctx, 1); err != nil {
			return err
		}
		if i == 0 {
			if err := s.event("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)); err != nil {
				return err
			}
		}
		if err := s.event("", chunk(map[string]any{"content": tok}, nil)); err != nil {
			return err
		}
	}
	if len(a.Tokens) == 0 {
		if err := s.event("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)); err != nil {
			return err
		}
	}
	if err := s.event("", chunk(map[string]any{}, finish(a))); err != nil {
		return err
	}
	if c.IncludeUsage {
		u := map[string]any{
			"id": "chatcmpl-" + m.ID, "object": "chat.completion.chunk", "created": m.Now.Unix(),
			"model": c.Model, "service_tier": "default", "system_fingerprint": "fp_mock",
			"choices": []any{}, "usage": openaiUsage(c.InputTokens, c.OutputTokens()),
		}
		if err := s.event("", u); err != nil {
			return err
		}
	}
	return s.event("", "[DONE]")
}

func (c *Call) streamCompletions(ctx context.Context, s *sse, m Meta, pace Pacer) error {
	chunk := func(i int, text string, fin any) map[string]any {
		ch := map[string]any{
			"id": "cmpl-" + m.ID, "object": "text_completion", "created": m.Now.Unix(), "model": c.Model,
			"system_fingerprint": "fp_mock",
			"choices":            []any{map[string]any{"text": text, "index": i, "logprobs": nil, "finish_reason": fin}},
		}
		if c.IncludeUsage {
			ch["usage"] = nil
		}
		return ch
	}
	for i, a := range c.Answers {
		for _, tok := range a.Tokens {
			if err := pace(ctx, 1); err != nil {
				return err
			}
			if err := s.event("", chunk(i, tok, nil)); err != nil {
				return err
			}
		}
		if err := s.event("", chunk(i, "", finish(a))); err != nil {
			return err
		}
	}
	if c.IncludeUsage {
		out := c.OutputTokens()
		u := map[string]any{
			"id": "cmpl-" + m.ID, "object": "text_completion", "created": m.Now.Unix(), "model": c.Model,
			"system_fingerprint": "fp_mock", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": c.InputTokens, "completion_tokens": out, "total_tokens": c.InputTokens + out},
		}
		if err := s.event("", u); err != nil {
			return err
		}
	}
	return s.event("", "[DONE]")
}

func (c *Call) streamResponses(ctx context.Context, s *sse, m Meta, pace Pacer) error {
	a := c.Answers[0]
	seq := 0
	ev := func(typ string, fields map[string]any) error {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		return s.event(typ, fields)
	}
	itemID := "msg_" + m.ID
	loc := func(f map[string]any) map[string]any {
		f["item_id"] = itemID
		f["output_index"] = 0
		f["content_index"] = 0
		return f
	}
	if err := pace(ctx, 0); err != nil {
		return err
	}
	if err := ev("response.created", map[string]any{"response": c.responseObject(m, "in_progress")}); err != nil {
		return err
	}
	if err := ev("response.in_progress", map[string]any{"response": c.responseObject(m, "in_progress")}); err != nil {
		return err
	}
	if err := ev("response.output_item.added", map[string]any{"output_index": 0, "item": c.responseOutputItem(m, "in_progress", "")}); err != nil {
		return err
	}
	if err := ev("response.content_part.added", loc(map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})); err != nil {
		return err
	}
	for _, tok := range a.Tokens {
		if err := pace(ctx, 1); err != nil {
			return err
		}
		if err := ev("response.output_text.delta", loc(map[string]any{"delta": tok, "logprobs": []any{}})); err != nil {
			return err
		}
	}
	text := a.Text()
	if err := ev("response.output_text.done", loc(map[string]any{"text": text, "logprobs": []any{}})); err != nil {
		return err
	}
	if err := ev("response.content_part.done", loc(map[string]any{"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}})); err != nil {
		return err
	}
	if err := ev("response.output_item.done", map[string]any{"output_index": 0, "item": c.responseOutputItem(m, "completed", text)}); err != nil {
		return err
	}
	final := c.responseObject(m, "completed")
	name := "response.completed"
	if final["status"] == "incomplete" {
		name = "response.incomplete"
	}
	return ev(name, map[string]any{"response": final})
}

func (c *Call) streamMessages(ctx context.Context, s *sse, m Meta, pace Pacer) error {
	a := c.Answers[0]
	if err := pace(ctx, 0); err != nil {
		return err
	}
	start := map[string]any{
		"id": "msg_" + m.ID, "type": "message", "role": "assistant", "model": c.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": anthropicUsage(c.InputTokens, 1),
	}
	if err := s.event("message_start", map[string]any{"type": "message_start", "message": start}); err != nil {
		return err
	}
	if err := s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
		return err
	}
	if err := s.event("ping", map[string]any{"type": "ping"}); err != nil {
		return err
	}
	for _, tok := range a.Tokens {
		if err := pace(ctx, 1); err != nil {
			return err
		}
		if err := s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": tok}}); err != nil {
			return err
		}
	}
	if err := s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}); err != nil {
		return err
	}
	delta := map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(a), "stop_sequence": nil},
		"usage": map[string]any{
			"input_tokens": c.InputTokens, "output_tokens": c.OutputTokens(),
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
			"output_tokens_details": map[string]any{"thinking_tokens": 0},
		},
	}
	if err := s.event("message_delta", delta); err != nil {
		return err
	}
	return s.event("message_stop", map[string]any{"type": "message_stop"})
}
