package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/mockmodel"
)

// Prices are USD per million tokens.
type Prices struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// Cost of the given tokens in USD.
func (p Prices) Cost(in, out int64) float64 {
	return float64(in)*p.InputPerMTok/1e6 + float64(out)*p.OutputPerMTok/1e6
}

// Config configures a Gateway.
type Config struct {
	// Upstream is "mock" (the built-in deterministic model, no network)
	// or a registered wire format's name (Upstreams: "openai", "anthropic").
	Upstream string
	// BaseURL of the real endpoint. Default: the format's (API.Upstream:
	// https://api.openai.com/v1, https://api.anthropic.com). When it ends in /v1, the incoming /v1 prefix
	// is not repeated.
	BaseURL string
	// APIKey is the real key; it never leaves the gateway except towards the upstream.
	APIKey string
	// MaxConnections > 0 fixes the connection limit (C5); 0 is adaptive.
	MaxConnections int
	// Policy overrides the adaptive controller's policy (benchmarks, tuning).
	// Ignored when MaxConnections > 0.
	Policy *Policy
	// Prices turn token counts into USD.
	Prices Prices
	// Clock drives backoff and cooldowns (default: the wall clock).
	Clock clock.Clock
	// Rand returns a float in [0,1) for backoff jitter (default math/rand).
	Rand func() float64
	// RetryLimit is the most retries per request (0: 8; negative: none).
	RetryLimit int
	// RetryBudget is the most time one request may spend waiting in backoff (0: 10m).
	RetryBudget time.Duration
	// BackoffBase and BackoffMax shape the exponential backoff (0: 1s and 60s).
	BackoffBase, BackoffMax time.Duration
	// MaxBodyBytes refuses larger request bodies with 413 (0: 8 MiB). A body
	// is buffered whole (retries resend it; the budget estimate and the
	// stream-usage injection read its JSON), so this bounds its memory.
	MaxBodyBytes int64
	// Limits bound what one sandbox (or all of them) can hold in the
	// gateway; zero fields take their defaults (see Limits).
	Limits Limits
	// Secrets are further values scrubbed like the key from everything that
	// goes back to a sandbox (values shorter than 8 bytes are ignored).
	Secrets []string
	// BudgetUSD > 0 is a hard cap on spend: a request whose estimated cost
	// the remaining budget cannot cover is refused before it goes upstream.
	BudgetUSD float64
	// DefaultMaxTokens is the output estimate for a request that names no
	// max_tokens (0: 4096).
	DefaultMaxTokens int64
	// CutDrain is how long the gateway keeps reading an upstream answer
	// whose client went away, to charge its usage (0: 30s); past it, the
	// request is charged its estimate.
	CutDrain time.Duration
	// Logger receives one line per notable event (retries, refusals); nil: none.
	// The real key is scrubbed from everything written here.
	Logger io.Writer
	// Transport reaches the upstream (default: a pooled http.Transport, or the
	// in-process mock handler for "mock").
	Transport http.RoundTripper
	// Capture says what transcripts of the attempts' calls to keep (capture.go).
	Capture Capture
}

// DefaultCutDrain is how long, by default, the gateway reads on an answer
// whose client went away (Config.CutDrain).
const DefaultCutDrain = 30 * time.Second

// Usage is what an attempt (or the whole run) spent.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	Requests     int64   `json:"requests"`
	Errors       int64   `json:"errors"`
	// UpstreamFailed counts calls the gateway answered with the upstream's
	// failure after its retries (5xx, connection errors, pushback that
	// outlasted them, a redirect, the account's spend limit): the provider's
	// doing, so the supervisor never judges such an attempt failed.
	UpstreamFailed int64 `json:"upstream_failed"`
	// BudgetRefused counts calls the run's --budget refused.
	BudgetRefused int64 `json:"budget_refused"`
	// LimitRefused counts calls the attempt's own limits refused, and
	// LimitReached names the first bound (LimitTokens, …; "" if none).
	LimitRefused int64  `json:"limit_refused,omitempty"`
	LimitReached string `json:"limit_reached,omitempty"`
}

type attempt struct {
	id       string
	hooks    AttemptHooks
	mu       sync.Mutex
	usage    Usage
	inflight int
	idle     chan struct{} // closed when inflight drops to 0; nil while idle
	bodyMem  int64         // request body bytes buffered for this attempt now
	quota    quotaState    // the attempt's limits (quota.go)
	prices   *Prices       // its own prices (a model judge's graders); nil: the run's
}

// begin counts a request in; it returns how many are in flight with it.
func (a *attempt) begin() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight == 0 {
		a.idle = make(chan struct{})
	}
	a.inflight++
	return a.inflight
}

func (a *attempt) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	if a.inflight == 0 {
		close(a.idle)
		a.idle = nil
	}
}

