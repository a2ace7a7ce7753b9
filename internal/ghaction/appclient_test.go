package ghaction_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/report"
)

// A GitHub App's installation token comments as "<slug>[bot]": GET /user
// refuses it (403, GitHub's body), GraphQL's viewer names it, and the second
// run edits the first run's comment instead of posting another (issue 23
// item 9). The Actions bot's comment carrying the marker is not the App's.
func TestAppTokenEditsItsOwnComment(t *testing.T) {
	f := newFake(t)
	const appTok, slug = "ghs_appInstallationTok42", "steward-evals-ci"
	f.AddAppToken(appTok, slug, true)
	marker := report.CommentMarker(fixedReport(2))
	bots := f.AddComment(owner, repo, prNumber, "github-actions[bot]", marker+"\nanother bot's")
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(2) }, code: ghaction.ExitFailed}
	for run := 1; run <= 2; run++ {
		e := newActionEnv(t, f.URL, appTok)
		if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != ghaction.ExitFailed {
			t.Fatalf("run %d: exit %d\n%s", run, code, e.stdout.String())
		}
		if run == 2 && !strings.Contains(e.stdout.String(), "Updated the report comment") {
			t.Errorf("run 2 did not edit its comment:\n%s", e.stdout.String())
		}
	}
	var mine []int64
	for _, c := range markerComments(f) {
		if c.ID == bots {
			if !strings.HasSuffix(c.Body, "another bot's") {
				t.Errorf("the Actions bot's comment was edited")
			}
			continue
		}
		if c.User != slug+"[bot]" {
			t.Errorf("comment %d by %s, want %s[bot]", c.ID, c.User, slug)
		}
		mine = append(mine, c.ID)
	}
	if len(mine) != 1 {
		t.Fatalf("the App's report comments: %v, want one (created, then edited)", mine)
	}
	var users, creates, edits int
	for _, r := range f.Requests() {
		switch {
		case r.Path == "/user":
			users++
			if r.Status != http.StatusForbidden {
				t.Errorf("GET /user with an installation token answered %d, want 403", r.Status)
			}
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/comments"):
			creates++
		case r.Method == http.MethodPatch:
			edits++
		}
	}
	if users != 2 || creates != 1 || edits != 1 {
		t.Errorf("GET /user %d, creates %d, edits %d; want 2, 1, 1", users, creates, edits)
	}
}

// The comment list sends GitHub's current media type, not go-github's retired
// reactions preview (the fake records a preview as a request not to make).
func TestCommentCallsSendCurrentMediaType(t *testing.T) {
	f := newFake(t)
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.stdout.String())
	}
	if rej := f.TakeRejections(); len(rej) != 0 {
		t.Fatalf("requests GitHub would not want: %+v", rej)
	}
	if len(markerComments(f)) != 1 {
		t.Fatal("no comment")
	}
}

// GitHub's 5xx are retried with backoff on the action's clock, a bounded
// number of times; a create GitHub made but answered 502 is found on the next
// look and edited, not made twice.
func TestGitHubServerErrorsAreRetried(t *testing.T) {
	f := newFake(t)
	f.InjectServerError("GET /user", http.StatusBadGateway, false)             // retried
	f.InjectServerError("POST /graphql", http.StatusBadGateway, false)         // GraphQL's viewer: retried
	f.InjectServerError("GET /comments", http.StatusServiceUnavailable, false) // the list: retried
	f.InjectServerError("POST /comments", http.StatusBadGateway, true)         // the create: made, answer lost
	e := newActionEnv(t, f.URL, writeTok)
	stub := &stubLaunch{rep: func() *report.Report { return fixedReport(4) }}
	if code := ghaction.Run(context.Background(), e.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.stdout.String())
	}
	if cs := markerComments(f); len(cs) != 1 {
		t.Fatalf("%d report comments after a lost create, want 1\n%s", len(cs), e.stdout.String())
	}
	want := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	if got := e.clock.Waits(); len(got) != len(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if !strings.Contains(e.stdout.String(), "Updated the report comment") {
		t.Errorf("the lost create was not found and edited:\n%s", e.stdout.String())
	}

	// Bounded: GitHub down for good gives up after three retries, and the
	// step still succeeds, saying why there is no comment.
	f2 := newFake(t)
	for i := 0; i < 10; i++ {
		f2.InjectServerError("", http.StatusInternalServerError, false)
	}
	e2 := newActionEnv(t, f2.URL, writeTok)
	if code := ghaction.Run(context.Background(), e2.env(), stub.launch); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := e2.clock.Waits(); len(got) != 3 || got[0] != 2*time.Second || got[1] != 4*time.Second || got[2] != 8*time.Second {
		t.Errorf("waits %v, want 2s 4s 8s", got)
	}
	if s := e2.read("GITHUB_STEP_SUMMARY"); !strings.Contains(s, "server error") {
		t.Errorf("the summary does not say GitHub failed:\n%s", s)
	}
}
