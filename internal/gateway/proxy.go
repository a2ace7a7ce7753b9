package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// modelID accepts what model ids are made of ("gpt-4o", "claude-3-5-haiku-20241022",
// "ft:gpt-4o-mini:org:name:id"): no separators, no dot segments.
func modelID(id string) bool {
	if id == "" || len(id) > 256 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '@' || c == '+':
		default:
			return false
		}
	}
	return true
}

// exchange is a request's two formats: the client's (errors, the key's
// header) and its route's (usage, the upstream's refusals).
type exchange struct{ client, route API }

// writeError answers in the wire format the client speaks. Messages never
// carry the real key.
func (g *Gateway) writeError(w http.ResponseWriter, f API, status int, kind ErrorKind, code, msg string) {
	g.writeErrorRetry(w, f, status, kind, code, msg, false)
}

// writeErrorRetry is writeError; retry lets the SDKs retry after a second.
func (g *Gateway) writeErrorRetry(w http.ResponseWriter, f API, status int, kind ErrorKind, code, msg string, retry bool) {
	b := errorJSON(f, status, kind, code, g.scrub(msg))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retry {
		h.Set("Retry-After", "1")
	} else {
		h.Set("X-Should-Retry", "false")
	}
	h.Set("Content-Length", fmt.Sprint(len(b)))
	g.writeDeadline(w)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeDeadline gives the next write to the client WriteStall to complete:
// a client that stops reading is dropped instead of holding the request.
func (g *Gateway) writeDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.limits.WriteStall))
}

var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// sandboxOnly are request headers a sandbox may not send on with the real
// key: a method override (a framework may turn an allowed GET into a
// DELETE), and the organization or project the key is used for (the key's
// owner chooses that, not the agent).
var sandboxOnly = map[string]bool{
	"X-Http-Method-Override": true, "X-Http-Method": true, "X-Method-Override": true,
	"Openai-Organization": true, "Openai-Project": true,
}

