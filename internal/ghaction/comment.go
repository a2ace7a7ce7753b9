package ghaction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/report"
)

// errCannotComment marks a token that may not comment (a fork's read-only
// pull_request token answers 403, or 404 when it cannot see the repository).
var errCannotComment = errors.New("the token cannot comment on this pull request")

// pullRequestNumber finds the pull request to comment on: the pr-number input,
// else the event payload of a pull_request, pull_request_target or
// workflow_run event. 0 when there is none.
func (a *action) pullRequestNumber() (int, error) {
	if a.in.PRNumber > 0 {
		return a.in.PRNumber, nil
	}
	event := a.env.Getenv("GITHUB_EVENT_NAME")
	switch event {
	case "pull_request", "pull_request_target", "workflow_run":
	default:
		return 0, nil
	}
	path := a.env.Getenv("GITHUB_EVENT_PATH")
	if path == "" {
		return 0, fmt.Errorf("read event: GITHUB_EVENT_PATH is not set for a %s event", event)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read event: %w", err)
	}
	var payload struct {
		Number      int `json:"number"`
		PullRequest struct {
			Number int `json:"number"`
		} `json:"pull_request"`
		WorkflowRun struct {
			PullRequests []struct {
				Number int `json:"number"`
			} `json:"pull_requests"`
		} `json:"workflow_run"`
	}
	if err := json.Unmarshal(data, &payload); err != nil {
		return 0, fmt.Errorf("parse event %s: %w", path, err)
	}
	switch {
	case payload.PullRequest.Number > 0:
		return payload.PullRequest.Number, nil
	case payload.Number > 0 && event != "workflow_run":
		return payload.Number, nil
	case len(payload.WorkflowRun.PullRequests) > 0:
		return payload.WorkflowRun.PullRequests[0].Number, nil
	}
	return 0, nil
}

// comment posts or edits the sticky comment when asked to and possible. It
// returns the comment's URL and, when no comment was posted although one was
// asked for, a note for the summary. It never fails the run.
func (a *action) comment(ctx context.Context, rep *report.Report, body string) (commentURL, note string) {
	gh := a.gh
	if !a.in.Comment {
		return "", ""
	}
	number, err := a.pullRequestNumber()
	if err != nil {
		gh.Warningf("%s", report.Plain(err.Error(), 1000))
		return "", "_No pull request comment: " + report.MD(err.Error(), 300) + "._"
	}
	if number == 0 {
		gh.Infof("Not a pull request event (%s): no comment posted.", report.Plain(a.env.Getenv("GITHUB_EVENT_NAME"), 50))
		return "", ""
	}
	owner, repo, ok := strings.Cut(a.env.Getenv("GITHUB_REPOSITORY"), "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		gh.Warningf("GITHUB_REPOSITORY is not owner/repo: no comment posted")
		return "", "_No pull request comment: GITHUB_REPOSITORY is not set._"
	}
	if a.in.Token == "" {
		gh.Warningf("No github-token: no pull request comment posted")
		return "", "_No pull request comment: the action was given no `github-token`._"
	}
	gh.Group(fmt.Sprintf("Steward: pull request comment on #%d", number))
	defer gh.EndGroup()
	c := &commenter{a: a, owner: owner, repo: repo, number: number}
	u, created, err := c.upsert(ctx, report.CommentMarker(rep), body)
	switch {
	case errors.Is(err, errCannotComment):
		gh.Warningf("Steward could not comment on pull request #%d: the token is read-only (a pull request from a fork gets one). "+
			"The results are in the job summary; to comment on fork pull requests use the workflow_run reporter (docs/action.md).", number)
		return "", fmt.Sprintf("_No pull request comment: the token cannot write to pull request #%d "+
			"(a pull request from a fork gets a read-only token). See the fork-safe workflow in Steward's docs/action.md._", number)
	case err != nil:
		gh.Warningf("Steward could not comment on pull request #%d: %s", number, report.Plain(err.Error(), 1000))
		return "", fmt.Sprintf("_No pull request comment on #%d: %s._", number, report.MD(err.Error(), 300))
	case created:
		gh.Infof("Created the report comment on #%d: %s", number, u)
	default:
		gh.Infof("Updated the report comment on #%d: %s", number, u)
	}
	return u, ""
}

