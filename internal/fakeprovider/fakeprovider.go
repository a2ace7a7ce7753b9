// Package fakeprovider is a faithful fake model provider for tests and
// benchmarks. It serves the same routes and wire formats as the built-in
// mock upstream (it reuses internal/mockmodel), and adds what a real
// provider does to its callers: it checks the API key, enforces RPM and TPM
// limits with token buckets and answers 429 with Retry-After, sends the
// providers' rate-limit headers, takes time to answer (a latency model), and
// can be told to fail: injected 5xx, dropped connections, slow responses, and
// a spend-limit mode. It counts everything it sees (Stats) so tests can check
// what was sent to it.
//
// It runs in-process (New, Handler, Start) or as its own process
// (cmd/steward-fakeprovider). Given a seed (and a clock.Fake) its behaviour
// is deterministic for a given order of requests.
package fakeprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/mockmodel"
)

// Config sets up a fake provider. The zero value is an unlimited, instant,
// faultless provider that accepts any non-empty API key.
type Config struct {
	// APIKey is the key callers must send: "Authorization: Bearer KEY" on
	// OpenAI routes; "x-api-key: KEY" (or, as anthropic-sdk-go v2 sends it,
	// "Authorization: Bearer KEY") on Anthropic routes. Empty accepts any
	// non-empty key (a missing key is still refused).
	APIKey string

	// RPM and TPM are the requests and tokens (input + output) per minute
	// the provider admits, as continuously refilling token buckets that
	// start full. 0 means unlimited. Change them live with SetLimits.
	RPM, TPM int
	// Interval is how long a stretch the limits are enforced over (0: a
	// minute). Providers that quantize their per-minute limits enforce them
	// over shorter intervals: with RPM 1200 and Interval 1 s the request
	// bucket holds 20, so a burst of 21 is refused although the minute's
	// total is far from 1200. The headers still announce the per-minute
	// limit, and the remaining count scaled to a minute.
	Interval time.Duration

	// BaseLatency is the time to the first byte (time to first token);
	// PerTokenLatency is added for every output token (between stream
	// chunks, or before a non-streaming answer). TimeScale multiplies every
	// latency (0 means 1), so 0.01 runs a realistic model 100 times faster.
	BaseLatency     time.Duration
	PerTokenLatency time.Duration
	TimeScale       float64

	// ErrorRate is the fraction of admitted requests answered with
	// ErrorStatus (default 500) instead of a result.
	ErrorRate   float64
	ErrorStatus int
	// DropRate is the fraction of admitted requests whose connection is
	// closed without an answer (the socket is hijacked and closed).
	// DropAfterTokens > 0 cuts dropped streaming requests after that many
	// output tokens instead, mid-stream.
	DropRate        float64
	DropAfterTokens int
	// SlowRate is the fraction of admitted requests that wait SlowLatency
	// (scaled by TimeScale) more before their first byte.
	SlowRate    float64
	SlowLatency time.Duration

	// SpendLimit makes every generating request fail with 429
	// insufficient_quota and no Retry-After, as a provider does when the
	// account's spend limit is reached. Toggle live with SetSpendLimit.
	SpendLimit bool

	// Seed drives the fault draws and the response ids.
	Seed uint64
	// Clock drives the buckets and the latencies; nil means the real clock.
	Clock clock.Clock
}

