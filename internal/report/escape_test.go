package report

import (
	"regexp"
	"strings"
	"testing"
)

// githubRefs are the references GitHub links by itself after rendering,
// beyond URLs, @mentions and #numbers: "GH-12" (any case) and commit SHAs
// (7 to 40 hex digits between word boundaries). Go's \b is an ASCII word
// boundary, as GitHub's is: a zero-width space is one.
var githubRefs = regexp.MustCompile(`(?i)\bgh-\d+\b|\b[0-9a-f]{7,40}\b`)

// TestMDBreaksGitHubReferences: eval output naming an issue as GH-12 or a
// commit by its SHA (whole, abbreviated, in any case, next to punctuation)
// shows as written but is no reference GitHub would link; words that only
// look like one (a hex run inside a word, six digits) are left alone.
func TestMDBreaksGitHubReferences(t *testing.T) {
	const sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
	in := "fixed in GH-12 and gh-7 (see " + sha + ", 9fceb02, DEADBEEF1234) after Gh-3."
	if got := githubRefs.FindAllString(in, -1); len(got) != 6 {
		t.Fatalf("the pattern finds %q in the raw text, want 6 references", got)
	}
	out := MD(in, 0)
	if refs := githubRefs.FindAllString(out, -1); len(refs) > 0 {
		t.Errorf("MD leaves GitHub references %q in %q", refs, out)
	}
	if shown := strings.ReplaceAll(out, "\u200b", ""); shown != in {
		t.Errorf("MD changed what the reader sees: %q, want %q", shown, in)
	}
	for _, keep := range []string{"x9fceb02d0", "123456", "GH-x", "ghost-12", "v1.2.3"} {
		if got := MD(keep, 0); got != keep {
			t.Errorf("MD(%q) = %q, want it unchanged", keep, got)
		}
	}
}
