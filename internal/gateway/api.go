package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/steward-evals/steward/internal/secret"
)

// API is one upstream wire format the gateway speaks (issue 26 item 4):
// everything that differs between the OpenAI API, Anthropic's and the next
// one lives in one file per format (openai.go, anthropic.go) that
// registers it from its init function; the proxy, the budget, the quota,
// the transcripts and the connection controller ask the registry and name
// no format. docs/architecture.md, "Adding an upstream", says what each
// method decides and what a new format costs.
//
// A request has two formats, which are most often the same: the one the
// client speaks (Speaks: the shape of the gateway's own errors, the header
// the real key goes in) and the one that owns its route (Route: the body's
// preparation, the estimate, the usage, the stream's assembly, the
// upstream's spend-limit refusals). A client of an Anthropic upstream may
// call its OpenAI-compatible routes; an OpenAI-compatible upstream may
// serve /v1/messages.
type API interface {
	// Name is the upstream's name in model.upstream ("openai").
	Name() string
	// Upstream is what a run whose upstream this is needs: its default
	// base URL and the variable its key is read from by default.
	Upstream() Upstream
	// Speaks reports whether a request is in this format (its path, its
	// headers; upstream is the run's upstream). A request no format
	// claims speaks the fallback's (OpenAI's).
	Speaks(r *http.Request, upstream string) bool
	// Route is the method the gateway forwards on path and whether that
	// request carries a body; "" when path is not one of this format's
	// routes. Only routed paths reach the upstream.
	Route(path string) (method string, body bool)
	// Token is the attempt's token as this format's SDK sends it ("" if
	// absent), and Authorize puts the real key where the upstream
	// expects it on an outgoing request of this format.
	Token(h http.Header) string
	Authorize(h http.Header, key string)
	// Forward names the request headers and query parameters this
	// format's SDKs send that the upstream may see (canonical header
	// names; a name ending in "*" is a prefix). Anything no format names
	// never reaches the upstream with the real key.
	Forward() (headers, query []string)
	// ErrorBody is the gateway's own error in this format's shape: kind
	// says what went wrong, code is OpenAI's machine-readable code ("" for
	// none), msg is already scrubbed.
	ErrorBody(status int, kind ErrorKind, code, msg string) any
	// Call is what a transcript says of a request: the model asked for
	// and whether the answer streams.
	Call(path string, body []byte) (model string, stream bool)
	// Prepare may change a request body before it goes upstream (OpenAI:
	// asking a stream for its usage); changed says it did, and Unprepare
	// gives back what the client sent, for the transcript.
	Prepare(path string, body []byte) (out []byte, changed bool)
	Unprepare(path string, body []byte) []byte
	// Estimate is the most output a request may be billed for (its own
	// caps, else defaultOut), and whether the route is billed at all.
	Estimate(path string, body []byte, defaultOut int64) (out int64, billable bool)
	// Usage reads the tokens one response document (or one stream
	// event's data) reports; ok is false when it reports none. usageOnly
	// marks an event that carries usage and nothing else (the one Prepare
	// asked for, which the client does not see).
	Usage(doc []byte) (in, out int64, ok, usageOnly bool)
	// Assemble turns a streamed answer's event data, in order, into the
	// document the same call would have answered unstreamed; nil when the
	// stream is not one this format knows.
	Assemble(events [][]byte) []byte
	// RateHeaders are the rate-limit headers this format's upstream
	// announces (none: the zero value).
	RateHeaders() RateHeaders
	// SpendLimit reports whether a 429 from the upstream is a refusal for
	// the account's spend limit or quota (not retried) rather than
	// congestion, and a short reason.
	SpendLimit(h http.Header, body []byte) (why string, spend bool)
	// InputFloor is the fewest input tokens a request on path surely
	// counts against the key's per-minute token limits: a lower bound,
	// never an estimate, from the text the model reads (no base64 data,
	// no reasoning a provider drops), and 0 when it cannot vouch for one
	// (a prompt cache may serve part of the input uncounted). A 429 whose
	// input limit (RateHeaders.InputLimits) is under it can never pass
	// (tooLargeForKey); one a wait would cure must never be taken for it.
	InputFloor(path string, body []byte) int64
	// Env is what a sandbox needs to reach the gateway at baseURL with
	// token in this format (the variables its SDKs read).
	Env(baseURL, token string) []string
	// Ask is one user prompt to model with at most maxTokens of answer in
	// this format (the model judge's call, sent to the gateway with
	// Authorize's header), and Reply the answer's text.
	Ask(model, prompt string, maxTokens int) (path string, body []byte)
	Reply(data []byte) (string, error)
}