// Stats is what the fake provider has seen and done.
type Stats struct {
	Requests     int64 // every request to an API route
	Succeeded    int64 // answered 200
	RateLimited  int64 // 429 from the RPM/TPM buckets
	QuotaRefused int64 // 429 insufficient_quota (spend-limit mode)
	Unauthorized int64 // 401
	BadRequests  int64 // 400/404/405/413
	Injected5xx  int64
	Dropped      int64 // connections closed without (or in the middle of) an answer
	Slowed       int64
	TokensIn     int64 // input tokens of answered requests
	TokensOut    int64 // output tokens actually sent
	// TokensCharged are the tokens the TPM bucket took from admitted
	// requests (input and output, at admission, as the bucket counts
	// them): what the key let through, whether or not the answer was
	// completed (a client that hangs up mid-call still spent them).
	TokensCharged int64
	InFlight      int64 // requests being handled now
	MaxInFlight   int64 // the most requests ever handled at once
	// APIKeys are the distinct keys callers sent (the Bearer token or the
	// x-api-key value), sorted. Authorizations are the distinct raw
	// Authorization header values, sorted.
	APIKeys        []string
	Authorizations []string
	// ByEndpoint counts requests per endpoint ("chat.completions", "messages", …).
	ByEndpoint map[string]int64
}

// Server is a fake model provider.
type Server struct {
	cfg   Config
	clock clock.Clock

	mu         sync.Mutex // guards everything below up to the counters
	lim        *Limiter
	rng        *rand.Rand
	spendLimit bool
	errorRate  float64
	dropRate   float64
	seq        uint64
	keys       map[string]bool
	auths      map[string]bool
	byEndpoint map[string]int64

	requests, succeeded, rateLimited, quota, unauthorized, badRequests       atomic.Int64
	injected, dropped, slowed, tokensIn, tokensOut, charged, inFlight, maxIn atomic.Int64

	srvMu sync.Mutex
	srv   *http.Server
	url   string
}

// New returns a fake provider configured by cfg.
func New(cfg Config) *Server {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.ErrorStatus == 0 {
		cfg.ErrorStatus = http.StatusInternalServerError
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	now := clk.Now()
	return &Server{
		cfg:        cfg,
		clock:      clk,
		lim:        NewLimiter(cfg.RPM, cfg.TPM, cfg.Interval, now),
		rng:        rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5deece66d)),
		spendLimit: cfg.SpendLimit,
		errorRate:  cfg.ErrorRate,
		dropRate:   cfg.DropRate,
		keys:       map[string]bool{},
		auths:      map[string]bool{},
		byEndpoint: map[string]int64{},
	}
}

// SetLimits changes the RPM and TPM limits at once (0: unlimited). What is
// left in each bucket is kept, capped at the new limit.
func (s *Server) SetLimits(rpm, tpm int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lim.SetLimits(rpm, tpm, s.clock.Now())
}

// Limits returns the current RPM and TPM limits.
func (s *Server) Limits() (rpm, tpm int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lim.Limits()
}

// Level returns what the request and token buckets hold now (in the
// interval's units, not scaled to a minute).
func (s *Server) Level() (requests, tokens float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lim.Level(s.clock.Now())
}

// SetSpendLimit turns the spend-limit mode on or off.
func (s *Server) SetSpendLimit(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spendLimit = on
}

// SetFaults changes the injected 5xx and drop rates.
func (s *Server) SetFaults(errorRate, dropRate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errorRate, s.dropRate = errorRate, dropRate
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	keys, auths := slices.Sorted(maps.Keys(s.keys)), slices.Sorted(maps.Keys(s.auths))
	by := make(map[string]int64, len(s.byEndpoint))
	for k, v := range s.byEndpoint {
		by[k] = v
	}
	s.mu.Unlock()
	return Stats{
		Requests: s.requests.Load(), Succeeded: s.succeeded.Load(), RateLimited: s.rateLimited.Load(),
		QuotaRefused: s.quota.Load(), Unauthorized: s.unauthorized.Load(), BadRequests: s.badRequests.Load(),
		Injected5xx: s.injected.Load(), Dropped: s.dropped.Load(), Slowed: s.slowed.Load(),
		TokensIn: s.tokensIn.Load(), TokensOut: s.tokensOut.Load(), TokensCharged: s.charged.Load(),
		InFlight: s.inFlight.Load(), MaxInFlight: s.maxIn.Load(),
		APIKeys: keys, Authorizations: auths, ByEndpoint: by,
	}
}