// ServeHTTP is the gateway's handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := g.speaks(r)
	if r.URL.Path == RemainingPath && r.Method == http.MethodGet {
		a, _ := g.lookup(token(r.Header), r.RemoteAddr)
		if a == nil {
			g.writeError(w, f, http.StatusUnauthorized, ErrAuth, "invalid_api_key", "steward gateway: the remaining endpoint needs the attempt's token")
			return
		}
		g.remaining(w, a)
		return
	}
	if why := badPath(r); why != "" {
		g.writeError(w, f, http.StatusBadRequest, ErrInvalid, "invalid_path",
			"steward gateway: refused path: "+why)
		return
	}
	own, method, hasBody := routeOf(r.URL.Path)
	if own == nil {
		g.writeError(w, f, http.StatusNotFound, ErrNotFound, "unknown_url",
			fmt.Sprintf("steward gateway: unknown route %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != method {
		g.writeError(w, f, http.StatusMethodNotAllowed, ErrInvalid, "method_not_allowed",
			fmt.Sprintf("steward gateway: method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	tok := token(r.Header)
	a, wrongAddr := g.lookup(tok, r.RemoteAddr)
	if a == nil {
		msg := "steward gateway: missing attempt token (send it as " + credentialHint() + ")"
		switch {
		case wrongAddr:
			msg = "steward gateway: this token belongs to another sandbox and is not valid from this address"
			g.logf("refused a token from %s: it is bound to another sandbox", r.RemoteAddr)
		case tok != "":
			msg = "steward gateway: this token is not valid or its attempt has ended"
		}
		g.writeError(w, f, http.StatusUnauthorized, ErrAuth, "invalid_api_key", msg)
		return
	}
	n := a.begin()
	defer a.end()
	if lim := g.limits.RequestsPerToken; lim > 0 && n > lim {
		g.writeBusy(w, f, fmt.Sprintf("steward gateway: this attempt already has %d requests in the gateway (the most one attempt may have at once); wait for one to finish", lim))
		return
	}
	var body []byte
	var injected bool
	if hasBody {
		b, held, status, msg := g.readBody(r, a)
		defer g.releaseBody(a, held)
		switch status {
		case 0:
		case http.StatusRequestEntityTooLarge:
			g.writeError(w, f, status, ErrTooLarge, "request_too_large", msg)
			return
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			g.writeBusyStatus(w, f, status, msg)
			return
		default:
			g.writeError(w, f, status, ErrInvalid, "", msg)
			return
		}
		if err := checkJSONObject(b); err != nil {
			g.writeError(w, f, http.StatusBadRequest, ErrInvalid, "invalid_json", "steward gateway: request body is not valid JSON: "+err.Error())
			return
		}
		body, injected = own.Prepare(r.URL.Path, b)
	}
	est := g.estimate(own, r.URL.Path, body, g.pricesOf(a))
	if !g.reserve(est.cost) {
		g.refuseBudget(w, f, a, est)
		return
	}
	defer g.unreserve(est.cost)
	if which := a.admit(est, g.clock.Now()); which != "" {
		g.refuseLimit(w, f, a, which)
		return
	}
	defer a.release(est)
	g.mu.Lock()
	g.win.requests++
	g.mu.Unlock()
	w, r, call := g.captureBegin(w, r, own, a, body, injected)
	in, out, failed := g.forward(w, r, exchange{client: f, route: own}, a, body, injected, est)
	g.charge(a, in, out, failed)
	g.captureEnd(call, in, out, g.pricesOf(a))
}

// badPath refuses paths that could mean something else to the upstream
// than to the route check: any percent-encoding (%2e, %2f, %5c, double
// encoding), backslashes, dot segments, empty segments and control bytes.
// No route the gateway forwards needs any of them.
func badPath(r *http.Request) string {
	raw := r.URL.EscapedPath()
	if r.URL.RawPath != "" {
		raw = r.URL.RawPath
	}
	if r.RequestURI != "" && r.RequestURI != "*" {
		if p, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasPrefix(p, "/") {
			raw = p
		}
	}
	switch {
	case !strings.HasPrefix(raw, "/"):
		return "the path must start with /"
	case strings.Contains(raw, "%"):
		return "percent-encoded characters are not allowed in the path"
	case strings.Contains(raw, "\\"):
		return "backslashes are not allowed in the path"
	case strings.Contains(raw, "//"):
		return "empty path segments are not allowed"
	}
	for _, seg := range strings.Split(raw[1:], "/") {
		if seg == "." || seg == ".." {
			return "dot segments are not allowed in the path"
		}
	}
	for _, c := range []byte(raw) {
		if c < 0x21 || c == 0x7f {
			return "control characters are not allowed in the path"
		}
	}
	if raw != r.URL.Path {
		return "the path is not in canonical form"
	}
	return ""
}

// checkJSONObject accepts a body that is one valid JSON object.
func checkJSONObject(b []byte) error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return errors.New("the body is empty")
	}
	if t[0] != '{' {
		return errors.New("the body is not a JSON object")
	}
	if !json.Valid(t) {
		var v any
		if err := json.Unmarshal(t, &v); err != nil {
			return err
		}
		return errors.New("the body is not one JSON value")
	}
	return nil
}

func (g *Gateway) upstreamURL(r *http.Request) string {
	base := strings.TrimSuffix(g.base.String(), "/")
	p := r.URL.Path
	if strings.HasSuffix(g.base.Path, "/v1") || strings.HasSuffix(g.base.Path, "/v1/") {
		p = strings.TrimPrefix(p, "/v1")
	}
	u := base + p
	if q := forwardQuery(r.URL.Query()); q != "" {
		u += "?" + q
	}
	return u
}

// forwardQuery are the query parameters the SDKs send on the allowed
// routes (Anthropic's beta flag, list paging, Azure's api-version); any
// other parameter never reaches the upstream with the real key.
func forwardQuery(q url.Values) string {
	out := url.Values{}
	for k, vs := range q {
		if queryAllowed(k) {
			out[k] = vs
		}
	}
	return out.Encode()
}

func (g *Gateway) newUpstreamRequest(ctx context.Context, r *http.Request, f API, body []byte) (*http.Request, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, g.upstreamURL(r), rd)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	for k, vs := range r.Header {
		if !forwardHeader(k) || hopHeaders[k] || sandboxOnly[k] {
			continue
		}
		req.Header[k] = vs
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	// The key goes where the client's wire format expects it: an Anthropic
	// upstream's OpenAI-compatible routes and an OpenAI-compatible upstream's
	// /v1/messages each take the key their route's SDK would send.
	f.Authorize(req.Header, g.cfg.APIKey)
	return req, nil
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusConflict,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, 520, 522, 524, 529:
		return true
	}
	return false
}

// backoff is how long retry number n (0-based) waits: exponential with
// jitter, at least Retry-After.
func (g *Gateway) backoff(n int, retryAfter time.Duration) time.Duration {
	d := float64(g.cfg.BackoffBase) * math.Pow(2, float64(n))
	if d > float64(g.cfg.BackoffMax) {
		d = float64(g.cfg.BackoffMax)
	}
	d = d/2 + d/2*g.rnd() // equal jitter: [d/2, d)
	if ra := float64(retryAfter); ra > 0 {
		// Honour Retry-After, spread by up to 10% so retries do not land together.
		if j := ra * (1 + 0.1*g.rnd()); j > d {
			d = j
		}
	}
	return time.Duration(d)
}

const maxErrorBody = 1 << 20

// upstreamContext is the context of the upstream exchange. It outlives the
// client: the provider bills a request whether or not its client stayed to
// the end, so when the client goes away the gateway keeps reading the answer
// (for its usage) for CutDrain, then gives up.
func (g *Gateway) upstreamContext(client context.Context) (context.Context, context.CancelFunc) {
	up, cancel := context.WithCancel(context.WithoutCancel(client))
	stop := context.AfterFunc(client, func() {
		t := time.NewTimer(g.cfg.CutDrain)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-up.Done():
		}
	})
	return up, func() { stop(); cancel() }
}