// Upstream describes a format as the run's upstream.
type Upstream struct {
	// BaseURL is the default base URL (Config.BaseURL when none is given).
	BaseURL string
	// KeyEnv is the variable the real key is read from by default
	// (model.api_key_env).
	KeyEnv string
}

// RateHeaders name one format's rate-limit headers. Each bucket is a
// limit, a remaining count and a reset (a duration or an RFC 3339 time).
type RateHeaders struct {
	// Quotas are (limit, remaining) pairs: the smallest remaining
	// fraction and count over them is the controller's pushback.
	Quotas [][2]string
	// Requests and Tokens are the requests-per-minute and
	// tokens-per-minute buckets as (limit, remaining, reset), for the
	// pace, the banked requests and the key's share; a missing bucket is
	// all "".
	Requests, Tokens [3]string
	// InputLimits are the limit headers of the buckets that count a
	// request's input tokens, most specific first: of those an answer
	// carries, the first is read (tooLargeForKey), since a less specific
	// one may count other tokens than the input too.
	InputLimits []string
}

// ErrorKind is what a gateway error says went wrong; each format spells it
// its own way (ErrorBody).
type ErrorKind int

// The gateway's errors.
const (
	// ErrInvalid: the request is malformed (path, body, method).
	ErrInvalid ErrorKind = iota
	// ErrNotFound: no route has this path.
	ErrNotFound
	// ErrAuth: no token, or not one valid from this address.
	ErrAuth
	// ErrTooLarge: the body is over the gateway's bound.
	ErrTooLarge
	// ErrBusy: a gateway limit the client may wait out (429, retried).
	ErrBusy
	// ErrOverloaded: the gateway is full (503, retried).
	ErrOverloaded
	// ErrBudget: the run's budget cannot cover the call (402).
	ErrBudget
	// ErrLimit: the attempt's own limits refuse the call (403).
	ErrLimit
	// ErrSpendLimit: the upstream refused for the account's spend limit.
	ErrSpendLimit
	// ErrUpstream: the upstream failed (unreachable, redirect, retries
	// exhausted, an encoding the gateway did not ask for).
	ErrUpstream
)

// fallbackAPI is the format of a request no format claims: the one most
// clients speak.
const fallbackAPI = "openai"

var (
	apisMu sync.RWMutex
	apis   []API // sorted by name
)

// Register adds a wire format, and its key variable to the secret
// variables (secret.AddEnvNames); each format's file calls it from init.
// It panics on a second format of the same name.
func Register(a API) {
	apisMu.Lock()
	defer apisMu.Unlock()
	for _, x := range apis {
		if x.Name() == a.Name() {
			panic(fmt.Sprintf("gateway: wire format %q registered twice", a.Name()))
		}
	}
	apis = append(apis, a)
	secret.AddEnvNames(a.Upstream().KeyEnv)
	slices.SortFunc(apis, func(x, y API) int { return strings.Compare(x.Name(), y.Name()) })
}

// APIs are the registered wire formats, by name.
func APIs() []API {
	apisMu.RLock()
	defer apisMu.RUnlock()
	return slices.Clone(apis)
}