// ResetStats zeroes the counters and forgets the keys seen (in-flight
// requests stay counted in InFlight).
func (s *Server) ResetStats() {
	s.mu.Lock()
	s.keys, s.auths, s.byEndpoint = map[string]bool{}, map[string]bool{}, map[string]int64{}
	s.mu.Unlock()
	for _, c := range []*atomic.Int64{&s.requests, &s.succeeded, &s.rateLimited, &s.quota, &s.unauthorized,
		&s.badRequests, &s.injected, &s.dropped, &s.slowed, &s.tokensIn, &s.tokensOut, &s.charged} {
		c.Store(0)
	}
	s.maxIn.Store(s.inFlight.Load())
}

// Handler serves the provider's API under /v1, and a small control API
// under /_fake (GET /_fake/stats, POST /_fake/limits {"rpm":N,"tpm":N})
// that is not counted in Stats.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/_fake/", s.control)
	mux.HandleFunc("/", s.serveAPI)
	return mux
}

// Start listens on addr (use "127.0.0.1:0" for a free loopback port),
// serves in the background until ctx ends or Close is called, and returns
// the server's base URL ("http://127.0.0.1:PORT").
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.srvMu.Lock()
	s.srv = srv
	s.url = "http://" + ln.Addr().String()
	s.srvMu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return s.url, nil
}

// URL is the base URL Start returned ("" before Start).
func (s *Server) URL() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.url
}

// Close stops the server started by Start and closes its connections.
func (s *Server) Close() error {
	s.srvMu.Lock()
	srv := s.srv
	s.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Close(); err != nil {
		return fmt.Errorf("close fake provider: %w", err)
	}
	return nil
}

// ---- request handling ----------------------------------------------------

// admission is the outcome of the rate-limit and fault draws for one request.
type admission struct {
	ok        bool
	retry     time.Duration // wait before a retry can succeed; <0: never
	limitedBy string        // "requests" or "tokens"
	drop      bool
	fail      bool
	slow      bool
	id        string
	requestID string
	headers   limitHeaders
}

type limitHeaders struct {
	rpmLimit, tpmLimit         int64
	rpmRemaining, tpmRemaining int64
	rpmReset, tpmReset         time.Duration
	now                        time.Time
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxIn.Load()
		if n <= m || s.maxIn.CompareAndSwap(m, n) {
			break
		}
	}

	api := mockmodel.DetectAPI(r)
	reqID := s.nextRequestID()
	if e := s.authenticate(r, api); e != nil {
		s.unauthorized.Add(1)
		e.Write(w, reqID)
		return
	}
	if api == mockmodel.Anthropic && r.Header.Get("anthropic-version") == "" {
		s.badRequests.Add(1)
		(&mockmodel.Error{Status: http.StatusBadRequest, API: api, Type: "invalid_request_error",
			Message: "anthropic-version: header is required"}).Write(w, reqID)
		return
	}
	call, e := mockmodel.Parse(r)
	if e != nil {
		s.badRequests.Add(1)
		e.Write(w, reqID)
		return
	}
	s.mu.Lock()
	s.byEndpoint[string(call.Endpoint)]++
	s.mu.Unlock()

	if !call.Endpoint.Generates() {
		if err := call.Write(r.Context(), w, mockmodel.Meta{ID: s.responseID(), RequestID: reqID, Now: s.clock.Now()}, nil); err == nil {
			s.succeeded.Add(1)
		}
		return
	}

	ad, quota := s.admit(call)
	ad.requestID = reqID
	if quota {
		s.quota.Add(1)
		quotaError(api).Write(w, reqID)
		return
	}
	ad.headers.write(w.Header(), api)
	if !ad.ok {
		s.rateLimited.Add(1)
		if d, ok := retryAfterFor(api, ad.retry, ad.limitedBy, ad.headers); ok {
			setRetryAfter(w.Header(), d)
		}
		rateLimitError(api, ad).Write(w, reqID)
		return
	}
	if ad.drop && (s.cfg.DropAfterTokens <= 0 || !call.Stream) {
		s.dropped.Add(1)
		drop(w)
		return
	}
	if ad.fail {
		s.injected.Add(1)
		serverError(api, s.cfg.ErrorStatus).Write(w, reqID)
		return
	}
	first := s.scale(s.cfg.BaseLatency)
	if ad.slow {
		s.slowed.Add(1)
		first += s.scale(s.cfg.SlowLatency)
	}
	ctx := r.Context()
	if err := clock.Sleep(ctx, s.clock, first); err != nil {
		return
	}
	sent := 0
	errCut := errors.New("cut mid-stream")
	pace := func(ctx context.Context, tokens int) error {
		if ad.drop && sent >= s.cfg.DropAfterTokens && tokens > 0 {
			return errCut
		}
		sent += tokens
		return clock.Sleep(ctx, s.clock, time.Duration(tokens)*s.scale(s.cfg.PerTokenLatency))
	}
	err := call.Write(ctx, w, mockmodel.Meta{ID: ad.id, RequestID: reqID, Now: s.clock.Now()}, pace)
	s.tokensOut.Add(int64(min(sent, int(call.OutputTokens()))))
	switch {
	case errors.Is(err, errCut):
		s.dropped.Add(1)
		s.tokensIn.Add(call.InputTokens)
		panic(http.ErrAbortHandler) // closes the connection without ending the stream
	case err == nil:
		s.succeeded.Add(1)
		s.tokensIn.Add(call.InputTokens)
	}
}

