package fakegithub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
)

const tok = "ghs_test_write"

func setup(t *testing.T) *Server {
	s := New(t)
	s.AddToken(tok, "github-actions[bot]", true)
	s.AddToken("ghs_read", "github-actions[bot]", false)
	s.AddPullRequest("o", "r", 1)
	return s
}

func do(t *testing.T, s *Server, method, path, auth, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("User-Agent", "fakegithub-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Every request GitHub would refuse is refused and recorded.
func TestRejectsWhatGitHubRejects(t *testing.T) {
	s := setup(t)
	id := s.AddComment("o", "r", 1, "github-actions[bot]", "hello")
	long := strings.Repeat("é", CommentLimit+1) // characters, not bytes, count
	cases := []struct {
		name, method, path, auth, body string
		status                         int
	}{
		{"no auth", "GET", "/repos/o/r/issues/1/comments", "", "", 401},
		{"bad scheme", "GET", "/repos/o/r/issues/1/comments", "Basic " + tok, "", 401},
		{"unknown token", "GET", "/repos/o/r/issues/1/comments", "Bearer nope", "", 401},
		{"unknown route", "GET", "/repos/o/r/pulls/1/comments", "Bearer " + tok, "", 404},
		{"wrong method on list", "PUT", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"body":"x"}`, 404},
		{"wrong method on comment", "POST", fmt.Sprintf("/repos/o/r/issues/comments/%d", id), "token " + tok, `{"body":"x"}`, 404},
		{"missing issue", "GET", "/repos/o/r/issues/2/comments", "Bearer " + tok, "", 404},
		{"other repo", "GET", "/repos/o/other/issues/1/comments", "Bearer " + tok, "", 404},
		{"bad json", "POST", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"body":`, 400},
		{"no body field", "POST", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"text":"x"}`, 422},
		{"body not a string", "POST", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"body":3}`, 422},
		{"blank body", "POST", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"body":""}`, 422},
		{"body too long", "POST", "/repos/o/r/issues/1/comments", "Bearer " + tok, `{"body":"` + long + `"}`, 422},
		{"edit too long", "PATCH", fmt.Sprintf("/repos/o/r/issues/comments/%d", id), "Bearer " + tok, `{"body":"` + long + `"}`, 422},
		{"edit missing comment", "PATCH", "/repos/o/r/issues/comments/999999", "Bearer " + tok, `{"body":"x"}`, 404},
		{"edit in another repo", "PATCH", fmt.Sprintf("/repos/o/x/issues/comments/%d", id), "Bearer " + tok, `{"body":"x"}`, 404},
		{"read-only create", "POST", "/repos/o/r/issues/1/comments", "Bearer ghs_read", `{"body":"x"}`, 403},
		{"read-only edit", "PATCH", fmt.Sprintf("/repos/o/r/issues/comments/%d", id), "Bearer ghs_read", `{"body":"x"}`, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, s, c.method, c.path, c.auth, c.body)
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d", resp.StatusCode, c.status)
			}
			rej := s.TakeRejections()
			if len(rej) != 1 || rej[0].Rejected == "" {
				t.Errorf("want one recorded rejection, got %+v", rej)
			}
		})
	}
	if got := s.Comments("o", "r", 1); len(got) != 1 || got[0].Body != "hello" {
		t.Errorf("a rejected request changed state: %+v", got)
	}
	// Reads with a read-only token and both auth schemes are fine.
	for _, auth := range []string{"Bearer ghs_read", "token " + tok} {
		if resp := do(t, s, "GET", "/repos/o/r/issues/1/comments", auth, ""); resp.StatusCode != 200 {
			t.Errorf("%s: status %d", auth, resp.StatusCode)
		}
	}
	if rej := s.Rejections(); len(rej) != 0 {
		t.Errorf("accepted reads recorded as rejections: %+v", rej)
	}
}

func client(t *testing.T, s *Server, token string) *github.Client {
	// go-github sends a retired preview media type when it lists comments;
	// the action sends GitHub's current one, and so does this client.
	c := github.NewClient(&http.Client{Transport: acceptCurrent{}}).WithAuthToken(token)
	u, err := url.Parse(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c
}

// go-github works against the fake: create, paginate, edit.
func TestWithGoGitHub(t *testing.T) {
	s := setup(t)
	for i := 0; i < 45; i++ {
		s.AddComment("o", "r", 1, "someone", fmt.Sprintf("c%d", i))
	}
	c := client(t, s, tok)
	ctx := context.Background()
	made, _, err := c.Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("new")})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 20}}
	pages := 0
	for {
		cs, resp, err := c.Issues.ListComments(ctx, "o", "r", 1, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, cm := range cs {
			bodies = append(bodies, cm.GetBody())
		}
		if resp.NextPage == 0 {
			if resp.LastPage != 0 {
				t.Errorf("last page still has a last link")
			}
			break
		}
		opts.Page = resp.NextPage
	}
	if pages != 3 || len(bodies) != 46 || bodies[45] != "new" || bodies[0] != "c0" {
		t.Errorf("pages %d, %d bodies, last %q", pages, len(bodies), bodies[len(bodies)-1])
	}
	edited, _, err := c.Issues.EditComment(ctx, "o", "r", made.GetID(), &github.IssueComment{Body: github.String("edited")})
	if err != nil || edited.GetBody() != "edited" || edited.GetID() != made.GetID() {
		t.Fatalf("edit: %v %+v", err, edited)
	}
	// per_page above 100 is clamped, as GitHub does.
	opts = &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 500}}
	cs, _, err := c.Issues.ListComments(ctx, "o", "r", 1, opts)
	if err != nil || len(cs) != 46 {
		t.Errorf("per_page 500: %d, %v", len(cs), err)
	}
	// A read-only token's write comes back as GitHub's 403.
	_, _, err = client(t, s, "ghs_read").Issues.CreateComment(ctx, "o", "r", 1, &github.IssueComment{Body: github.String("x")})
	var er *github.ErrorResponse
	if err == nil || !asErr(err, &er) || er.Response.StatusCode != 403 || er.Message != "Resource not accessible by integration" {
		t.Errorf("read-only create: %v", err)
	}
	s.TakeRejections()
}

func asErr[T error](err error, target *T) bool {
	e, ok := err.(T)
	if ok {
		*target = e
	}
	return ok
}

// Injected rate limits come back as go-github's own rate-limit errors.
func TestRateLimitsLookLikeGitHubs(t *testing.T) {
	s := setup(t)
	ctx := context.Background()
	s.InjectRateLimit(Primary, 90*time.Second)
	_, _, err := client(t, s, tok).Issues.ListComments(ctx, "o", "r", 1, nil)
	if rl, ok := err.(*github.RateLimitError); !ok || rl.Rate.Remaining != 0 || time.Until(rl.Rate.Reset.Time) < 80*time.Second {
		t.Errorf("primary: %T %v", err, err)
	}
	s.InjectRateLimit(Secondary, 30*time.Second)
	_, _, err = client(t, s, tok).Issues.ListComments(ctx, "o", "r", 1, nil)
	if ab, ok := err.(*github.AbuseRateLimitError); !ok || ab.RetryAfter == nil || *ab.RetryAfter != 30*time.Second {
		t.Errorf("secondary: %T %v", err, err)
	}
	s.InjectRateLimit(TooMany, 20*time.Second)
	_, _, err = client(t, s, tok).Issues.ListComments(ctx, "o", "r", 1, nil)
	if er, ok := err.(*github.ErrorResponse); !ok || er.Response.StatusCode != 429 || er.Response.Header.Get("Retry-After") != "20" {
		t.Errorf("429: %T %v", err, err)
	}
	if _, _, err = client(t, s, tok).Issues.ListComments(ctx, "o", "r", 1, nil); err != nil {
		t.Errorf("after the injected limits: %v", err)
	}
	n := 0
	for _, r := range s.Requests() {
		if r.RateLimited != "" {
			n++
		}
	}
	if n != 3 || len(s.Rejections()) != 0 {
		t.Errorf("%d rate-limited, %d rejections", n, len(s.Rejections()))
	}
}

// A test whose code makes a request GitHub would reject fails.
func TestUnexpectedRejectionFailsTheTest(t *testing.T) {
	ft := &fakeT{TB: t}
	s := New(ft)
	do(t, s, "GET", "/nope", "", "")
	ft.runCleanups()
	if len(ft.errors) != 1 || !strings.Contains(ft.errors[0], "fake GitHub rejected GET /nope") {
		t.Errorf("errors reported: %q", ft.errors)
	}
}

type fakeT struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, a ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, a...))
}
func (f *fakeT) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// GitHub refuses a request without a User-Agent.
func TestRefusesNoUserAgent(t *testing.T) {
	s := setup(t)
	req, _ := http.NewRequest("GET", s.URL+"/repos/o/r/issues/1/comments", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header["User-Agent"] = []string{""} // the client then sends none
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	if r := s.TakeRejections(); len(r) != 1 || r[0].Rejected != "no User-Agent header" {
		t.Fatalf("rejections %+v", r)
	}
}

// acceptCurrent sends GitHub's current media type.
type acceptCurrent struct{}

func (acceptCurrent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", "application/vnd.github+json")
	return http.DefaultTransport.RoundTrip(r)
}