// Signals are the gateway's per-window counters for the tend loop.
type Signals struct {
	// Episodes counts rate-limit episodes (each cut the limit once).
	Episodes int `json:"episodes"`
	// RateLimited counts upstream 429s (congestion ones; spend-limit refusals are Errors).
	RateLimited int `json:"rate_limited"`
	// Retries counts upstream retries (429, 5xx, dropped connections).
	Retries int `json:"retries"`
	// Requests counts requests from sandboxes that reached the upstream stage.
	Requests int `json:"requests"`
	// Errors counts requests that ended in an error for the agent.
	Errors int `json:"errors"`
	// InFlight is upstream requests in flight now; PeakInFlight the most during the window.
	InFlight     int `json:"in_flight"`
	PeakInFlight int `json:"peak_in_flight"`
	// Limit and Ceiling of the connection controller now.
	Limit   int  `json:"limit"`
	Ceiling int  `json:"ceiling"`
	Fixed   bool `json:"fixed"`
	// Saturated: requests filled the limit at some point in the window.
	Saturated bool `json:"saturated"`
	// Pushback: a 429 arrived, or the provider's remaining quota ran low,
	// or the key's share found the key over its target while requests
	// waited or still wait (Controller.Window).
	Pushback bool `json:"pushback"`
	// Need is how many calls in flight the gateway's pace keeps busy at
	// the measured latency (0: unknown; ControllerWindow.Need).
	Need int `json:"need,omitempty"`
}

// Gateway is the model gateway: per-attempt tokens, the proxy, the
// connection controller, retries and usage accounting.
type Gateway struct {
	cfg       Config
	base      *url.URL
	transport http.RoundTripper
	ctl       *Controller
	clock     clock.Clock
	rnd       func() float64

	scrub_ *scrubber
	limits Limits
	conns  *connLimiter
	rates  *rateBuckets

	mu       sync.Mutex
	tokens   map[string]*attempt
	bound    map[string][]netip.Addr // token -> the only remote addresses it works from
	attempts map[string]*attempt
	totals   Usage
	reserved float64 // USD held by requests in flight (hard budget)
	refused  int64   // requests refused for the budget
	bodyMem  int64   // request body bytes buffered now, all attempts
	win      struct{ retries, requests, errors int }
	logMu    sync.Mutex
	capt     *capturer // transcripts (capture.go)
}

// New checks cfg and makes a gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Upstream == "" {
		cfg.Upstream = MockUpstream
	}
	api, known := LookupAPI(cfg.Upstream)
	if !known && cfg.Upstream != MockUpstream {
		return nil, fmt.Errorf("create gateway: unknown upstream %q (want %s)", cfg.Upstream, orList(Upstreams()))
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://mock.invalid"
		if known {
			cfg.BaseURL = api.Upstream().BaseURL
		}
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("create gateway: base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.Upstream != MockUpstream && cfg.APIKey == "" && cfg.Transport == nil {
		return nil, fmt.Errorf("create gateway: upstream %s needs an API key", cfg.Upstream)
	}
	if cfg.MaxConnections < 0 {
		return nil, fmt.Errorf("create gateway: max connections %d is negative", cfg.MaxConnections)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.RetryLimit == 0 {
		cfg.RetryLimit = 8
	}
	if cfg.RetryBudget == 0 {
		cfg.RetryBudget = 10 * time.Minute
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = time.Minute
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("create gateway: max body bytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.BudgetUSD < 0 {
		return nil, fmt.Errorf("create gateway: budget %g is negative", cfg.BudgetUSD)
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 4096
	}
	if cfg.CutDrain <= 0 {
		cfg.CutDrain = DefaultCutDrain
	}
	lim := cfg.Limits.withDefaults(cfg.MaxBodyBytes)
	p := StewardPolicy()
	if cfg.Policy != nil {
		p = *cfg.Policy
	}
	if cfg.MaxConnections > 0 {
		p = FixedPolicy(cfg.MaxConnections)
	}
	tr := cfg.Transport
	if tr == nil {
		if cfg.Upstream == MockUpstream {
			tr = HandlerTransport(mockmodel.New())
		} else {
			tr = &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				ForceAttemptHTTP2:     true,
				MaxIdleConns:          1000,
				MaxIdleConnsPerHost:   1000,
				IdleConnTimeout:       90 * time.Second,
				TLSHandshakeTimeout:   10 * time.Second,
				ExpectContinueTimeout: time.Second,
			}
		}
	}
	return &Gateway{
		cfg: cfg, base: base, transport: tryRecorder{tr}, ctl: NewController(p, cfg.Clock), capt: newCapturer(cfg),
		clock: cfg.Clock, rnd: cfg.Rand,
		scrub_: newScrubber(append([]string{cfg.APIKey}, cfg.Secrets...)...),
		limits: lim, conns: newConnLimiter(lim.ConnsPerAddr, lim.Conns), rates: newRateBuckets(lim.BodyRate, cfg.MaxBodyBytes),
		tokens: map[string]*attempt{}, bound: map[string][]netip.Addr{}, attempts: map[string]*attempt{},
	}, nil
}

// Controller returns the gateway's connection controller.
func (g *Gateway) Controller() *Controller { return g.ctl }

// Serve answers sandboxes on ln until ctx ends. It may be called for several
// listeners; the connection caps hold across all of them.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	return g.serve(ctx, ln, false)
}