func (s *Server) scale(d time.Duration) time.Duration {
	return time.Duration(math.Round(float64(d) * s.cfg.TimeScale))
}

func (s *Server) nextRequestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("req_fake%08x%08d", uint32(s.cfg.Seed), s.seq)
}

func (s *Server) responseID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("fake%016x", s.rng.Uint64())
}

// authenticate records the credentials sent and checks the one the API uses.
func (s *Server) authenticate(r *http.Request, api mockmodel.API) *mockmodel.Error {
	auth := r.Header.Get("Authorization")
	xkey := r.Header.Get("x-api-key")
	bearer := ""
	if v, ok := strings.CutPrefix(auth, "Bearer "); ok {
		bearer = strings.TrimSpace(v)
	}
	s.mu.Lock()
	if auth != "" {
		s.auths[auth] = true
	}
	if bearer != "" {
		s.keys[bearer] = true
	}
	if xkey != "" {
		s.keys[xkey] = true
	}
	s.mu.Unlock()
	// OpenAI takes the key as a Bearer token only. Anthropic takes
	// x-api-key, and also a Bearer token (anthropic-sdk-go v2 sends its API
	// key that way); x-api-key wins when both are sent.
	sent := bearer
	if api == mockmodel.Anthropic && xkey != "" {
		sent = xkey
	}
	if sent == "" || (s.cfg.APIKey != "" && sent != s.cfg.APIKey) {
		return mockmodel.AuthError(api, sent)
	}
	return nil
}

// admit runs the spend-limit check, the buckets and the fault draws for a
// generating call. quota is true when the spend limit refused it.
func (s *Server) admit(c *mockmodel.Call) (ad admission, quota bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spendLimit {
		return ad, true
	}
	now := s.clock.Now()
	cost := c.InputTokens + c.OutputTokens()
	d := s.lim.Admit(now, float64(cost))
	ad.ok, ad.retry, ad.limitedBy, ad.headers = d.OK, d.RetryAfter, d.LimitedBy, d.headers
	if ad.ok {
		s.charged.Add(int64(cost))
		// Draw all three in a fixed order so the sequence of outcomes is a
		// function of the seed and the order of admissions.
		d, f, sl := s.rng.Float64(), s.rng.Float64(), s.rng.Float64()
		ad.drop = d < s.dropRate
		ad.fail = !ad.drop && f < s.errorRate
		ad.slow = sl < s.cfg.SlowRate
		ad.id = fmt.Sprintf("fake%016x", s.rng.Uint64())
	}
	return ad, false
}

