// Package fakegithub is a fake of the part of GitHub's API that the action
// uses (issue comments, GET /user, GraphQL's viewer), served on loopback for
// tests. It is strict: every request GitHub would reject (unknown route or
// method, missing or bad credentials, a read-only token writing, bad JSON, an
// over-long body, a comment that does not exist, a GraphQL query it does not
// know) or that GitHub has retired (a preview media type in Accept) is
// answered the way GitHub answers it AND
// recorded as a rejection, and the test that made it fails at cleanup unless
// it took the rejections itself with TakeRejections.
package fakegithub

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// CommentLimit is GitHub's limit on a comment body, in characters.
const CommentLimit = 65536

// APIVersion is the REST API version GitHub accepts (go-github sends it).
const APIVersion = "2022-11-28"

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Token  string // the credential presented, "" when none
	Body   string
	Status int
	// Rejected says why GitHub would have refused this request; "" when it
	// was accepted (or deliberately answered with a rate limit).
	Rejected string
	// RateLimited is set when the fake answered with an injected rate limit.
	RateLimited string
}

// Comment is an issue comment held by the fake.
type Comment struct {
	ID        int64
	Owner     string
	Repo      string
	Issue     int
	Body      string
	User      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RateLimit kinds for InjectRateLimit.
const (
	// Primary answers 403 with x-ratelimit-remaining: 0 and a reset time.
	Primary = "primary"
	// Secondary answers 403 with the secondary-rate-limit documentation URL
	// and Retry-After.
	Secondary = "secondary"
	// TooMany answers 429 with Retry-After.
	TooMany = "429"
)

type token struct {
	user  string
	write bool
}

type repoKey struct{ owner, repo string }

// Server is the fake API. Its fields are guarded by mu.
type Server struct {
	URL string

	t   testing.TB
	srv *httptest.Server

	mu         sync.Mutex
	tokens     map[string]token
	issues     map[repoKey]map[int]bool
	comments   []*Comment
	nextID     int64
	requests   []Request
	rejections []Request
	limits     []injected
	failures   []failure
	now        func() time.Time
}

// failure is an injected server error: status, and whether the request is
// carried out before the error is answered (a create that GitHub made but
// failed to answer).
type failure struct {
	method string
	status int
	commit bool
}

type injected struct {
	kind  string
	after time.Duration // Retry-After / time to reset
}

// New starts a fake on loopback; it is closed, and its rejections reported
// as test failures, when the test ends.
func New(t testing.TB) *Server { return NewAt(t, "") }

// NewAt is New listening on addr ("" for loopback): a test that runs the
// action in a container serves the fake on the Docker bridge's gateway
// address, which the container reaches as a runner's container reaches
// GitHub.
func NewAt(t testing.TB, addr string) *Server {
	s := &Server{
		t:      t,
		tokens: map[string]token{},
		issues: map[repoKey]map[int]bool{},
		nextID: 1000,
		now:    time.Now,
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("fake GitHub: listen %s: %v", addr, err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.srv.Close()
		for _, r := range s.Rejections() {
			t.Errorf("fake GitHub rejected %s %s (status %d): %s", r.Method, r.Path, r.Status, r.Rejected)
		}
	})
	return s
}

// AddToken makes tok a valid credential for user; write says whether it may
// create and edit comments (a fork's pull_request token may not). As on
// GitHub, an installation token (the Actions token, "ghs_…") cannot read
// GET /user (403); any other token reads its user there.
func (s *Server) AddToken(tok, user string, write bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[tok] = token{user: user, write: write}
}

// AddAppToken makes tok (it must start "ghs_", as installation tokens do) a
// GitHub App's installation token: it comments as "<slug>[bot]", GET /user
// refuses it with 403 (GitHub's own body), and GraphQL's viewer names it.
func (s *Server) AddAppToken(tok, slug string, write bool) {
	if !strings.HasPrefix(tok, "ghs_") {
		s.t.Fatalf("fake GitHub: an installation token starts ghs_, not %q", tok)
	}
	s.AddToken(tok, slug+"[bot]", write)
}

// InjectServerError answers the next request that route matches ("" any;
// "GET" any GET; "POST /comments" a POST whose path ends so; each request
// takes the first injected failure that matches it) with
// status (a 5xx) and GitHub's error body; with commit the request is carried
// out first (a comment created, then the answer lost). Calls queue up.
func (s *Server) InjectServerError(route string, status int, commit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, failure{method: route, status: status, commit: commit})
}

// AddPullRequest makes owner/repo#number exist.
func (s *Server) AddPullRequest(owner, repo string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := repoKey{owner, repo}
	if s.issues[k] == nil {
		s.issues[k] = map[int]bool{}
	}
	s.issues[k][number] = true
}

