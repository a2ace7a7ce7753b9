package report

// The gateway's transcripts as Inspect model events: each call's request
// and response (OpenAI chat completions, the Responses API, legacy
// completions, Anthropic messages) translated into Inspect's message model
// (ChatMessageSystem, ChatMessageUser, ChatMessageAssistant with tool
// calls, ChatMessageTool), its tools into ToolInfo, its usage and stop
// reason into ModelOutput; the raw bodies stay in the event's call.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/transcript"
)

// modelCall is one translated call.
type modelCall struct {
	key     string // "provider/model"
	start   time.Time
	latency time.Duration
	in, out int64
	cost    float64
	input   []obj
	output  obj // ModelOutput
	event   obj // the ModelEvent (timestamps added by the caller)
}

// choiceMessages is the call's answer as messages.
func (c modelCall) choiceMessages() []obj {
	var out []obj
	if ch, ok := c.output["choices"].([]obj); ok {
		for _, x := range ch {
			if m, ok := x["message"].(obj); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// provider names the API a route belongs to.
func provider(route string) string {
	if strings.Contains(route, "/messages") {
		return "anthropic"
	}
	return "openai"
}

func modelKey(route, model string) string {
	if model == "" {
		model = "unknown"
	}
	return provider(route) + "/" + model
}

func translateCalls(calls []transcript.Call) []modelCall {
	out := make([]modelCall, 0, len(calls))
	for _, c := range calls {
		out = append(out, translateCall(c))
	}
	return out
}

func asObj(raw json.RawMessage) obj {
	var m obj
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func translateCall(c transcript.Call) modelCall {
	mc := modelCall{key: modelKey(c.Route, c.Model), start: c.Time, latency: c.Latency,
		in: c.InputTokens, out: c.OutputTokens, cost: c.CostUSD}
	req, resp := asObj(c.Request), asObj(c.Response)
	var tools []obj
	var toolChoice any = "none"
	config := obj{}
	route := c.Route
	switch {
	case strings.Contains(route, "/messages"):
		mc.input = anthropicInput(req)
		tools, toolChoice = anthropicTools(req)
	case strings.Contains(route, "/responses"):
		mc.input = responsesInput(req)
		tools, toolChoice = openaiTools(req, true)
	case strings.Contains(route, "/chat/completions"):
		mc.input = chatInput(req)
		tools, toolChoice = openaiTools(req, false)
	default: // legacy completions, embeddings
		if p, ok := req["prompt"]; ok {
			mc.input = []obj{{"role": "user", "content": textOf(p)}}
		}
	}
	if mc.input == nil {
		mc.input = []obj{}
	}
	if tools == nil {
		tools = []obj{}
	}
	for _, k := range []string{"temperature", "top_p", "seed", "max_tokens"} {
		if v, ok := req[k]; ok && v != nil {
			config[k] = v
		}
	}
	for _, k := range []string{"max_completion_tokens", "max_output_tokens"} {
		if v, ok := req[k]; ok && v != nil {
			config["max_tokens"] = v
		}
	}
	if v, ok := req["stop"]; ok && v != nil {
		config["stop_seqs"] = stringsOf(v)
	}
	if v, ok := req["stop_sequences"]; ok && v != nil {
		config["stop_seqs"] = stringsOf(v)
	}

	model := c.Model
	if m, ok := resp["model"].(string); ok && m != "" {
		model = m
	}
	var msg obj
	stop := "unknown"
	switch {
	case resp == nil:
	case strings.Contains(route, "/messages"):
		msg, stop = anthropicOutput(resp)
	case strings.Contains(route, "/responses"):
		msg, stop = responsesOutput(resp)
	default:
		msg, stop = chatOutput(resp)
	}
	usage := usageObj(c.InputTokens, c.OutputTokens, c.CostUSD)
	output := obj{"model": model, "choices": []obj{}, "usage": usage, "time": c.Latency.Seconds()}
	if msg != nil {
		msg["source"] = "generate"
		if model != "" {
			msg["model"] = model
		}
		output["choices"] = []obj{{"message": msg, "stop_reason": stop}}
		output["completion"] = textOf(msg["content"])
	}
	ev := obj{"event": "model", "model": mc.key, "input": mc.input, "tools": tools, "tool_choice": toolChoice,
		"config": config, "output": output, "working_time": c.Latency.Seconds()}
	if len(c.Tries) > 1 {
		ev["retries"] = len(c.Tries) - 1
	}
	if c.Status >= 400 || c.Status == 0 {
		e := fmt.Sprintf("HTTP %d", c.Status)
		if c.ResponseText != "" {
			e += ": " + c.ResponseText
		} else if m, ok := resp["error"].(map[string]any); ok {
			if s, ok := m["message"].(string); ok {
				e += ": " + s
			}
		}
		ev["error"] = e
		output["error"] = e
	}
	if c.Truncated {
		ev["metadata"] = obj{"truncated": true}
	}
	call := obj{"request": req, "time": c.Latency.Seconds()}
	if req == nil {
		call["request"] = obj{}
	}
	switch {
	case resp != nil:
		call["response"] = resp
	case c.ResponseText != "":
		call["response"] = obj{"text": c.ResponseText}
	}
	ev["call"] = call
	mc.output, mc.event = output, ev
	return mc
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, s := range x {
			out = append(out, fmt.Sprint(s))
		}
		return out
	}
	return nil
}

// textOf is the text of a content value (a string or a list of parts).
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []obj:
		var parts []string
		for _, p := range x {
			if s, ok := p["text"].(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "\n")
	case []any:
		var parts []string
		for _, p := range x {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					parts = append(parts, s)
				}
			} else if s, ok := p.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// contentOf is a message's content in Inspect's terms: a string, or a list
// of ContentText / ContentReasoning / ContentImage.
func contentOf(v any) any {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		var out []obj
		for _, p := range x {
			m, ok := p.(map[string]any)
			if !ok {
				if s, ok := p.(string); ok {
					out = append(out, obj{"type": "text", "text": s})
				}
				continue
			}
			switch t, _ := m["type"].(string); t {
			case "text", "input_text", "output_text":
				s, _ := m["text"].(string)
				out = append(out, obj{"type": "text", "text": s})
			case "refusal":
				s, _ := m["refusal"].(string)
				out = append(out, obj{"type": "text", "text": s, "refusal": true})
			case "thinking":
				s, _ := m["thinking"].(string)
				c := obj{"type": "reasoning", "reasoning": s, "redacted": false}
				if sig, ok := m["signature"].(string); ok {
					c["signature"] = sig
				}
				out = append(out, c)
			case "redacted_thinking":
				s, _ := m["data"].(string)
				out = append(out, obj{"type": "reasoning", "reasoning": s, "redacted": true})
			case "image_url":
				url := ""
				if u, ok := m["image_url"].(map[string]any); ok {
					url, _ = u["url"].(string)
				} else if u, ok := m["image_url"].(string); ok {
					url = u
				}
				out = append(out, obj{"type": "image", "image": url})
			case "input_image":
				url, _ := m["image_url"].(string)
				out = append(out, obj{"type": "image", "image": url})
			case "image":
				url := ""
				if src, ok := m["source"].(map[string]any); ok {
					if d, ok := src["data"].(string); ok {
						mt, _ := src["media_type"].(string)
						url = "data:" + mt + ";base64," + d
					} else {
						url, _ = src["url"].(string)
					}
				}
				out = append(out, obj{"type": "image", "image": url})
			default:
				b, _ := json.Marshal(m)
				out = append(out, obj{"type": "text", "text": string(b)})
			}
		}
		if out == nil {
			return ""
		}
		return out
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// toolCall is an Inspect ToolCall from a function name and its arguments
// (a JSON string or an object).
func toolCall(id, name string, args any) obj {
	tc := obj{"id": id, "function": name, "type": "function", "arguments": obj{}}
	switch a := args.(type) {
	case map[string]any:
		tc["arguments"] = a
	case string:
		if strings.TrimSpace(a) == "" {
			break
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			tc["parse_error"] = err.Error()
			tc["arguments"] = obj{"raw": a}
		} else {
			tc["arguments"] = m
		}
	}
	return tc
}

// ---- OpenAI chat completions ----

func chatInput(req obj) []obj {
	msgs, _ := req["messages"].([]any)
	var out []obj
	names := map[string]string{} // tool call id -> function
	for _, x := range msgs {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		role, _ := m["role"].(string)
		switch role {
		case "system", "developer":
			out = append(out, obj{"role": "system", "content": contentOf(m["content"])})
		case "assistant":
			am := obj{"role": "assistant", "content": contentOf(m["content"])}
			if tcs, ok := m["tool_calls"].([]any); ok && len(tcs) > 0 {
				var calls []obj
				for _, t := range tcs {
					tm, _ := t.(map[string]any)
					fn, _ := tm["function"].(map[string]any)
					id, _ := tm["id"].(string)
					name, _ := fn["name"].(string)
					names[id] = name
					calls = append(calls, toolCall(id, name, fn["arguments"]))
				}
				am["tool_calls"] = calls
			}
			out = append(out, am)
		case "tool", "function":
			id, _ := m["tool_call_id"].(string)
			tm := obj{"role": "tool", "content": contentOf(m["content"]), "tool_call_id": id}
			if fn := names[id]; fn != "" {
				tm["function"] = fn
			} else if n, ok := m["name"].(string); ok {
				tm["function"] = n
			}
			out = append(out, tm)
		default:
			out = append(out, obj{"role": "user", "content": contentOf(m["content"])})
		}
	}
	return out
}

func openaiTools(req obj, responses bool) ([]obj, any) {
	list, _ := req["tools"].([]any)
	var tools []obj
	for _, x := range list {
		m, _ := x.(map[string]any)
		fn := m
		if !responses {
			fn, _ = m["function"].(map[string]any)
		}
		if fn == nil {
			continue
		}
		tools = append(tools, toolInfo(fn["name"], fn["description"], fn["parameters"]))
	}
	var choice any = "none"
	if len(tools) > 0 {
		choice = "auto"
	}
	switch c := req["tool_choice"].(type) {
	case string:
		switch c {
		case "required":
			choice = "any"
		case "auto", "none":
			choice = c
		}
	case map[string]any:
		if fn, ok := c["function"].(map[string]any); ok {
			choice = obj{"name": fn["name"]}
		} else if n, ok := c["name"]; ok {
			choice = obj{"name": n}
		}
	}
	return tools, choice
}

// toolInfo is an Inspect ToolInfo from a JSON schema.
func toolInfo(name, description, schema any) obj {
	n, _ := name.(string)
	d, _ := description.(string)
	params := obj{"type": "object", "properties": obj{}, "required": []any{}, "additionalProperties": false}
	if s, ok := schema.(map[string]any); ok {
		if p, ok := s["properties"].(map[string]any); ok {
			params["properties"] = p
		}
		if r, ok := s["required"].([]any); ok {
			params["required"] = r
		}
		if ap, ok := s["additionalProperties"].(bool); ok {
			params["additionalProperties"] = ap
		}
	}
	return obj{"name": n, "description": d, "parameters": params}
}

func stopReason(s string) string {
	switch s {
	case "stop", "end_turn", "stop_sequence", "completed":
		return "stop"
	case "length", "max_tokens", "max_output_tokens", "incomplete":
		return "max_tokens"
	case "tool_calls", "function_call", "tool_use":
		return "tool_calls"
	case "content_filter", "refusal":
		return "content_filter"
	case "model_context_window_exceeded":
		return "model_length"
	}
	return "unknown"
}

func chatOutput(resp obj) (obj, string) {
	choices, _ := resp["choices"].([]any)
	if len(choices) == 0 {
		return nil, "unknown"
	}
	ch, _ := choices[0].(map[string]any)
	stop, _ := ch["finish_reason"].(string)
	if t, ok := ch["text"].(string); ok { // text_completion
		return obj{"role": "assistant", "content": t}, stopReason(stop)
	}
	m, _ := ch["message"].(map[string]any)
	am := obj{"role": "assistant", "content": contentOf(m["content"])}
	if r, ok := m["refusal"].(string); ok && r != "" { // a refusal is text Inspect marks as one
		parts := []obj{}
		if t := textOf(m["content"]); t != "" {
			parts = append(parts, obj{"type": "text", "text": t})
		}
		am["content"] = append(parts, obj{"type": "text", "text": r, "refusal": true})
	}
	if rc, ok := m["reasoning_content"].(string); ok && rc != "" {
		parts := []obj{{"type": "reasoning", "reasoning": rc, "redacted": false}}
		if t := textOf(m["content"]); t != "" {
			parts = append(parts, obj{"type": "text", "text": t})
		}
		am["content"] = parts
	}
	if tcs, ok := m["tool_calls"].([]any); ok && len(tcs) > 0 {
		var calls []obj
		for _, t := range tcs {
			tm, _ := t.(map[string]any)
			fn, _ := tm["function"].(map[string]any)
			id, _ := tm["id"].(string)
			name, _ := fn["name"].(string)
			calls = append(calls, toolCall(id, name, fn["arguments"]))
		}
		am["tool_calls"] = calls
	}
	return am, stopReason(stop)
}

// ---- OpenAI Responses ----

func responsesInput(req obj) []obj {
	var out []obj
	if s, ok := req["instructions"].(string); ok && s != "" {
		out = append(out, obj{"role": "system", "content": s})
	}
	names := map[string]string{}
	switch in := req["input"].(type) {
	case string:
		out = append(out, obj{"role": "user", "content": in})
	case []any:
		for _, x := range in {
			m, ok := x.(map[string]any)
			if !ok {
				continue
			}
			typ, _ := m["type"].(string)
			switch typ {
			case "function_call":
				id, _ := m["call_id"].(string)
				name, _ := m["name"].(string)
				names[id] = name
				call := toolCall(id, name, m["arguments"])
				// Consecutive calls belong to one assistant turn.
				if n := len(out); n > 0 && out[n-1]["role"] == "assistant" {
					prev, _ := out[n-1]["tool_calls"].([]obj)
					out[n-1]["tool_calls"] = append(prev, call)
				} else {
					out = append(out, obj{"role": "assistant", "content": "", "tool_calls": []obj{call}})
				}
			case "function_call_output":
				id, _ := m["call_id"].(string)
				tm := obj{"role": "tool", "content": contentOf(m["output"]), "tool_call_id": id}
				if fn := names[id]; fn != "" {
					tm["function"] = fn
				}
				out = append(out, tm)
			case "reasoning":
				out = append(out, obj{"role": "assistant", "content": []obj{{"type": "reasoning", "reasoning": summaryText(m), "redacted": false}}})
			default: // "message" or a bare {role, content}
				role, _ := m["role"].(string)
				switch role {
				case "system", "developer":
					out = append(out, obj{"role": "system", "content": contentOf(m["content"])})
				case "assistant":
					out = append(out, obj{"role": "assistant", "content": contentOf(m["content"])})
				default:
					out = append(out, obj{"role": "user", "content": contentOf(m["content"])})
				}
			}
		}
	}
	return out
}

func summaryText(m map[string]any) string {
	var parts []string
	if s, ok := m["summary"].([]any); ok {
		for _, x := range s {
			if p, ok := x.(map[string]any); ok {
				if t, ok := p["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
	}
	return strings.Join(parts, "\n")
}

func responsesOutput(resp obj) (obj, string) {
	items, _ := resp["output"].([]any)
	am := obj{"role": "assistant"}
	var content []obj
	var calls []obj
	for _, x := range items {
		m, _ := x.(map[string]any)
		switch t, _ := m["type"].(string); t {
		case "message":
			c := contentOf(m["content"])
			if parts, ok := c.([]obj); ok {
				content = append(content, parts...)
			} else if s, ok := c.(string); ok && s != "" {
				content = append(content, obj{"type": "text", "text": s})
			}
		case "function_call":
			id, _ := m["call_id"].(string)
			name, _ := m["name"].(string)
			calls = append(calls, toolCall(id, name, m["arguments"]))
		case "reasoning":
			content = append(content, obj{"type": "reasoning", "reasoning": summaryText(m), "redacted": false})
		}
	}
	am["content"] = flatten(content)
	stop := "stop"
	if len(calls) > 0 {
		am["tool_calls"] = calls
		stop = "tool_calls"
	}
	if s, _ := resp["status"].(string); s == "incomplete" {
		stop = "max_tokens"
	}
	return am, stop
}

// flatten makes a single text part a plain string, as Inspect writes it.
func flatten(parts []obj) any {
	if len(parts) == 0 {
		return ""
	}
	if len(parts) == 1 && parts[0]["type"] == "text" && parts[0]["refusal"] == nil {
		return parts[0]["text"]
	}
	return parts
}

// ---- Anthropic messages ----

func anthropicInput(req obj) []obj {
	var out []obj
	if sys := req["system"]; sys != nil {
		if s := textOf(sys); s != "" {
			out = append(out, obj{"role": "system", "content": s})
		}
	}
	names := map[string]string{}
	msgs, _ := req["messages"].([]any)
	for _, x := range msgs {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		role, _ := m["role"].(string)
		blocks, isList := m["content"].([]any)
		if !isList {
			r := "user"
			if role == "assistant" {
				r = "assistant"
			}
			out = append(out, obj{"role": r, "content": contentOf(m["content"])})
			continue
		}
		if role == "assistant" {
			am, ids := anthropicAssistant(blocks)
			for id, n := range ids {
				names[id] = n
			}
			out = append(out, am)
			continue
		}
		// A user turn: its tool_result blocks become tool messages, the
		// rest one user message.
		var rest []any
		for _, b := range blocks {
			bm, _ := b.(map[string]any)
			if t, _ := bm["type"].(string); t == "tool_result" {
				id, _ := bm["tool_use_id"].(string)
				tm := obj{"role": "tool", "content": contentOf(bm["content"]), "tool_call_id": id}
				if fn := names[id]; fn != "" {
					tm["function"] = fn
				}
				if e, _ := bm["is_error"].(bool); e {
					tm["error"] = obj{"type": "unknown", "message": textOf(bm["content"])}
				}
				out = append(out, tm)
				continue
			}
			rest = append(rest, b)
		}
		if len(rest) > 0 {
			out = append(out, obj{"role": "user", "content": flattenAny(contentOf(rest))})
		}
	}
	return out
}

func flattenAny(c any) any {
	if parts, ok := c.([]obj); ok {
		return flatten(parts)
	}
	return c
}

func anthropicAssistant(blocks []any) (obj, map[string]string) {
	names := map[string]string{}
	var content []any
	var calls []obj
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		if t, _ := bm["type"].(string); t == "tool_use" || t == "server_tool_use" {
			id, _ := bm["id"].(string)
			name, _ := bm["name"].(string)
			names[id] = name
			calls = append(calls, toolCall(id, name, bm["input"]))
			continue
		}
		content = append(content, b)
	}
	am := obj{"role": "assistant", "content": flattenAny(contentOf(content))}
	if len(content) == 0 {
		am["content"] = ""
	}
	if len(calls) > 0 {
		am["tool_calls"] = calls
	}
	return am, names
}

func anthropicTools(req obj) ([]obj, any) {
	list, _ := req["tools"].([]any)
	var tools []obj
	for _, x := range list {
		m, _ := x.(map[string]any)
		if m == nil {
			continue
		}
		tools = append(tools, toolInfo(m["name"], m["description"], m["input_schema"]))
	}
	var choice any = "none"
	if len(tools) > 0 {
		choice = "auto"
	}
	if c, ok := req["tool_choice"].(map[string]any); ok {
		switch t, _ := c["type"].(string); t {
		case "auto", "none", "any":
			choice = t
		case "tool":
			choice = obj{"name": c["name"]}
		}
	}
	return tools, choice
}

func anthropicOutput(resp obj) (obj, string) {
	blocks, _ := resp["content"].([]any)
	am, _ := anthropicAssistant(blocks)
	stop, _ := resp["stop_reason"].(string)
	return am, stopReason(stop)
}