// write sets the provider's rate-limit headers (only for limits that are set).
func (h limitHeaders) write(hd http.Header, api mockmodel.API) {
	if api == mockmodel.Anthropic {
		at := func(d time.Duration) string { return h.now.Add(d).UTC().Format(time.RFC3339) }
		if h.rpmLimit > 0 {
			hd.Set("anthropic-ratelimit-requests-limit", strconv.FormatInt(h.rpmLimit, 10))
			hd.Set("anthropic-ratelimit-requests-remaining", strconv.FormatInt(h.rpmRemaining, 10))
			hd.Set("anthropic-ratelimit-requests-reset", at(h.rpmReset))
		}
		if h.tpmLimit > 0 {
			for _, kind := range []string{"tokens", "input-tokens", "output-tokens"} {
				hd.Set("anthropic-ratelimit-"+kind+"-limit", strconv.FormatInt(h.tpmLimit, 10))
				hd.Set("anthropic-ratelimit-"+kind+"-remaining", strconv.FormatInt(h.tpmRemaining, 10))
				hd.Set("anthropic-ratelimit-"+kind+"-reset", at(h.tpmReset))
			}
		}
		return
	}
	if h.rpmLimit > 0 {
		hd.Set("x-ratelimit-limit-requests", strconv.FormatInt(h.rpmLimit, 10))
		hd.Set("x-ratelimit-remaining-requests", strconv.FormatInt(h.rpmRemaining, 10))
		hd.Set("x-ratelimit-reset-requests", openaiDuration(h.rpmReset))
	}
	if h.tpmLimit > 0 {
		hd.Set("x-ratelimit-limit-tokens", strconv.FormatInt(h.tpmLimit, 10))
		hd.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(h.tpmRemaining, 10))
		hd.Set("x-ratelimit-reset-tokens", openaiDuration(h.tpmReset))
	}
}

// openaiDuration formats a reset time as OpenAI does: "1s", "6m0s", "120ms".
func openaiDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Second {
		return strconv.FormatInt(int64(math.Ceil(float64(d)/float64(time.Millisecond))), 10) + "ms"
	}
	return d.Round(time.Millisecond).String()
}

// retryAfterFor is the Retry-After a refusal carries (false: none): the
// wait until the request would pass; for one larger than its bucket,
// which never can, OpenAI's "Request too large" carries none, while
// Anthropic's 429 is worded and sent as congestion's, Retry-After
// included (here the time until the bucket is full): only the request's
// size against the announced limit tells it apart.
func retryAfterFor(api mockmodel.API, retry time.Duration, limitedBy string, h limitHeaders) (time.Duration, bool) {
	switch {
	case retry >= 0:
		return retry, true
	case api != mockmodel.Anthropic:
		return 0, false
	case limitedBy == "requests":
		return h.rpmReset, true
	}
	return h.tpmReset, true
}

// setRetryAfter sets retry-after (whole seconds, rounded up, at least 1)
// and retry-after-ms.
func setRetryAfter(h http.Header, d time.Duration) {
	secs := int64(math.Ceil(d.Seconds()))
	if secs < 1 {
		secs = 1
	}
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	if ms < 1 {
		ms = 1
	}
	h.Set("retry-after", strconv.FormatInt(secs, 10))
	h.Set("retry-after-ms", strconv.FormatInt(ms, 10))
}