type commenter struct {
	a      *action
	owner  string
	repo   string
	number int
}

// mediaType is the Accept header of every API call: GitHub's current media
// type. go-github sends the retired reactions preview
// ("application/vnd.github.squirrel-girl-preview") when it lists comments.
const mediaType = "application/vnd.github+json"

// acceptTransport sets the Accept header of every request.
type acceptTransport struct{ base http.RoundTripper }

func (t acceptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept", mediaType)
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// client builds a fresh API client. A fresh one per call matters after a
// rate-limit wait: go-github remembers the limit and refuses locally until
// its reset by the wall clock, which an injected clock does not move.
func (c *commenter) client() (*github.Client, error) {
	hc := *c.a.env.HTTPClient
	hc.Transport = acceptTransport{base: hc.Transport}
	cl := github.NewClient(&hc).WithAuthToken(c.a.in.Token)
	api := c.a.env.Getenv("GITHUB_API_URL")
	if api == "" {
		return cl, nil
	}
	u, err := url.Parse(strings.TrimSuffix(api, "/") + "/")
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("parse GITHUB_API_URL %q: not an http(s) URL", api)
	}
	cl.BaseURL = u
	return cl, nil
}

// errServer marks GitHub's own failure (a 5xx) that outlasted the retries,
// or, for a call that is not retried (a create), its first one.
var errServer = errors.New("GitHub answered a server error")

// serverBackoff is the wait before retry n (from 0) after a GitHub 5xx:
// 2 s, 4 s, 8 s, … on the action's clock.
func serverBackoff(n int) time.Duration { return (2 * time.Second) << min(n, 5) }

// serverError says whether err is GitHub's own failure (5xx).
func serverError(err error) (int, bool) {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode >= 500 {
		return er.Response.StatusCode, true
	}
	return 0, false
}

// call runs one API call, waiting out rate limits and GitHub's 5xx a bounded
// number of times (RateLimitRetries each). An idempotent call is retried after
// a 5xx; a create is not (GitHub may have made the comment before failing):
// the caller looks again first.
func (c *commenter) call(ctx context.Context, what string, op func(*github.Client) (*github.Response, error)) error {
	return c.callRetry(ctx, what, true, op)
}