// passOnFinal relays the upstream's last answer (status, headers, body,
// scrubbed) to the agent as final: X-Should-Retry: false, so that an SDK
// does not try again what the gateway gave up on or knows cannot pass.
func (g *Gateway) passOnFinal(w http.ResponseWriter, status int, hdr http.Header, body []byte) {
	g.copyHeaders(w.Header(), hdr)
	w.Header().Del("Content-Length")
	w.Header().Set("X-Should-Retry", "false")
	g.writeDeadline(w)
	w.WriteHeader(status)
	_, _ = w.Write(g.scrubBytes(body))
}

// tooLarge reports whether an upstream's 429 refuses a request larger
// than the key allows in a minute, and how that is known: OpenAI says so
// ("Request too large …"); any upstream's headers do when the request's
// input floor exceeds the whole limit of a bucket that counts input
// (Anthropic words both alike: "This request would exceed the rate limit
// …").
func tooLarge(path string, route API, body []byte, h http.Header, answer []byte) (string, bool) {
	if requestTooLarge(answer) {
		return "the upstream said so", true
	}
	// A floor is at most half the body's bytes (a character of text
	// counts an eighth of a token, a number of a token array one): a body
	// that small is not read.
	if _, lim, ok := inputLimit(h); !ok || float64(len(body)/2) <= lim {
		return "", false
	}
	floor := route.InputFloor(path, body)
	if name, lim, ok := tooLargeForKey(h, floor); ok {
		return fmt.Sprintf("its input is at least %d tokens, over the key's whole limit of %.0f in %s", floor, lim, name), true
	}
	return "", false
}