func rateLimitError(api mockmodel.API, ad admission) *mockmodel.Error {
	h := ad.headers
	limit, unit, short := h.rpmLimit, "requests", "RPM"
	if ad.limitedBy == "tokens" {
		limit, unit, short = h.tpmLimit, "tokens", "TPM"
	}
	if api == mockmodel.Anthropic {
		// The same words whether a wait lets the request through or it
		// is larger than the whole limit, as Anthropic's; its one token
		// bucket is announced as the input tokens a minute too.
		if unit == "tokens" {
			unit = "input tokens"
		}
		msg := fmt.Sprintf("This request would exceed the rate limit for your organization (org-fake) of %s %s per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.", grouped(limit), unit)
		return &mockmodel.Error{Status: http.StatusTooManyRequests, API: api, Type: "rate_limit_error", Message: msg}
	}
	var msg string
	if ad.retry < 0 {
		msg = fmt.Sprintf("Request too large for mock in organization org-fake on %s per min (%s): Limit %d. The input or output tokens must be reduced in order to run successfully.", unit, short, limit)
	} else {
		msg = fmt.Sprintf("Rate limit reached for mock in organization org-fake on %s per min (%s): Limit %d. Please try again in %s.", unit, short, limit, openaiDuration(ad.retry))
	}
	return &mockmodel.Error{Status: http.StatusTooManyRequests, API: api, Type: unit, Code: "rate_limit_exceeded", Message: msg}
}

// grouped writes n with thousands separators ("20,000"), as Anthropic's
// messages do.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func quotaError(api mockmodel.API) *mockmodel.Error {
	if api == mockmodel.Anthropic {
		return &mockmodel.Error{Status: http.StatusTooManyRequests, API: api, Type: "rate_limit_error",
			Message: "This request would exceed your account's monthly spend limit. Raise the limit in the console to continue."}
	}
	return &mockmodel.Error{Status: http.StatusTooManyRequests, API: api, Type: "insufficient_quota", Code: "insufficient_quota",
		Message: "You exceeded your current quota, please check your plan and billing details."}
}

func serverError(api mockmodel.API, status int) *mockmodel.Error {
	if api == mockmodel.Anthropic {
		if status == 529 || status == http.StatusServiceUnavailable {
			return &mockmodel.Error{Status: status, API: api, Type: "overloaded_error", Message: "Overloaded"}
		}
		return &mockmodel.Error{Status: status, API: api, Type: "api_error", Message: "Internal server error"}
	}
	if status == http.StatusServiceUnavailable {
		return &mockmodel.Error{Status: status, API: api, Type: "server_error", Message: "The engine is currently overloaded, please try again later."}
	}
	return &mockmodel.Error{Status: status, API: api, Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"}
}

// drop closes the connection without a response.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset, as a dropped upstream connection often does
	}
	_ = conn.Close()
}

// ---- control API ---------------------------------------------------------

func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKey != "" {
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if bearer != s.cfg.APIKey && r.Header.Get("x-api-key") != s.cfg.APIKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized"}` + "\n"))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/_fake/stats" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(s.Stats())
	case r.URL.Path == "/_fake/stats/reset" && r.Method == http.MethodPost:
		s.ResetStats()
		_, _ = w.Write([]byte("{}\n"))
	case r.URL.Path == "/_fake/limits" && r.Method == http.MethodPost:
		var body struct {
			RPM   *int  `json:"rpm"`
			TPM   *int  `json:"tpm"`
			Spend *bool `json:"spend_limit"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad json: " + err.Error()})
			return
		}
		rpm, tpm := s.Limits()
		if body.RPM != nil {
			rpm = *body.RPM
		}
		if body.TPM != nil {
			tpm = *body.TPM
		}
		s.SetLimits(rpm, tpm)
		if body.Spend != nil {
			s.SetSpendLimit(*body.Spend)
		}
		rpm, tpm = s.Limits()
		_ = json.NewEncoder(w).Encode(map[string]int{"rpm": rpm, "tpm": tpm})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not found"}` + "\n"))
	}
}
