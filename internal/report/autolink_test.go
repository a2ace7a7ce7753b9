package report

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// links is eval output full of what GitHub links by itself (GFM's extended
// autolinks) and by its own syntax.
const links = "see https://attacker.example/a HTTP://ATTACKER.EXAMPLE/b ftp://attacker.example/c " +
	"www.attacker.example/d WWW.Attacker.Example/e (www.attacker.example) mailto:me@attacker.example " +
	"xmpp:me@attacker.example me@attacker.example <https://attacker.example/f> <me@attacker.example>\n" +
	"next line https://attacker.example/g"

// cmarkGFM renders Markdown the way GitHub does, autolinks included.
func cmarkGFM(t *testing.T, md string) string {
	t.Helper()
	bin, err := exec.LookPath("cmark-gfm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and cmark-gfm is missing: the autolink test must run in CI (apt-get install cmark-gfm)")
		}
		t.Skip("cmark-gfm is not installed (apt-get install cmark-gfm)")
	}
	cmd := exec.Command(bin, "--unsafe", "-e", "autolink", "-e", "table", "-e", "strikethrough", "-e", "tagfilter")
	cmd.Stdin = strings.NewReader(md)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("cmark-gfm: %v: %s", err, errb.String())
	}
	return out.String()
}

var anchor = regexp.MustCompile(`(?i)<a\s[^>]*>`)

// checkInert fails when the rendered HTML links to the attacker anywhere.
func checkInert(t *testing.T, what, html string) {
	t.Helper()
	for _, a := range anchor.FindAllString(html, -1) {
		if strings.Contains(strings.ToLower(a), "attacker") {
			t.Errorf("%s: eval output became a link: %s", what, a)
		}
	}
	if !strings.Contains(html, "attacker") {
		t.Errorf("%s: the eval output is not shown at all", what)
	}
}

func linkReport() *Report {
	r := fixture()
	r.Hold = links
	r.Left = []string{links}
	r.Title = links
	for i := range r.Attempts {
		a := &r.Attempts[i]
		a.Sample, a.Explanation, a.Answer, a.Log = links, links, links, links
		if a.Reason != "" {
			a.Reason = links
		}
	}
	return r
}

// Reports stay inert: no URL, www. address or e-mail in eval output becomes
// a link in the job summary or the PR comment, as GitHub renders them.
func TestReportsHaveNoAutolinks(t *testing.T) {
	// The check itself works: the raw text is linked everywhere.
	if raw := cmarkGFM(t, links); len(anchor.FindAllString(raw, -1)) < 8 {
		t.Fatalf("cmark-gfm linked only %d of the raw links: %s", len(anchor.FindAllString(raw, -1)), raw)
	}
	var b bytes.Buffer
	if err := Markdown(&b, linkReport(), MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	checkInert(t, "summary", cmarkGFM(t, b.String()))
	c := Comment(linkReport(), CommentOptions{SummaryURL: "https://example.test/summary"})
	html := cmarkGFM(t, c)
	checkInert(t, "comment", html)
	if !strings.Contains(html, `href="https://example.test/summary"`) {
		t.Errorf("the comment lost Steward's own link to the summary:\n%s", html)
	}
}
