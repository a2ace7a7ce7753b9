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

// client builds a fresh API client. A fresh one per call matters after a
// rate-limit wait: go-github remembers the limit and refuses locally until
// its reset by the wall clock, which an injected clock does not move.
func (c *commenter) client() (*github.Client, error) {
	cl := github.NewClient(c.a.env.HTTPClient).WithAuthToken(c.a.in.Token)
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

// call runs one API call, waiting out rate limits a bounded number of times.
func (c *commenter) call(ctx context.Context, what string, op func(*github.Client) (*github.Response, error)) error {
	env := c.a.env
	for attempt := 0; ; attempt++ {
		cl, err := c.client()
		if err != nil {
			return err
		}
		_, err = op(cl)
		if err == nil {
			return nil
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
		if attempt >= env.RateLimitRetries {
			return fmt.Errorf("%s: still rate limited after %d retries: %w", what, attempt, err)
		}
		if wait > env.MaxRateLimitWait {
			return fmt.Errorf("%s: rate limited for %s, longer than the %s this action waits: %w", what, wait.Round(time.Second), env.MaxRateLimitWait, err)
		}
		c.a.gh.Infof("GitHub rate limit on %s: waiting %s before retrying (%d of %d)", what, wait.Round(time.Second), attempt+1, env.RateLimitRetries)
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
// GitHub Actions app): GET /user refuses installation tokens, so this is who
// such a token comments as.
const actionsBot = "github-actions[bot]"

// identity is the login the token comments as: GET /user for a user token or
// a personal access token; the Actions bot for an installation token, which
// GET /user refuses (403).
func (c *commenter) identity(ctx context.Context) (string, error) {
	var login string
	err := c.call(ctx, "read the token's identity", func(cl *github.Client) (*github.Response, error) {
		u, resp, err := cl.Users.Get(ctx, "")
		login = u.GetLogin()
		return resp, err
	})
	if errors.Is(err, errCannotComment) {
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

// upsert finds our comment (written by the token's own identity and starting
// with marker; paginating through all comments) and edits it, or creates it
// when there is none. A comment by anyone else that carries the marker is an
// imitation: it is never edited, and never trusted.
func (c *commenter) upsert(ctx context.Context, marker, body string) (commentURL string, created bool, err error) {
	me, err := c.identity(ctx)
	if err != nil {
		return "", false, err
	}
	var found *github.IssueComment
	imitations := 0
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < 1000; page++ {
		var comments []*github.IssueComment
		var resp *github.Response
		err := c.call(ctx, "list pull request comments", func(cl *github.Client) (*github.Response, error) {
			var err error
			comments, resp, err = cl.Issues.ListComments(ctx, c.owner, c.repo, c.number, opts)
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
		opts.Page = resp.NextPage
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
	err = c.call(ctx, "create the report comment", func(cl *github.Client) (*github.Response, error) {
		var resp *github.Response
		var err error
		out, resp, err = cl.Issues.CreateComment(ctx, c.owner, c.repo, c.number, &github.IssueComment{Body: github.String(body)})
		return resp, err
	})
	return out.GetHTMLURL(), true, err
}