// ServeProxied is Serve for a listener only the in-container relay reaches:
// every connection starts with a PROXY protocol v1 line naming the sandbox's
// address, which then counts for the per-sandbox caps and token binding. A
// connection without that line is closed.
func (g *Gateway) ServeProxied(ctx context.Context, ln net.Listener) error {
	return g.serve(ctx, ln, true)
}

func (g *Gateway) serve(ctx context.Context, ln net.Listener, proxied bool) error {
	srv := &http.Server{
		Handler: g, BaseContext: func(net.Listener) context.Context { return ctx },
		// A client has this long for its headers, and for its whole request
		// (headers and body) however slowly it trickles: the deadlines are set
		// once per request and reading does not extend them.
		ReadHeaderTimeout: g.limits.ReadHeaderTimeout,
		ReadTimeout:       g.limits.ReadTimeout,
		// Responses may stream for many minutes: instead of one WriteTimeout,
		// every write gets its own deadline (Limits.WriteStall).
		IdleTimeout:    g.limits.IdleTimeout,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	ln = g.conns.wrap(ln, g.limits.ReadHeaderTimeout, proxied)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve gateway: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-errc
		return nil
	}
}

func newToken() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random token: %v", err))
	}
	return "stw-" + hex.EncodeToString(b[:])
}

// Issue makes a token for an attempt. hooks may be nil. Issuing again for
// the same attempt id gives a new token that shares the attempt's usage.
func (g *Gateway) Issue(attemptID string, hooks AttemptHooks) string {
	tok := newToken()
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.attempts[attemptID]
	if a == nil {
		a = &attempt{id: attemptID}
		g.attempts[attemptID] = a
	}
	a.mu.Lock()
	a.hooks = hooks
	a.mu.Unlock()
	g.tokens[tok] = a
	return tok
}

// Revoke ends a token: later requests with it get 401. Its usage stays readable.
func (g *Gateway) Revoke(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.tokens, token)
	delete(g.bound, token)
}

// Bind restricts a token to requests from the given remote addresses (the
// network address of the sandbox it was issued to); from any other address
// it gets 401. Binding again adds to the set (a scorer's own container, a
// retried attempt's new sandbox). An unbound token works from any address
// (local sandboxes, whose processes share the host's loopback).
func (g *Gateway) Bind(token string, addrs ...netip.Addr) error {
	if len(addrs) == 0 {
		return errors.New("bind token: no address given")
	}
	list := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if !a.IsValid() {
			return errors.New("bind token: invalid address")
		}
		list = append(list, a.Unmap())
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tokens[token] == nil {
		return errors.New("bind token: the token is not issued or was revoked")
	}
	g.bound[token] = append(g.bound[token], list...)
	return nil
}

// lookup finds a token's attempt; bad reports a token used from an address
// it is not bound to.
func (g *Gateway) lookup(token, remote string) (a *attempt, bad bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a = g.tokens[token]
	if a == nil {
		return nil, false
	}
	if allowed, ok := g.bound[token]; ok {
		ap, err := netip.ParseAddrPort(remote)
		if err != nil {
			return nil, true
		}
		ip := ap.Addr().Unmap()
		for _, x := range allowed {
			if x == ip {
				return a, false
			}
		}
		return nil, true
	}
	return a, false
}

// find returns the attempt a token or an attempt id names, or nil.
func (g *Gateway) find(key string) *attempt {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.tokens[key]; a != nil {
		return a
	}
	return g.attempts[key]
}

// Usage returns an attempt's usage by token or attempt id.
func (g *Gateway) Usage(key string) (Usage, bool) {
	a := g.find(key)
	if a == nil {
		return Usage{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage, true
}

// Drain waits until none of the attempt's requests (by token or attempt id)
// is in flight, so its usage is final, or ctx ends. Call it after Revoke:
// a request's usage is charged just after its last byte reaches the sandbox.
func (g *Gateway) Drain(ctx context.Context, key string) error {
	a := g.find(key)
	if a == nil {
		return nil
	}
	a.mu.Lock()
	ch := a.idle
	a.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain attempt %s: %w", a.id, ctx.Err())
	}
}

// Totals is the usage of every attempt together.
func (g *Gateway) Totals() Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totals
}