// LookupAPI is the format of an upstream name; false for none (and for
// "mock", the built-in model, which speaks OpenAI's and Anthropic's).
func LookupAPI(name string) (API, bool) {
	for _, a := range APIs() {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// MockUpstream is the built-in deterministic upstream's name.
const MockUpstream = "mock"

// Upstreams are the values model.upstream may take: the mock, then every
// registered format.
func Upstreams() []string {
	out := []string{MockUpstream}
	for _, a := range APIs() {
		out = append(out, a.Name())
	}
	return out
}

// ClientAPI is the format a client of the run's upstream speaks: the
// upstream's own, or the fallback's for the mock (which speaks it too).
func ClientAPI(upstream string) API {
	if a, ok := LookupAPI(upstream); ok {
		return a
	}
	a, _ := LookupAPI(fallbackAPI)
	return a
}

// DefaultKeyEnv is the variable an upstream's key is read from when the
// eval set names none ("" for the mock or an unknown name).
func DefaultKeyEnv(upstream string) string {
	if a, ok := LookupAPI(upstream); ok {
		return a.Upstream().KeyEnv
	}
	return ""
}

// EnvNames are the variables Env sets in a sandbox, in its order.
func EnvNames() []string {
	var out []string
	for _, kv := range Env("http://gateway.invalid", "token") {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k)
	}
	return out
}

// Env is the environment a sandbox needs to reach the gateway at baseURL
// (e.g. "http://172.17.0.1:8750") with token, in every registered format;
// no real key is in it.
func Env(baseURL, token string) []string {
	baseURL = strings.TrimSuffix(baseURL, "/")
	var out []string
	for _, a := range fallbackFirst() {
		out = append(out, a.Env(baseURL, token)...)
	}
	return out
}

// fallbackFirst puts the fallback first (OPENAI_* before the others, as the
// sandboxes have always seen them).
func fallbackFirst() []API {
	all := APIs()
	slices.SortStableFunc(all, func(x, y API) int {
		switch {
		case x.Name() == fallbackAPI && y.Name() != fallbackAPI:
			return -1
		case y.Name() == fallbackAPI && x.Name() != fallbackAPI:
			return 1
		}
		return 0
	})
	return all
}

// speaks is the format a request is in.
func (g *Gateway) speaks(r *http.Request) API {
	var fb API
	for _, a := range APIs() {
		if a.Name() == fallbackAPI {
			fb = a
			continue
		}
		if a.Speaks(r, g.cfg.Upstream) {
			return a
		}
	}
	return fb
}

// routeOf is the format that owns path and the method it takes there; nil
// when no format routes it.
func routeOf(path string) (a API, method string, body bool) {
	for _, x := range APIs() {
		if m, b := x.Route(path); m != "" {
			return x, m, b
		}
	}
	return nil, "", false
}

// forwardHeader reports whether a sandbox's request header goes on to the
// upstream: what some format's SDKs send (Forward). Anything else
// (X-Forwarded-*, Forwarded, X-Original-URL, a method override, another
// organization or project, cookies, the sandbox's own credentials) never
// reaches the upstream with the real key. k is canonical (net/http's form).
func forwardHeader(k string) bool {
	if commonHeaders[k] {
		return true
	}
	for _, a := range APIs() {
		hs, _ := a.Forward()
		for _, h := range hs {
			if p, ok := strings.CutSuffix(h, "*"); ok && strings.HasPrefix(k, p) || h == k {
				return true
			}
		}
	}
	return false
}

// commonHeaders are what any client sends: content negotiation, its name,
// an idempotency key.
var commonHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "User-Agent": true, "Idempotency-Key": true,
}

// queryAllowed reports whether a query parameter goes on to the upstream:
// one some format's SDKs send on its routes (Forward).
func queryAllowed(k string) bool {
	for _, a := range APIs() {
		_, qs := a.Forward()
		if slices.Contains(qs, k) {
			return true
		}
	}
	return false
}

// token is the attempt token a request carries, in whichever format's
// header it came.
func token(h http.Header) string {
	for _, a := range APIs() {
		if t := a.Token(h); t != "" {
			return t
		}
	}
	return ""
}

// credentialHint names where the formats take the token ("Authorization:
// Bearer or X-Api-Key"), as each format's Authorize writes a key.
func credentialHint() string {
	var hs []string
	for _, a := range fallbackFirst() {
		h := http.Header{}
		a.Authorize(h, "stw-hint")
		for k, vs := range h {
			if len(vs) == 1 && strings.Contains(vs[0], "stw-hint") {
				hs = append(hs, strings.TrimSpace(k+": "+strings.TrimSuffix(vs[0], "stw-hint")))
			}
		}
	}
	for i := range hs {
		hs[i] = strings.TrimSuffix(hs[i], ":")
	}
	return orList(hs)
}

// usageOf reads a document's usage as the route's format reports it.
func usageOf(a API, doc []byte) (in, out int64, ok, usageOnly bool) {
	if a == nil {
		return 0, 0, false, false
	}
	return a.Usage(doc)
}

// errorJSON is a format's error body as JSON.
func errorJSON(a API, status int, kind ErrorKind, code, msg string) []byte {
	b, _ := json.Marshal(a.ErrorBody(status, kind, code, msg))
	return b
}