// AddComment seeds a comment (as if posted earlier) and returns its id.
func (s *Server) AddComment(owner, repo string, issue int, user, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	now := s.now()
	s.comments = append(s.comments, &Comment{ID: s.nextID, Owner: owner, Repo: repo, Issue: issue, Body: body, User: user, CreatedAt: now, UpdatedAt: now})
	return s.nextID
}

// InjectRateLimit answers the next request with a rate limit of the given
// kind, lasting after (the Retry-After or time to the reset). Calls queue up.
func (s *Server) InjectRateLimit(kind string, after time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, injected{kind: kind, after: after})
}

// Comments returns copies of the comments on owner/repo#issue, oldest first.
func (s *Server) Comments(owner, repo string, issue int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.Owner == owner && c.Repo == repo && c.Issue == issue {
			out = append(out, *c)
		}
	}
	return out
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Rejections returns the requests GitHub would have refused.
func (s *Server) Rejections() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.rejections...)
}

// TakeRejections returns and clears the rejections, for tests that provoke
// them on purpose.
func (s *Server) TakeRejections() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rejections
	s.rejections = nil
	return r
}

var (
	listCreateRe = regexp.MustCompile(`^/repos/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/issues/([0-9]+)/comments$`)
	editRe       = regexp.MustCompile(`^/repos/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/issues/comments/([0-9]+)$`)
)

type apiError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	rec := Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(), Body: string(body)}

	s.mu.Lock()
	defer s.mu.Unlock()
	finish := func(status int, v any, rejected string) {
		rec.Status = status
		rec.Rejected = rejected
		s.requests = append(s.requests, rec)
		if rejected != "" {
			s.rejections = append(s.rejections, rec)
		}
		s.writeJSON(w, status, v)
	}
	reject := func(status int, msg, why string) {
		finish(status, apiError{Message: msg, DocumentationURL: "https://docs.github.com/rest", Status: strconv.Itoa(status)}, why)
	}

	// GitHub refuses requests without a User-Agent.
	if req.Header.Get("User-Agent") == "" {
		reject(http.StatusForbidden, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).", "no User-Agent header")
		return
	}
	// Credentials: "Bearer <tok>" or "token <tok>".
	auth := req.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(auth, " ")
	rec.Token = tok
	if auth == "" {
		reject(http.StatusUnauthorized, "Requires authentication", "no Authorization header")
		return
	}
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") {
		reject(http.StatusUnauthorized, "Bad credentials", "Authorization scheme "+strconv.Quote(scheme)+" is neither Bearer nor token")
		return
	}
	who, ok := s.tokens[tok]
	if !ok {
		reject(http.StatusUnauthorized, "Bad credentials", "unknown token")
		return
	}
	if v := req.Header.Get("X-GitHub-Api-Version"); v != "" && v != APIVersion {
		reject(http.StatusBadRequest, "Unsupported 'X-GitHub-Api-Version' header", "unsupported API version "+v)
		return
	}

	// Injected rate limits answer before routing, as GitHub's do.
	if len(s.limits) > 0 {
		l := s.limits[0]
		s.limits = s.limits[1:]
		rec.RateLimited = l.kind
		s.rateLimit(w, l, &rec)
		return
	}
	// Preview media types are retired: the REST API's media type is
	// application/vnd.github+json (go-github still sends the reactions
	// preview when it lists comments).
	// GitHub still answers such a request (it ignores a graduated preview),
	// so the fake does too, and records it as a request not to make.
	for _, acc := range req.Header.Values("Accept") {
		if strings.Contains(acc, "-preview") {
			r := rec
			r.Rejected = "a retired preview media type in Accept: " + acc
			s.rejections = append(s.rejections, r)
		}
	}
	fi := -1
	for i, f := range s.failures {
		m, suffix, _ := strings.Cut(f.method, " ")
		if f.method == "" || m == req.Method && strings.HasSuffix(req.URL.Path, suffix) {
			fi = i
			break
		}
	}
	if fi >= 0 {
		f := s.failures[fi]
		s.failures = append(s.failures[:fi:fi], s.failures[fi+1:]...)
		if f.commit {
			n := len(s.requests)
			s.route(httptest.NewRecorder(), req, body, tok, who, &Request{}, func(int, any, string) {}, func(int, string, string) {})
			s.requests = s.requests[:n] // recorded below, with the error answered
		}
		finish(f.status, apiError{Message: "Server Error"}, "")
		return
	}
	s.route(w, req, body, tok, who, &rec, finish, reject)
}