// Spent is the total cost in USD so far (S5: the runner stops new attempts from it).
func (g *Gateway) Spent() float64 { return g.Totals().CostUSD }

// BudgetRefusals is how many requests the hard budget refused so far.
func (g *Gateway) BudgetRefusals() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// reserve holds cost for a request about to go upstream; false when the
// budget cannot cover it with what is spent and held already.
func (g *Gateway) reserve(cost float64) bool {
	if g.cfg.BudgetUSD <= 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.totals.CostUSD+g.reserved+cost > g.cfg.BudgetUSD || g.totals.CostUSD >= g.cfg.BudgetUSD {
		g.refused++
		return false
	}
	g.reserved += cost
	return true
}

func (g *Gateway) unreserve(cost float64) {
	if g.cfg.BudgetUSD <= 0 {
		return
	}
	g.mu.Lock()
	g.reserved -= cost
	if g.reserved < 1e-12 {
		g.reserved = 0
	}
	g.mu.Unlock()
}

// Window returns and resets the per-window signals.
func (g *Gateway) Window() Signals {
	cw := g.ctl.Window()
	g.mu.Lock()
	w := g.win
	g.win.retries, g.win.requests, g.win.errors = 0, 0, 0
	g.mu.Unlock()
	return Signals{
		Episodes: cw.Episodes, RateLimited: cw.RateLimited, Retries: w.retries, Requests: w.requests,
		Errors: w.errors, InFlight: cw.InFlight, PeakInFlight: cw.Peak, Limit: cw.Limit, Ceiling: cw.Ceiling,
		Fixed: g.ctl.Fixed(), Saturated: cw.Saturated, Pushback: cw.Pushback, Need: cw.Need,
	}
}

// History is the connection limit's history with reasons.
func (g *Gateway) History() []LimitChange { return g.ctl.History() }

// SetCeiling sets the most the connection limit may grow to (R3). Fixed mode ignores it.
func (g *Gateway) SetCeiling(n int) { g.ctl.SetCeiling(n) }

// Clamp sets the ceiling to where the limit already fell (R2). Fixed mode ignores it.
func (g *Gateway) Clamp() { g.ctl.Clamp() }

// upstreamFailed counts a call the upstream failed for the attempt.
func (a *attempt) upstreamFailed() {
	a.mu.Lock()
	a.usage.UpstreamFailed++
	a.mu.Unlock()
}

func (g *Gateway) charge(a *attempt, in, out int64, failed bool) {
	cost := g.pricesOf(a).Cost(in, out)
	a.mu.Lock()
	a.usage.InputTokens += in
	a.usage.OutputTokens += out
	a.usage.CostUSD += cost
	a.usage.Requests++
	if failed {
		a.usage.Errors++
	}
	hooks := a.hooks
	a.mu.Unlock()
	g.mu.Lock()
	g.totals.InputTokens += in
	g.totals.OutputTokens += out
	g.totals.CostUSD += cost
	g.totals.Requests++
	if failed {
		g.totals.Errors++
		g.win.errors++
	}
	g.mu.Unlock()
	if hooks != nil && (in > 0 || out > 0) {
		hooks.Usage(in, out, cost)
	}
}

// SetPrices gives an attempt id prices of its own (a model judge's
// graders: scorer.model_graded.prices), used for its spend, its budget
// holds and its transcript; an id without a token yet gets them when
// one is issued.
func (g *Gateway) SetPrices(attemptID string, p Prices) {
	a := g.attemptFor(attemptID)
	a.mu.Lock()
	a.prices = &p
	a.mu.Unlock()
}

// attemptFor is the attempt id's state, made when the id has none yet
// (settings given before its token is issued).
func (g *Gateway) attemptFor(attemptID string) *attempt {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.attempts[attemptID]
	if a == nil {
		a = &attempt{id: attemptID}
		g.attempts[attemptID] = a
	}
	return a
}

// pricesOf are the prices a's calls are charged at.
func (g *Gateway) pricesOf(a *attempt) Prices {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.prices != nil {
		return *a.prices
	}
	return g.cfg.Prices
}

// scrub removes the real key and the secrets from s.
func (g *Gateway) scrub(s string) string { return g.scrub_.String(s) }

func (g *Gateway) scrubBytes(b []byte) []byte { return g.scrub_.Bytes(b) }

func (g *Gateway) logf(format string, args ...any) {
	if g.cfg.Logger == nil {
		return
	}
	line := g.scrub(fmt.Sprintf(format, args...))
	g.logMu.Lock()
	defer g.logMu.Unlock()
	fmt.Fprintf(g.cfg.Logger, "%s gateway: %s\n", g.clock.Now().UTC().Format(time.RFC3339), line)
}

// orList is "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}