// forward sends the request upstream with retries and writes the answer.
// It returns the tokens to charge and whether the agent saw an error.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, x exchange, a *attempt, body []byte, injected bool, est estimate) (in, out int64, failed bool) {
	f := x.client
	ctx := r.Context()
	a.mu.Lock()
	hooks := a.hooks
	a.mu.Unlock()
	var waited time.Duration
	var prev *Ticket
	// unreachable: the last try reached no upstream (a connection error).
	var unreachable bool
	for try := 0; ; try++ {
		// The attempt is the key its requests queue under, the identity
		// its per-token limits count by: attempts take turns (fairQueue).
		t, err := g.ctl.AcquireSized(ctx, a, float64(est.in))
		if err != nil {
			// The sandbox went away (or the gateway is stopping); tell it if it still listens.
			g.writeError(w, f, http.StatusServiceUnavailable, ErrUpstream, "", "steward gateway: stopped waiting for an upstream connection: "+err.Error())
			return 0, 0, true
		}
		t.RetryOf(prev)
		prev = t
		upCtx, upDone := g.upstreamContext(ctx)
		req, err := g.newUpstreamRequest(upCtx, r, f, body)
		if err != nil {
			upDone()
			g.ctl.Done(t, OutcomeCancelled, RateInfo{})
			g.writeError(w, f, http.StatusInternalServerError, ErrUpstream, "", "steward gateway: "+err.Error())
			return 0, 0, true
		}
		resp, err := g.transport.RoundTrip(req)
		wasUnreachable := unreachable
		unreachable = false
		var (
			status   int
			lastBody []byte
			lastHdr  http.Header
			info     RateInfo
			reason   string
		)
		if err != nil {
			upDone()
			if ctx.Err() != nil {
				// The client left while the upstream worked on its request,
				// which did not answer within CutDrain: the provider may bill
				// it, so it is charged its estimate.
				g.ctl.Done(t, OutcomeCancelled, RateInfo{})
				if wasUnreachable {
					// It left during a retry of a call no try had
					// delivered: the upstream's failure (issue 23 item 10).
					a.upstreamFailed()
				}
				return est.in, est.out, true
			}
			g.ctl.Done(t, OutcomeError, RateInfo{})
			status = http.StatusBadGateway
			reason = "upstream connection failed: " + err.Error()
			unreachable = true
		} else {
			info = ParseRateInfo(resp.Header, g.clock.Now())
		}
		if err == nil && resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.StatusCode != http.StatusNotModified {
			// Redirects are never followed, and never passed on: their
			// Location (or body) could carry anything back to the sandbox.
			resp.Body.Close()
			upDone()
			g.ctl.Done(t, OutcomeError, info)
			g.logf("attempt %s: upstream answered a redirect (%d); not followed", a.id, resp.StatusCode)
			a.upstreamFailed()
			g.writeError(w, f, http.StatusBadGateway, ErrUpstream, "upstream_redirect",
				fmt.Sprintf("steward gateway: the upstream answered with a redirect (%d), which the gateway does not follow", resp.StatusCode))
			return 0, 0, true
		}
		if err == nil && !retryableStatus(resp.StatusCode) {
			var retry bool
			in, out, failed, retry = g.relay(w, resp, x, t, info, injected, ctx, est)
			upDone()
			if !retry {
				if resp.StatusCode >= 500 {
					a.upstreamFailed()
				}
				return in, out, failed
			}
			if ctx.Err() != nil {
				return 0, 0, true
			}
			status, reason = http.StatusBadGateway, "upstream connection dropped mid-response"
		} else if err == nil {
			lastBody, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
			upDone()
			status, lastHdr = resp.StatusCode, resp.Header
			if status == http.StatusTooManyRequests {
				if why, spend := x.route.SpendLimit(resp.Header, lastBody); spend {
					g.ctl.Done(t, OutcomeError, info)
					g.logf("attempt %s: upstream refused for its spend limit (%s); not retried", a.id, why)
					a.upstreamFailed()
					g.writeError(w, f, http.StatusTooManyRequests, ErrSpendLimit, "insufficient_quota",
						fmt.Sprintf("steward gateway: the upstream refused the request because the account's spend limit or quota is exhausted (%s); this is not congestion and was not retried: check the provider account's billing and limits. Upstream said: %s", why, strings.TrimSpace(string(lastBody))))
					return 0, 0, true
				}
				if why, large := tooLarge(r.URL.Path, x.route, body, resp.Header, lastBody); large {
					// More tokens than the key allows in a minute: no wait
					// lets it through, and it says nothing of the key's
					// congestion (counted as such, an agent cut every
					// sample's pace with it). Passed on, not retried.
					g.ctl.Done(t, OutcomeError, info)
					g.logf("attempt %s: upstream refused the request as larger than the key allows in a minute (%s); not retried", a.id, why)
					g.passOnFinal(w, status, lastHdr, lastBody)
					return 0, 0, true
				}
				g.ctl.Done(t, OutcomeRateLimited, info)
			} else {
				g.ctl.Done(t, OutcomeError, info)
			}
			reason = fmt.Sprintf("upstream answered %d", status)
		}
		// Retry?
		d := g.backoff(try, info.RetryAfter)
		if try >= g.cfg.RetryLimit || g.cfg.RetryLimit < 0 || waited+d > g.cfg.RetryBudget {
			g.logf("attempt %s: %s; retries exhausted after %d tries", a.id, reason, try+1)
			a.upstreamFailed()
			if lastHdr != nil {
				g.passOnFinal(w, status, lastHdr, lastBody)
			} else {
				g.writeError(w, f, http.StatusBadGateway, ErrUpstream, "upstream_unreachable",
					fmt.Sprintf("steward gateway: %s; gave up after %d tries", reason, try+1))
			}
			return 0, 0, true
		}
		g.mu.Lock()
		g.win.retries++
		g.mu.Unlock()
		g.logf("attempt %s: %s; retry %d in %s", a.id, reason, try+1, d.Round(time.Millisecond))
		if hooks != nil {
			hooks.BackoffStart()
		}
		serr := clock.Sleep(ctx, g.clock, d)
		var berr error
		if hooks != nil {
			berr = hooks.BackoffEnd(ctx)
		}
		waited += d
		if serr != nil || berr != nil {
			why := serr
			if why == nil {
				why = berr
			}
			if unreachable {
				// The agent gave up (its own timeout, the attempt's end)
				// while the upstream could not be reached: the provider's
				// doing, as when the retries run out (issue 23 item 10).
				a.upstreamFailed()
			}
			g.writeError(w, f, http.StatusServiceUnavailable, ErrUpstream, "", fmt.Sprintf("steward gateway: %s; the retry was abandoned: %v", reason, why))
			return 0, 0, true
		}
	}
}