func (c *commenter) callRetry(ctx context.Context, what string, retry5xx bool, op func(*github.Client) (*github.Response, error)) error {
	env := c.a.env
	servers := 0
	for attempt := 0; ; attempt++ {
		cl, err := c.client()
		if err != nil {
			return err
		}
		_, err = op(cl)
		if err == nil {
			return nil
		}
		if code, ok := serverError(err); ok {
			if !retry5xx || servers >= env.RateLimitRetries {
				return fmt.Errorf("%s: %w (%d) after %d retries: %v", what, errServer, code, servers, err)
			}
			wait := serverBackoff(servers)
			servers++
			c.a.gh.Infof("GitHub answered %d on %s: retrying in %s (%d of %d)", code, what, wait, servers, env.RateLimitRetries)
			if err := clock.Sleep(ctx, env.Clock, wait); err != nil {
				return fmt.Errorf("%s: wait out a server error: %w", what, err)
			}
			continue
		}
		wait, limited := rateLimitWait(err, env.Clock.Now())
		if !limited {
			var er *github.ErrorResponse
			if errors.As(err, &er) && er.Response != nil &&
				(er.Response.StatusCode == http.StatusForbidden || er.Response.StatusCode == http.StatusNotFound) {
				return fmt.Errorf("%s: %w (%s)", what, errCannotComment, er.Message)
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt-servers >= env.RateLimitRetries {
			return fmt.Errorf("%s: still rate limited after %d retries: %w", what, attempt-servers, err)
		}
		if wait > env.MaxRateLimitWait {
			return fmt.Errorf("%s: rate limited for %s, longer than the %s this action waits: %w", what, wait.Round(time.Second), env.MaxRateLimitWait, err)
		}
		c.a.gh.Infof("GitHub rate limit on %s: waiting %s before retrying (%d of %d)", what, wait.Round(time.Second), attempt-servers+1, env.RateLimitRetries)
		if err := clock.Sleep(ctx, env.Clock, wait); err != nil {
			return fmt.Errorf("%s: wait out rate limit: %w", what, err)
		}
	}
}

// rateLimitWait says whether err is a rate limit and how long to wait.
func rateLimitWait(err error, now time.Time) (time.Duration, bool) {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		wait := rl.Rate.Reset.Time.Sub(now) + time.Second
		if wait < time.Second {
			wait = time.Second
		}
		return wait, true
	}
	var ab *github.AbuseRateLimitError
	if errors.As(err, &ab) {
		if ab.RetryAfter != nil && *ab.RetryAfter > 0 {
			return *ab.RetryAfter, true
		}
		return time.Minute, true
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusTooManyRequests {
		if s, err := strconv.Atoi(er.Response.Header.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second, true
		}
		return time.Minute, true
	}
	return 0, false
}

// actionsBot is the login of the Actions token (an installation token of the
// GitHub Actions app): the identity assumed when neither GET /user nor
// GraphQL's viewer names the token's own.
const actionsBot = "github-actions[bot]"

// identity is the login the token comments as. GET /user names it for a user
// token or a personal access token; an installation token (the Actions
// token, or a GitHub App's, "ghs_…") is refused there with 403, and
// GraphQL's viewer names it instead: "github-actions[bot]" for the Actions
// token, "<app slug>[bot]" for an App's (issue 23 item 9: assuming the
// Actions bot for an App token made its own comments look like imitations,
// and every run posted a new one).
func (c *commenter) identity(ctx context.Context) (string, error) {
	var login string
	err := c.call(ctx, "read the token's identity", func(cl *github.Client) (*github.Response, error) {
		u, resp, err := cl.Users.Get(ctx, "")
		login = u.GetLogin()
		return resp, err
	})
	if errors.Is(err, errCannotComment) {
		viewer, verr := c.viewer(ctx)
		if verr == nil {
			return viewer, nil
		}
		c.a.gh.Infof("GET /user refused the token (an installation token) and GraphQL's viewer did not name it (%s): taking it for %s",
			report.Plain(c.a.relText(verr.Error()), 300), actionsBot)
		return actionsBot, nil
	}
	if err != nil {
		return "", err
	}
	if login == "" {
		return "", errors.New("read the token's identity: GitHub answered no login")
	}
	return login, nil
}

// viewerQuery asks GraphQL for the token's own login; it answers for
// installation tokens too.
const viewerQuery = "query { viewer { login } }"

// graphqlURL is GraphQL's endpoint: GITHUB_GRAPHQL_URL (the runner sets it),
// else beside GITHUB_API_URL (GitHub Enterprise Server: /api/v3 → /api/graphql).
func (c *commenter) graphqlURL() string {
	if u := c.a.env.Getenv("GITHUB_GRAPHQL_URL"); u != "" {
		return u
	}
	api := strings.TrimSuffix(c.a.env.Getenv("GITHUB_API_URL"), "/")
	if api == "" {
		return "https://api.github.com/graphql"
	}
	if base, ok := strings.CutSuffix(api, "/api/v3"); ok {
		return base + "/api/graphql"
	}
	return api + "/graphql"
}

// viewer reads the token's login from GraphQL's viewer.
func (c *commenter) viewer(ctx context.Context) (string, error) {
	var out struct {
		Data struct {
			Viewer struct {
				Login string `json:"login"`
			} `json:"viewer"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	err := c.call(ctx, "read the token's identity (GraphQL viewer)", func(cl *github.Client) (*github.Response, error) {
		req, err := cl.NewRequest(http.MethodPost, c.graphqlURL(), map[string]string{"query": viewerQuery})
		if err != nil {
			return nil, err
		}
		return cl.Do(ctx, req, &out)
	})
	if err != nil {
		return "", err
	}
	if len(out.Errors) > 0 {
		return "", fmt.Errorf("GraphQL: %s", out.Errors[0].Message)
	}
	if out.Data.Viewer.Login == "" {
		return "", errors.New("GraphQL's viewer has no login")
	}
	return out.Data.Viewer.Login, nil
}

// upsert finds our comment (written by the token's own identity and starting
// with marker; paginating through all comments) and edits it, or creates it
// when there is none. A comment by anyone else that carries the marker is an
// imitation: it is never edited, and never trusted. A create GitHub answered
// with a 5xx may have been made: the comments are read again before the next
// try, which edits it when it is there (bounded, with the same backoff).
func (c *commenter) upsert(ctx context.Context, marker, body string) (commentURL string, created bool, err error) {
	me, err := c.identity(ctx)
	if err != nil {
		return "", false, err
	}
	for try := 0; ; try++ {
		commentURL, created, err = c.upsertOnce(ctx, me, marker, body)
		if !errors.Is(err, errServer) || !created || try >= c.a.env.RateLimitRetries {
			return commentURL, created, err
		}
		wait := serverBackoff(try)
		c.a.gh.Infof("Creating the report comment failed on GitHub's side: looking again in %s (%d of %d)", wait, try+1, c.a.env.RateLimitRetries)
		if err := clock.Sleep(ctx, c.a.env.Clock, wait); err != nil {
			return "", false, fmt.Errorf("create the report comment: wait out a server error: %w", err)
		}
	}
}

func (c *commenter) upsertOnce(ctx context.Context, me, marker, body string) (commentURL string, created bool, err error) {
	var found *github.IssueComment
	imitations := 0
	for page := 1; page <= 1000; page++ {
		var comments []*github.IssueComment
		var resp *github.Response
		err := c.call(ctx, "list pull request comments", func(cl *github.Client) (*github.Response, error) {
			u := fmt.Sprintf("repos/%s/%s/issues/%d/comments?per_page=100", url.PathEscape(c.owner), url.PathEscape(c.repo), c.number)
			if page > 1 {
				u += "&page=" + strconv.Itoa(page)
			}
			req, err := cl.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				return nil, err
			}
			comments = nil
			resp, err = cl.Do(ctx, req, &comments)
			return resp, err
		})
		if err != nil {
			return "", false, err
		}
		for _, cm := range comments {
			if !strings.HasPrefix(cm.GetBody(), marker) {
				continue
			}
			if !strings.EqualFold(cm.GetUser().GetLogin(), me) {
				imitations++
				continue
			}
			if found == nil {
				found = cm
			}
		}
		if found != nil || resp == nil || resp.NextPage == 0 {
			break
		}
		page = resp.NextPage - 1
	}
	if imitations > 0 {
		c.a.gh.Infof("Ignored %d comment(s) carrying Steward's marker that %s did not write", imitations, report.Plain(me, 100))
	}
	var out *github.IssueComment
	if found != nil {
		err = c.call(ctx, "edit the report comment", func(cl *github.Client) (*github.Response, error) {
			var resp *github.Response
			var err error
			out, resp, err = cl.Issues.EditComment(ctx, c.owner, c.repo, found.GetID(), &github.IssueComment{Body: github.String(body)})
			return resp, err
		})
		return out.GetHTMLURL(), false, err
	}
	err = c.callRetry(ctx, "create the report comment", false, func(cl *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		out, resp, err = cl.Issues.CreateComment(ctx, c.owner, c.repo, c.number, &github.IssueComment{Body: github.String(body)})
		return resp, err
	})
	return out.GetHTMLURL(), true, err
}
