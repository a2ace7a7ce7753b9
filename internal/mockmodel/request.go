package mockmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// API names a provider wire format.
type API int

// The wire formats the mock speaks.
const (
	OpenAI API = iota + 1
	Anthropic
)

func (a API) String() string {
	if a == Anthropic {
		return "anthropic"
	}
	return "openai"
}

// Endpoint names one route of the mock.
type Endpoint string

// The routes the mock serves.
const (
	ChatCompletions Endpoint = "chat.completions" // POST /v1/chat/completions
	Responses       Endpoint = "responses"        // POST /v1/responses
	Completions     Endpoint = "completions"      // POST /v1/completions
	Embeddings      Endpoint = "embeddings"       // POST /v1/embeddings
	Models          Endpoint = "models"           // GET /v1/models, GET /v1/models/{id}
	Messages        Endpoint = "messages"         // POST /v1/messages
	CountTokensEP   Endpoint = "messages.count_tokens"
)

// Generates reports whether the endpoint produces or embeds text and so
// spends tokens (the endpoints a provider rate-limits).
func (e Endpoint) Generates() bool {
	switch e {
	case ChatCompletions, Responses, Completions, Embeddings, Messages:
		return true
	}
	return false
}

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 32 << 20

// Call is one parsed, validated request, with the mock's answer already
// decided (the answer is a pure function of the request).
type Call struct {
	API          API
	Endpoint     Endpoint
	Model        string
	ModelID      string // for GET /v1/models/{id}
	Stream       bool
	IncludeUsage bool // OpenAI stream_options.include_usage
	// Prompts holds the text each answer is derived from: the last user
	// message (chat, responses, messages), each prompt (completions) or
	// each input (embeddings).
	Prompts     []string
	InputTokens int64
	MaxTokens   int64 // 0 when the request set no limit
	Dimensions  int   // embeddings
	Base64      bool  // embeddings encoding_format "base64"
	// Answers holds one answer per prompt for the generating endpoints
	// (none for embeddings): its tokens, truncated at MaxTokens.
	Answers []Answer
}

// Answer is one generated reply.
type Answer struct {
	Tokens    []string
	Truncated bool // cut at MaxTokens
}

// Text is the answer's text.
func (a Answer) Text() string { return strings.Join(a.Tokens, "") }

// OutputTokens is the number of tokens the call will produce.
func (c *Call) OutputTokens() int64 {
	var n int64
	for _, a := range c.Answers {
		n += int64(len(a.Tokens))
	}
	return n
}

// DetectAPI tells which wire format a request speaks, from its path and headers.
func DetectAPI(r *http.Request) API {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/"):
		return Anthropic
	case p == "/v1/chat/completions" || p == "/v1/responses" || p == "/v1/completions" || p == "/v1/embeddings":
		return OpenAI
	}
	// Shared or unknown routes: tell by the headers the SDKs send.
	if r.Header.Get("anthropic-version") != "" || (r.Header.Get("x-api-key") != "" && r.Header.Get("Authorization") == "") {
		return Anthropic
	}
	return OpenAI
}

// Route maps a request to its endpoint, or returns the provider's 404/405 error.
func Route(r *http.Request) (Endpoint, *Error) {
	api := DetectAPI(r)
	p := strings.TrimSuffix(r.URL.Path, "/")
	var ep Endpoint
	method := http.MethodPost
	switch {
	case p == "/v1/chat/completions":
		ep = ChatCompletions
	case p == "/v1/responses":
		ep = Responses
	case p == "/v1/completions":
		ep = Completions
	case p == "/v1/embeddings":
		ep = Embeddings
	case p == "/v1/messages":
		ep = Messages
	case p == "/v1/messages/count_tokens":
		ep = CountTokensEP
	case p == "/v1/models" || strings.HasPrefix(p, "/v1/models/"):
		ep, method = Models, http.MethodGet
	default:
		return "", NotFound(api, r.Method, r.URL.Path)
	}
	if r.Method != method {
		e := NotFound(api, r.Method, r.URL.Path)
		e.Status = http.StatusMethodNotAllowed
		return "", e
	}
	return ep, nil
}

