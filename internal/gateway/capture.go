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
	api      API // the route's format
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
func (g *Gateway) captureBegin(w http.ResponseWriter, r *http.Request, own API, a *attempt, body []byte, injected bool) (http.ResponseWriter, *http.Request, *callCapture) {
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
	cc := &callCapture{c: c, ac: ac, injected: injected, api: own}
	cc.call = transcript.Call{Time: c.clock.Now(), Method: r.Method, Route: r.URL.Path}
	if len(body) > 0 {
		model, stream := own.Call(r.URL.Path, body)
		cc.call.Model, cc.call.Stream = c.scrub(model), stream
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
				req = own.Unprepare(r.URL.Path, body)
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
		if doc := assembleSSE(cc.api, body); doc != nil {
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
// would have answered unstreamed, as the route's format assembles it (an
// OpenAI chat.completion or text_completion, a Responses API response, an
// Anthropic message, …). Nil when the stream is none its format knows.
func assembleSSE(a API, raw []byte) []byte {
	if a == nil {
		return nil
	}
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
	events := datas[:0]
	for _, d := range datas {
		if !bytes.Equal(bytes.TrimSpace(d), []byte("[DONE]")) {
			events = append(events, d)
		}
	}
	return a.Assemble(events)
}