// route answers an authenticated request.
func (s *Server) route(w http.ResponseWriter, req *http.Request, body []byte, tok string, who token, recp *Request,
	finish func(int, any, string), reject func(int, string, string)) {
	rec := *recp
	if req.URL.Path == "/graphql" || req.URL.Path == "/api/graphql" {
		if req.Method != http.MethodPost {
			reject(http.StatusNotFound, "Not Found", "method "+req.Method+" not allowed on /graphql")
			return
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(body, &q); err != nil || q.Query == "" {
			reject(http.StatusBadRequest, "Problems parsing JSON", "a GraphQL request without a query")
			return
		}
		// The one query the action sends: the token's own login. GraphQL
		// answers it for installation tokens too ("<slug>[bot]").
		norm := strings.Join(strings.Fields(strings.NewReplacer("{", " { ", "}", " } ").Replace(q.Query)), " ")
		if norm != "query { viewer { login } }" && norm != "{ viewer { login } }" {
			reject(http.StatusBadRequest, "the fake GitHub answers only the viewer query", "unknown GraphQL query: "+q.Query)
			return
		}
		finish(http.StatusOK, map[string]any{"data": map[string]any{"viewer": map[string]any{"login": who.user}}}, "")
		return
	}

	if req.URL.Path == "/user" {
		if req.Method != http.MethodGet {
			reject(http.StatusNotFound, "Not Found", "method "+req.Method+" not allowed on /user")
			return
		}
		if strings.HasPrefix(tok, "ghs_") {
			// GitHub refuses this one to installation tokens; callers are
			// expected to ask and fall back, so it is not a test failure.
			finish(http.StatusForbidden, apiError{Message: "Resource not accessible by integration", DocumentationURL: "https://docs.github.com/rest/users/users#get-the-authenticated-user", Status: "403"}, "")
			return
		}
		finish(http.StatusOK, map[string]any{"login": who.user, "id": 1, "type": userType(who.user)}, "")
		return
	}
	if m := listCreateRe.FindStringSubmatch(req.URL.Path); m != nil {
		owner, repo := m[1], m[2]
		n, _ := strconv.Atoi(m[3])
		if !s.issues[repoKey{owner, repo}][n] {
			reject(http.StatusNotFound, "Not Found", fmt.Sprintf("issue %s/%s#%d does not exist", owner, repo, n))
			return
		}
		switch req.Method {
		case http.MethodGet:
			s.list(w, req, owner, repo, n, &rec)
			return
		case http.MethodPost:
			if !who.write {
				reject(http.StatusForbidden, "Resource not accessible by integration", "a read-only token tried to create a comment")
				return
			}
			text, why := commentBody(body)
			if why != "" {
				status := http.StatusUnprocessableEntity
				if strings.HasPrefix(why, "Problems parsing JSON") {
					status = http.StatusBadRequest
				}
				reject(status, why, why)
				return
			}
			s.nextID++
			now := s.now()
			c := &Comment{ID: s.nextID, Owner: owner, Repo: repo, Issue: n, Body: text, User: who.user, CreatedAt: now, UpdatedAt: now}
			s.comments = append(s.comments, c)
			rec.Status = http.StatusCreated
			s.requests = append(s.requests, rec)
			s.writeJSON(w, http.StatusCreated, s.commentJSON(c))
			return
		default:
			reject(http.StatusNotFound, "Not Found", "method "+req.Method+" not allowed on "+req.URL.Path)
			return
		}
	}
	if m := editRe.FindStringSubmatch(req.URL.Path); m != nil {
		owner, repo := m[1], m[2]
		id, _ := strconv.ParseInt(m[3], 10, 64)
		var c *Comment
		for _, x := range s.comments {
			if x.ID == id && x.Owner == owner && x.Repo == repo {
				c = x
			}
		}
		switch req.Method {
		case http.MethodPatch:
		case http.MethodGet:
			if c == nil {
				reject(http.StatusNotFound, "Not Found", fmt.Sprintf("comment %d does not exist in %s/%s", id, owner, repo))
				return
			}
			finish(http.StatusOK, s.commentJSON(c), "")
			return
		default:
			reject(http.StatusNotFound, "Not Found", "method "+req.Method+" not allowed on "+req.URL.Path)
			return
		}
		if c == nil {
			reject(http.StatusNotFound, "Not Found", fmt.Sprintf("comment %d does not exist in %s/%s", id, owner, repo))
			return
		}
		if !who.write {
			reject(http.StatusForbidden, "Resource not accessible by integration", "a read-only token tried to edit a comment")
			return
		}
		text, why := commentBody(body)
		if why != "" {
			status := http.StatusUnprocessableEntity
			if strings.HasPrefix(why, "Problems parsing JSON") {
				status = http.StatusBadRequest
			}
			reject(status, why, why)
			return
		}
		c.Body = text
		c.UpdatedAt = s.now()
		finish(http.StatusOK, s.commentJSON(c), "")
		return
	}
	reject(http.StatusNotFound, "Not Found", "no such route: "+req.Method+" "+req.URL.Path)
}

// commentBody checks a create/edit payload as GitHub does.
func commentBody(body []byte) (string, string) {
	var payload map[string]any
	if err := json.Unmarshal(body, &payload); err != nil {
		return "", "Problems parsing JSON"
	}
	raw, ok := payload["body"]
	if !ok {
		return "", "Invalid request. \"body\" wasn't supplied."
	}
	text, ok := raw.(string)
	if !ok {
		return "", "Invalid request. For 'properties/body', it is not a string."
	}
	if text == "" {
		return "", "Validation Failed: body cannot be blank"
	}
	if n := utf8.RuneCountInString(text); n > CommentLimit {
		return "", fmt.Sprintf("Validation Failed: body is too long (maximum is %d characters, got %d)", CommentLimit, n)
	}
	return text, ""
}

func (s *Server) list(w http.ResponseWriter, req *http.Request, owner, repo string, n int, rec *Request) {
	q := req.URL.Query()
	perPage, page := 30, 1
	if v := q.Get("per_page"); v != "" {
		if p, err := strconv.Atoi(v); err == nil && p > 0 {
			perPage = min(p, 100)
		}
	}
	if v := q.Get("page"); v != "" {
		if p, err := strconv.Atoi(v); err == nil && p > 0 {
			page = p
		}
	}
	var all []*Comment
	for _, c := range s.comments {
		if c.Owner == owner && c.Repo == repo && c.Issue == n {
			all = append(all, c)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	last := (len(all) + perPage - 1) / perPage
	if last == 0 {
		last = 1
	}
	from := (page - 1) * perPage
	out := []any{}
	for i := from; i < len(all) && i < from+perPage; i++ {
		out = append(out, s.commentJSON(all[i]))
	}
	link := func(p int, rel string) string {
		u := *req.URL
		u.Scheme, u.Host = "http", req.Host
		v := u.Query()
		v.Set("page", strconv.Itoa(p))
		v.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = v.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"), link(1, "first"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	rec.Status = http.StatusOK
	s.requests = append(s.requests, *rec)
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) rateLimit(w http.ResponseWriter, l injected, rec *Request) {
	secs := int(l.after / time.Second)
	if secs < 1 {
		secs = 1
	}
	h := w.Header()
	var status int
	var body apiError
	switch l.kind {
	case Primary:
		status = http.StatusForbidden
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(s.now().Add(time.Duration(secs)*time.Second).Unix(), 10))
		body = apiError{Message: "API rate limit exceeded for installation.", DocumentationURL: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"}
	case Secondary:
		status = http.StatusForbidden
		h.Set("Retry-After", strconv.Itoa(secs))
		body = apiError{Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", DocumentationURL: "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}
	default:
		status = http.StatusTooManyRequests
		h.Set("Retry-After", strconv.Itoa(secs))
		body = apiError{Message: "Too Many Requests", DocumentationURL: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}
	}
	rec.Status = status
	s.requests = append(s.requests, *rec)
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) commentJSON(c *Comment) map[string]any {
	return map[string]any{
		"id":         c.ID,
		"node_id":    "IC_" + strconv.FormatInt(c.ID, 10),
		"url":        fmt.Sprintf("%s/repos/%s/%s/issues/comments/%d", s.URL, c.Owner, c.Repo, c.ID),
		"html_url":   fmt.Sprintf("https://github.com/%s/%s/pull/%d#issuecomment-%d", c.Owner, c.Repo, c.Issue, c.ID),
		"issue_url":  fmt.Sprintf("%s/repos/%s/%s/issues/%d", s.URL, c.Owner, c.Repo, c.Issue),
		"body":       c.Body,
		"user":       map[string]any{"login": c.User, "type": userType(c.User)},
		"created_at": c.CreatedAt.UTC().Format(time.RFC3339),
		"updated_at": c.UpdatedAt.UTC().Format(time.RFC3339),
	}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-GitHub-Api-Version-Selected", APIVersion)
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(5000-len(s.requests)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.now().Add(time.Hour).Unix(), 10))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func userType(login string) string {
	if strings.HasSuffix(login, "[bot]") {
		return "Bot"
	}
	return "User"
}
