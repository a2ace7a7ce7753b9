package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/transcript"
)

// Capture configures the transcripts the gateway keeps of every model call
// an attempt makes (the fleet setting `transcripts`).
type Capture struct {
	// Mode is transcript.ModeFull (default), ModeMetadata or ModeOff.
	Mode string
	// AttemptCap and RunCap bound the captured content in bytes, per
	// attempt and over the gateway's life (0: the transcript defaults).
	// Past a cap, calls keep their metadata and lose their content, and
	// the transcript says so.
	AttemptCap, RunCap int64
	// Secrets are values never stored (besides the real key and every
	// gateway token, which are always scrubbed).
	Secrets []string
}

// MaxCallsPerAttempt bounds how many calls one attempt's transcript keeps;
// later ones are only counted.
const MaxCallsPerAttempt = 10000

// callMetaBytes is what one call's metadata counts against the caps.
const callMetaBytes = 256

// tokenPattern matches every gateway token (newToken's shape).
var tokenPattern = regexp.MustCompile(`stw-[0-9a-f]{48}`)

type capturer struct {
	mode               string
	attemptCap, runCap int64
	secrets            []string
	clock              clock.Clock

	mu       sync.Mutex
	runBytes int64
	attempts map[string]*attemptCapture
}

type attemptCapture struct {
	mu        sync.Mutex
	calls     []*callCapture
	bytes     int64
	truncated string
	dropped   int
}

type callCapture struct {
	c      *capturer
	ac     *attemptCapture
	mu     sync.Mutex
	call   transcript.Call
	full   bool // content may be kept
	budget int64
	tries  []*transcript.Try
	ends   []time.Time
	// what the agent received
	status   int
	ctype    string
	resp     bytes.Buffer
	respOver bool
	injected bool
}