// dropResponse are upstream headers never passed to a sandbox.
var dropResponse = map[string]bool{
	"Content-Length": true, "Content-Encoding": true, "Location": true, "Content-Location": true,
	"Set-Cookie": true, "Set-Cookie2": true, "Refresh": true, "Link": true,
}

// copyHeaders copies an upstream answer's headers for the sandbox, with the
// key and the secrets scrubbed from every value.
func (g *Gateway) copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[k] || dropResponse[k] || g.scrub_.ContainsFold(k) {
			continue
		}
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = g.scrub(v)
		}
		dst[k] = out
	}
}

// relay writes a final (non-retried) upstream response to the client. When
// the response broke before anything reached the client, retry is true and
// nothing was written. Every byte is scrubbed of the key and the secrets,
// whatever the status; a secret split across reads is still caught. When the
// client goes away mid-answer, the rest is read (for CutDrain at most) to
// charge its usage; an answer whose usage never came is charged the estimate.
func (g *Gateway) relay(w http.ResponseWriter, resp *http.Response, x exchange, t *Ticket, info RateInfo, injected bool, client context.Context, est estimate) (in, out int64, failed, retry bool) {
	defer resp.Body.Close()
	f := x.client
	m := &usageMeter{api: x.route}
	failed = resp.StatusCode >= 400
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// The gateway scrubs plain bytes only; it never asks for an encoding
		// it does not decode (the transport decodes gzip itself).
		g.ctl.Done(t, OutcomeError, info)
		g.writeError(w, f, http.StatusBadGateway, ErrUpstream, "upstream_encoding",
			fmt.Sprintf("steward gateway: the upstream answered with a content encoding (%s) the gateway did not ask for", ce))
		return 0, 0, true, false
	}
	// charged: what a cut answer costs.
	charged := func(complete bool) (int64, int64) {
		if complete && m.seen {
			return m.in, m.out
		}
		i, o := m.in, m.out
		if est.in > i {
			i = est.in
		}
		if est.out > o {
			o = est.out
		}
		return i, o
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		start := func() {
			g.copyHeaders(w.Header(), resp.Header)
			g.writeDeadline(w)
			w.WriteHeader(resp.StatusCode)
		}
		sw := &scrubWriter{w: w, z: streamScrubber{s: g.scrub_}, g: g}
		wrote, rerr, werr := copySSE(sw, resp.Body, m, injected, start)
		if werr == nil && rerr == nil {
			werr = sw.finish()
		}
		if werr != nil || (rerr != nil && client.Err() != nil) {
			// The client went away (or stopped reading); copySSE read on to
			// the stream's end or to CutDrain, for the usage.
			g.ctl.Done(t, OutcomeOK, info)
			i, o := charged(rerr == nil)
			g.logf("a client left a stream before its end; charged %d input and %d output tokens", i, o)
			return i, o, true, false
		}
		if rerr != nil {
			g.ctl.Done(t, OutcomeError, info)
			if !wrote {
				return 0, 0, false, true
			}
			// The stream already started: it cannot be retried. The client sees it end.
			_ = sw.finish()
			g.logf("upstream stream broke after it started: %v", rerr)
			return m.in, m.out, true, false
		}
		if !wrote {
			start()
		}
		info.Tokens, info.InputTokens = m.in+m.out, m.in
		g.ctl.Done(t, OutcomeOK, info)
		return m.in, m.out, failed, false
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.ctl.Done(t, OutcomeError, info)
		if client.Err() != nil {
			i, o := charged(false)
			return i, o, true, false
		}
		return 0, 0, false, true
	}
	if !failed {
		m.observe(b)
	}
	b = g.scrubBytes(b)
	info.Tokens, info.InputTokens = m.in+m.out, m.in
	g.ctl.Done(t, OutcomeOK, info)
	g.copyHeaders(w.Header(), resp.Header)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	g.writeDeadline(w)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(b)
	return m.in, m.out, failed, false
}

// scrubWriter passes an event stream to the client through a stream
// scrubber, each write with its own deadline.
type scrubWriter struct {
	w http.ResponseWriter
	z streamScrubber
	g *Gateway
}

func (s *scrubWriter) Header() http.Header { return s.w.Header() }
func (s *scrubWriter) WriteHeader(c int)   { s.w.WriteHeader(c) }
func (s *scrubWriter) Write(p []byte) (int, error) {
	out := s.z.write(p)
	if len(out) > 0 {
		s.g.writeDeadline(s.w)
		if _, err := s.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
func (s *scrubWriter) Flush() {
	s.g.writeDeadline(s.w)
	_ = http.NewResponseController(s.w).Flush()
}

// finish writes what the scrubber held back at the end of the stream.
func (s *scrubWriter) finish() error {
	out := s.z.flush()
	if len(out) == 0 {
		return nil
	}
	s.g.writeDeadline(s.w)
	if _, err := s.w.Write(out); err != nil {
		return err
	}
	s.Flush()
	return nil
}