// Parse routes, reads and validates a request as the real provider would,
// and decides the mock's answer. The error, if any, is the one the
// provider would send.
func Parse(r *http.Request) (*Call, *Error) {
	ep, e := Route(r)
	if e != nil {
		return nil, e
	}
	c := &Call{API: DetectAPI(r), Endpoint: ep}
	if ep == Models {
		c.ModelID = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/v1/models"), "/")
		return c, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, invalid(c.API, "", "", "could not read the request body")
	}
	if len(body) > MaxBodyBytes {
		e := invalid(c.API, "", "", "request body too large")
		e.Status = http.StatusRequestEntityTooLarge
		return nil, e
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		if c.API == Anthropic {
			return nil, invalid(c.API, "", "", "There was an error parsing the body of your request: expected a JSON object")
		}
		return nil, invalid(c.API, "", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	switch ep {
	case ChatCompletions:
		e = c.parseChat(obj)
	case Responses:
		e = c.parseResponses(obj)
	case Completions:
		e = c.parseCompletions(obj)
	case Embeddings:
		e = c.parseEmbeddings(obj)
	case Messages, CountTokensEP:
		e = c.parseMessages(obj)
	}
	if e != nil {
		return nil, e
	}
	if ep != Embeddings && ep != CountTokensEP {
		for _, p := range c.Prompts {
			toks := Tokens(Reply(p))
			a := Answer{Tokens: toks}
			if c.MaxTokens > 0 && int64(len(toks)) > c.MaxTokens {
				a.Tokens, a.Truncated = toks[:c.MaxTokens], true
			}
			c.Answers = append(c.Answers, a)
		}
	}
	return c, nil
}

// ---- field helpers -------------------------------------------------------

func str(obj map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func boolean(obj map[string]json.RawMessage, key string) (v, present, ok bool) {
	raw, present := obj[key]
	if !present || isNull(raw) {
		return false, false, true
	}
	err := json.Unmarshal(raw, &v)
	return v, true, err == nil
}

func integer(obj map[string]json.RawMessage, key string) (v int64, present, ok bool) {
	raw, present := obj[key]
	if !present || isNull(raw) {
		return 0, false, true
	}
	err := json.Unmarshal(raw, &v)
	return v, true, err == nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// contentText extracts the text of a message content: a string, or an array
// of parts whose text fields are joined. Anything else counts as its JSON.
func contentText(raw json.RawMessage) (text string, other string) {
	if isNull(raw) {
		return "", ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, ""
	}
	var parts []map[string]json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return "", string(raw)
	}
	var texts []string
	var others []string
	for _, p := range parts {
		if t, ok := str(p, "text"); ok {
			texts = append(texts, t)
			continue
		}
		if inner, ok := p["content"]; ok { // anthropic tool_result
			t, o := contentText(inner)
			if t != "" {
				texts = append(texts, t)
			}
			if o != "" {
				others = append(others, o)
			}
			continue
		}
		b, _ := json.Marshal(p)
		others = append(others, string(b))
	}
	return strings.Join(texts, "\n"), strings.Join(others, "\n")
}

func (c *Call) modelRequired(obj map[string]json.RawMessage) *Error {
	m, ok := str(obj, "model")
	if !ok || m == "" {
		if c.API == Anthropic {
			return invalid(c.API, "model", "", "model: Field required")
		}
		return invalid(c.API, "", "", "you must provide a model parameter")
	}
	c.Model = m
	return nil
}

func (c *Call) streamFlags(obj map[string]json.RawMessage) *Error {
	s, _, ok := boolean(obj, "stream")
	if !ok {
		return c.badType("stream", "a boolean")
	}
	c.Stream = s
	if raw, present := obj["stream_options"]; present && !isNull(raw) && c.API == OpenAI {
		if !c.Stream {
			return invalid(c.API, "stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		var so map[string]json.RawMessage
		if json.Unmarshal(raw, &so) != nil {
			return c.badType("stream_options", "an object")
		}
		iu, _, ok := boolean(so, "include_usage")
		if !ok {
			return c.badType("stream_options.include_usage", "a boolean")
		}
		c.IncludeUsage = iu
	}
	return nil
}

func (c *Call) maxTokens(obj map[string]json.RawMessage, keys ...string) *Error {
	for _, k := range keys {
		v, present, ok := integer(obj, k)
		if !ok {
			return c.badType(k, "an integer")
		}
		if present {
			if v < 1 {
				if c.API == Anthropic {
					return invalid(c.API, k, "", k+": Input should be greater than or equal to 1")
				}
				return invalid(c.API, k, "integer_below_min_value", fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", k, v))
			}
			c.MaxTokens = v
			return nil
		}
	}
	return nil
}

func (c *Call) badType(param, want string) *Error {
	if c.API == Anthropic {
		return invalid(c.API, param, "", param+": Input should be "+want)
	}
	return invalid(c.API, param, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected %s.", param, want))
}

func missing(api API, param string) *Error {
	if api == Anthropic {
		return invalid(api, param, "", param+": Field required")
	}
	return invalid(api, param, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s'.", param))
}

// ---- OpenAI chat completions ---------------------------------------------

var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

func (c *Call) parseChat(obj map[string]json.RawMessage) *Error {
	if e := c.modelRequired(obj); e != nil {
		return e
	}
	raw, ok := obj["messages"]
	if !ok || isNull(raw) {
		return missing(c.API, "messages")
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return c.badType("messages", "an array")
	}
	if len(msgs) == 0 {
		return invalid(c.API, "messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if e := c.streamFlags(obj); e != nil {
		return e
	}
	if e := c.maxTokens(obj, "max_completion_tokens", "max_tokens"); e != nil {
		return e
	}
	prompt := ""
	c.InputTokens = 3
	for i, m := range msgs {
		role, ok := str(m, "role")
		if !ok {
			return missing(c.API, fmt.Sprintf("messages[%d].role", i))
		}
		if !chatRoles[role] {
			return invalid(c.API, fmt.Sprintf("messages[%d].role", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role))
		}
		text, other := contentText(m["content"])
		c.InputTokens += 3 + CountTokens(text) + CountTokens(other)
		if tc, ok := m["tool_calls"]; ok && !isNull(tc) {
			c.InputTokens += CountTokens(string(tc))
		}
		if role == "user" {
			prompt = text
		}
	}
	if tools, ok := obj["tools"]; ok && !isNull(tools) {
		c.InputTokens += CountTokens(string(tools))
	}
	c.Prompts = []string{prompt}
	return nil
}

// ---- OpenAI responses ----------------------------------------------------

func (c *Call) parseResponses(obj map[string]json.RawMessage) *Error {
	if e := c.modelRequired(obj); e != nil {
		return e
	}
	if e := c.streamFlags(obj); e != nil {
		return e
	}
	if e := c.maxTokens(obj, "max_output_tokens"); e != nil {
		return e
	}
	instr, _ := str(obj, "instructions")
	c.InputTokens = CountTokens(instr)
	raw, ok := obj["input"]
	prev, hasPrev := str(obj, "previous_response_id")
	if (!ok || isNull(raw)) && (!hasPrev || prev == "") {
		return missing(c.API, "input")
	}
	prompt := ""
	var s string
	if json.Unmarshal(raw, &s) == nil {
		prompt = s
		c.InputTokens += 3 + CountTokens(s)
	} else if !isNull(raw) {
		var items []map[string]json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return c.badType("input", "a string or an array of input items")
		}
		for _, it := range items {
			role, _ := str(it, "role")
			text, other := contentText(it["content"])
			if _, hasContent := it["content"]; !hasContent {
				b, _ := json.Marshal(it)
				other = string(b)
			}
			c.InputTokens += 3 + CountTokens(text) + CountTokens(other)
			if role == "user" {
				prompt = text
			}
		}
	}
	c.Prompts = []string{prompt}
	return nil
}

// ---- OpenAI completions --------------------------------------------------

func (c *Call) parseCompletions(obj map[string]json.RawMessage) *Error {
	if e := c.modelRequired(obj); e != nil {
		return e
	}
	raw, ok := obj["prompt"]
	if !ok || isNull(raw) {
		return missing(c.API, "prompt")
	}
	var one string
	var many []string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		c.Prompts = []string{one}
	case json.Unmarshal(raw, &many) == nil && len(many) > 0:
		c.Prompts = many
	default:
		return c.badType("prompt", "a string or an array of strings")
	}
	if e := c.streamFlags(obj); e != nil {
		return e
	}
	if e := c.maxTokens(obj, "max_tokens"); e != nil {
		return e
	}
	for _, p := range c.Prompts {
		c.InputTokens += CountTokens(p)
	}
	return nil
}

// ---- OpenAI embeddings ---------------------------------------------------

func (c *Call) parseEmbeddings(obj map[string]json.RawMessage) *Error {
	if e := c.modelRequired(obj); e != nil {
		return e
	}
	raw, ok := obj["input"]
	if !ok || isNull(raw) {
		return missing(c.API, "input")
	}
	var one string
	var many []string
	var ints []int64
	var intss [][]int64
	switch {
	case json.Unmarshal(raw, &one) == nil:
		c.Prompts = []string{one}
	case json.Unmarshal(raw, &many) == nil:
		c.Prompts = many
	case json.Unmarshal(raw, &ints) == nil:
		c.Prompts = []string{fmt.Sprint(ints)}
		c.InputTokens = int64(len(ints))
	case json.Unmarshal(raw, &intss) == nil:
		for _, t := range intss {
			c.Prompts = append(c.Prompts, fmt.Sprint(t))
			c.InputTokens += int64(len(t))
		}
	default:
		return c.badType("input", "a string or an array")
	}
	if len(c.Prompts) == 0 {
		return invalid(c.API, "input", "empty_array", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if c.InputTokens == 0 {
		for _, p := range c.Prompts {
			if p == "" {
				return invalid(c.API, "input", "", "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")
			}
			c.InputTokens += CountTokens(p)
		}
	}
	c.Dimensions = 1536
	if strings.Contains(c.Model, "large") {
		c.Dimensions = 3072
	}
	if d, present, ok := integer(obj, "dimensions"); !ok {
		return c.badType("dimensions", "an integer")
	} else if present {
		if d < 1 || d > 8192 {
			return invalid(c.API, "dimensions", "invalid_value", fmt.Sprintf("Invalid 'dimensions': %d is out of range.", d))
		}
		c.Dimensions = int(d)
	}
	if f, ok := str(obj, "encoding_format"); ok {
		switch f {
		case "float":
		case "base64":
			c.Base64 = true
		default:
			return invalid(c.API, "encoding_format", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'float' and 'base64'.", f))
		}
	}
	return nil
}

// ---- Anthropic messages --------------------------------------------------

func (c *Call) parseMessages(obj map[string]json.RawMessage) *Error {
	if e := c.modelRequired(obj); e != nil {
		return e
	}
	raw, ok := obj["messages"]
	if !ok || isNull(raw) {
		return missing(c.API, "messages")
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return c.badType("messages", "a valid list")
	}
	if c.Endpoint == Messages {
		if _, present := obj["max_tokens"]; !present {
			return missing(c.API, "max_tokens")
		}
		if e := c.maxTokens(obj, "max_tokens"); e != nil {
			return e
		}
		if e := c.streamFlags(obj); e != nil {
			return e
		}
	}
	if len(msgs) == 0 {
		return invalid(c.API, "messages", "", "messages: at least one message is required")
	}
	sysText, sysOther := contentText(obj["system"])
	c.InputTokens = CountTokens(sysText) + CountTokens(sysOther)
	prompt := ""
	for i, m := range msgs {
		role, ok := str(m, "role")
		if !ok {
			return missing(c.API, fmt.Sprintf("messages.%d.role", i))
		}
		if role != "user" && role != "assistant" {
			return invalid(c.API, fmt.Sprintf("messages.%d.role", i), "", fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		if _, ok := m["content"]; !ok {
			return missing(c.API, fmt.Sprintf("messages.%d.content", i))
		}
		text, other := contentText(m["content"])
		c.InputTokens += 3 + CountTokens(text) + CountTokens(other)
		if role == "user" {
			prompt = text
		}
	}
	if tools, ok := obj["tools"]; ok && !isNull(tools) {
		c.InputTokens += CountTokens(string(tools))
	}
	if c.Endpoint == CountTokensEP {
		return nil
	}
	c.Prompts = []string{prompt}
	return nil
}