func newCapturer(cfg Config) *capturer {
	cp := cfg.Capture
	c := &capturer{mode: cp.Mode, attemptCap: cp.AttemptCap, runCap: cp.RunCap, clock: cfg.Clock,
		attempts: map[string]*attemptCapture{}}
	if c.mode == "" {
		c.mode = transcript.ModeFull
	}
	if c.attemptCap <= 0 {
		c.attemptCap = transcript.DefaultAttemptCap
	}
	if c.runCap <= 0 {
		c.runCap = transcript.DefaultRunCap
	}
	if cfg.APIKey != "" {
		c.secrets = append(c.secrets, cfg.APIKey)
	}
	for _, s := range cp.Secrets {
		if len(strings.TrimSpace(s)) >= 4 {
			c.secrets = append(c.secrets, s)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(c.secrets, func(i, j int) bool { return len(c.secrets[i]) > len(c.secrets[j]) })
	return c
}

// scrub removes the real key, configured secrets and gateway tokens from s.
func (c *capturer) scrub(s string) string {
	for _, sec := range c.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	if strings.Contains(s, "stw-") {
		s = tokenPattern.ReplaceAllString(s, redacted)
	}
	return s
}

// scrubJSON re-encodes a JSON document with every string (and key)
// scrubbed: a secret cannot hide behind JSON escapes. ok is false when raw
// is not JSON.
func (c *capturer) scrubJSON(raw []byte) (json.RawMessage, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if d.More() {
		return nil, false
	}
	v = c.scrubValue(v)
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}

func (c *capturer) scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return c.scrub(x)
	case []any:
		for i := range x {
			x[i] = c.scrubValue(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[c.scrub(k)] = c.scrubValue(e)
		}
		return out
	}
	return v
}

type callKey struct{}

// begin starts capturing one call of attempt a. It returns the writer and
// request to go on with (unchanged when capture is off) and the call (nil
// when off).
func (g *Gateway) captureBegin(w http.ResponseWriter, r *http.Request, a *attempt, body []byte, injected bool) (http.ResponseWriter, *http.Request, *callCapture) {
	c := g.capt
	if c == nil || c.mode == transcript.ModeOff {
		return w, r, nil
	}
	c.mu.Lock()
	ac := c.attempts[a.id]
	if ac == nil {
		ac = &attemptCapture{}
		c.attempts[a.id] = ac
	}
	c.mu.Unlock()
	cc := &callCapture{c: c, ac: ac, injected: injected}
	cc.call = transcript.Call{Time: c.clock.Now(), Method: r.Method, Route: r.URL.Path}
	if len(body) > 0 {
		var head struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(body, &head)
		cc.call.Model, cc.call.Stream = c.scrub(head.Model), head.Stream
	}
	ac.mu.Lock()
	if len(ac.calls) >= MaxCallsPerAttempt {
		ac.dropped++
		ac.mu.Unlock()
		return w, r, nil
	}
	ac.calls = append(ac.calls, cc)
	ac.bytes += callMetaBytes
	ac.mu.Unlock()
	if c.mode == transcript.ModeFull {
		cc.full, cc.budget = c.reserve(ac, int64(len(body)))
		if cc.full && len(body) > 0 {
			req := body
			if injected {
				req = dropInjectedUsage(body)
			}
			if j, ok := c.scrubJSON(req); ok {
				cc.call.Request = j
			}
		}
	}
	cw := &captureWriter{ResponseWriter: w, cc: cc}
	return cw, r.WithContext(context.WithValue(r.Context(), callKey{}, cc)), cc
}

// reserve says whether a call whose request is n bytes may keep content
// and how many bytes its response may take.
func (c *capturer) reserve(ac *attemptCapture, n int64) (bool, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ac.mu.Lock()
	defer ac.mu.Unlock()
	attemptLeft, runLeft := c.attemptCap-ac.bytes, c.runCap-c.runBytes
	if n >= attemptLeft || n >= runLeft {
		if runLeft < attemptLeft {
			ac.truncate(fmt.Sprintf("the run's transcripts reached their cap (%s): calls past it keep metadata only", mib(c.runCap)))
		} else {
			ac.truncate(fmt.Sprintf("the attempt's transcript reached its cap (%s): calls past it keep metadata only", mib(c.attemptCap)))
		}
		return false, 0
	}
	ac.bytes += n
	c.runBytes += n
	return true, min(attemptLeft, runLeft) - n
}

// settle charges a call's response bytes against the caps.
func (c *capturer) settle(ac *attemptCapture, n int64) {
	c.mu.Lock()
	c.runBytes += n
	c.mu.Unlock()
	ac.mu.Lock()
	ac.bytes += n
	ac.mu.Unlock()
}

func (ac *attemptCapture) truncate(why string) {
	if ac.truncated == "" {
		ac.truncated = why
	}
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// dropInjectedUsage removes the stream_options.include_usage the gateway
// added (injectStreamUsage), so the transcript shows what the agent sent.
func dropInjectedUsage(b []byte) []byte {
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

// captureEnd finishes a call: its status, latency, tokens and cost, and
// the response the agent got (assembled when it was streamed).
func (g *Gateway) captureEnd(cc *callCapture, in, out int64, prices Prices) {
	if cc == nil {
		return
	}
	c := cc.c
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.call.Latency = c.clock.Now().Sub(cc.call.Time)
	cc.call.Status = cc.status
	cc.call.InputTokens, cc.call.OutputTokens = in, out
	cc.call.CostUSD = prices.Cost(in, out)
	for _, t := range cc.tries {
		t.Error = c.scrub(t.Error)
		cc.call.Tries = append(cc.call.Tries, *t)
	}
	if !cc.full {
		if c.mode == transcript.ModeFull {
			cc.call.Truncated = true
			cc.call.Request = nil
		}
		return
	}
	body := cc.resp.Bytes()
	var stored int64
	switch {
	case cc.respOver:
		cc.call.Truncated = true
		cc.ac.mu.Lock()
		cc.ac.truncate(fmt.Sprintf("a response was larger than what the transcript caps (%s per attempt, %s per run) had left: its content is left out", mib(c.attemptCap), mib(c.runCap)))
		cc.ac.mu.Unlock()
	case len(body) == 0:
	case strings.HasPrefix(cc.ctype, "text/event-stream"):
		if doc := assembleSSE(body); doc != nil {
			if j, ok := c.scrubJSON(doc); ok {
				cc.call.Response = j
				stored = int64(len(j))
				break
			}
		}
		cc.call.ResponseText = c.scrub(string(body))
		stored = int64(len(body))
	default:
		if j, ok := c.scrubJSON(body); ok {
			cc.call.Response = j
			stored = int64(len(j))
		} else {
			cc.call.ResponseText = c.scrub(string(body))
			stored = int64(len(body))
		}
	}
	c.settle(cc.ac, stored)
}

// Transcript returns (and forgets) what the gateway captured of an
// attempt's calls, by token or attempt id; nil when nothing was captured.
// Call it after Drain, so every call has ended.
func (g *Gateway) Transcript(key string) *transcript.Transcript {
	c := g.capt
	if c == nil || c.mode == transcript.ModeOff {
		return nil
	}
	a := g.find(key)
	if a == nil {
		return nil
	}
	c.mu.Lock()
	ac := c.attempts[a.id]
	delete(c.attempts, a.id)
	c.mu.Unlock()
	if ac == nil {
		return nil
	}
	ac.mu.Lock()
	defer ac.mu.Unlock()
	t := &transcript.Transcript{Mode: c.mode, Truncated: ac.truncated, Dropped: ac.dropped, Calls: make([]transcript.Call, 0, len(ac.calls))}
	for _, cc := range ac.calls {
		cc.mu.Lock()
		t.Calls = append(t.Calls, cc.call)
		cc.mu.Unlock()
	}
	sort.SliceStable(t.Calls, func(i, j int) bool { return t.Calls[i].Time.Before(t.Calls[j].Time) })
	return t
}

// captureWriter records what the agent receives.
type captureWriter struct {
	http.ResponseWriter
	cc    *callCapture
	wrote bool
}

func (w *captureWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.cc.mu.Lock()
		w.cc.status = code
		w.cc.ctype = w.Header().Get("Content-Type")
		w.cc.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	cc := w.cc
	cc.mu.Lock()
	if cc.full && !cc.respOver {
		if int64(cc.resp.Len()+len(p)) > cc.budget {
			cc.respOver = true
			cc.resp.Reset()
		} else {
			cc.resp.Write(p)
		}
	}
	cc.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

// Flush keeps streaming working through the wrapper.
func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// tryRecorder notes every upstream try of a captured call: when it
// started, what it answered, how long it took, and the backoff before it.
type tryRecorder struct{ next http.RoundTripper }

func (t tryRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	cc, _ := req.Context().Value(callKey{}).(*callCapture)
	if cc == nil {
		return t.next.RoundTrip(req)
	}
	clk := cc.c.clock
	start := clk.Now()
	cc.mu.Lock()
	try := &transcript.Try{Start: start}
	if n := len(cc.ends); n > 0 && start.After(cc.ends[n-1]) {
		try.Wait = start.Sub(cc.ends[n-1])
	}
	cc.tries = append(cc.tries, try)
	idx := len(cc.tries) - 1
	cc.ends = append(cc.ends, start)
	cc.mu.Unlock()
	done := func() {
		now := clk.Now()
		cc.mu.Lock()
		try.Latency = now.Sub(start)
		cc.ends[idx] = now
		cc.mu.Unlock()
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		cc.mu.Lock()
		try.Error = err.Error()
		cc.mu.Unlock()
		done()
		return nil, err
	}
	cc.mu.Lock()
	try.Status = resp.StatusCode
	cc.mu.Unlock()
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *doneBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// assembleSSE turns a streamed response into the document the same call
// would have answered unstreamed: an OpenAI chat.completion or
// text_completion, an Anthropic message, or a Responses API response. Nil
// when the stream is none of these.
func assembleSSE(raw []byte) []byte {
	var datas [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), len(raw)+1)
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			datas = append(datas, cur)
			cur = nil
		}
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			flush()
			continue
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			d := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(cur) > 0 {
				cur = append(cur, '\n')
			}
			cur = append(cur, d...)
		}
	}
	flush()
	var oa openaiAssembler
	var an anthropicAssembler
	var final json.RawMessage
	for _, d := range datas {
		if bytes.Equal(bytes.TrimSpace(d), []byte("[DONE]")) {
			continue
		}
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
		case strings.HasPrefix(head.Type, "message_") || strings.HasPrefix(head.Type, "content_block_"):
			an.add(head.Type, d)
		}
	}
	switch {
	case len(final) > 0:
		return final
	case oa.seen:
		return oa.doc()
	case an.msg != nil:
		return an.doc()
	}
	return nil
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
