package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/sandbox"
)

// TestCopyInReplacesPlantedLinks: an agent (root in its sandbox) that
// replaced the input files Steward writes before each attempt
// (/opt/steward/input.txt, input.json: reused sandboxes get them again)
// with links to a file of its choosing, or to a file the next command
// trusts, does not make the next CopyIn write through them: the link is
// replaced by the file, and what it pointed at is untouched. Steward
// reads nothing back from that directory.
func TestCopyInReplacesPlantedLinks(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	sb := mustCreate(t, r, spec(t, "links"))
	ctx := context.Background()
	dir := sb.StewardDir()
	if err := sb.CopyIn(ctx, []sandbox.File{{Path: dir + "/input.txt", Data: []byte("first"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	// The hostile agent: links in place of the input files, to a file it
	// made and to the workdir's answer file.
	if res := mustExec(t, sb, `echo orig > /tmp/target && echo answer > answer.txt && rm -f `+dir+`/input.txt && ln -s /tmp/target `+dir+`/input.txt && ln -s "$PWD/answer.txt" `+dir+`/input.json`); res.ExitCode != 0 {
		t.Fatalf("plant: %+v", res)
	}
	files := []sandbox.File{
		{Path: dir + "/input.txt", Data: []byte("second"), Mode: 0o644},
		{Path: dir + "/input.json", Data: []byte(`"second"`), Mode: 0o644},
	}
	if err := sb.CopyIn(ctx, files); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, sb, `for f in `+dir+`/input.txt `+dir+`/input.json; do [ -L "$f" ] && echo "$f is a link"; cat "$f"; echo; done; cat /tmp/target answer.txt`)
	want := "second\n\"second\"\norig\nanswer\n"
	if got := string(res.Stdout); got != want || res.ExitCode != 0 {
		t.Fatalf("after CopyIn over planted links: %q (exit %d), want %q", got, res.ExitCode, want)
	}
	if strings.Contains(string(res.Stdout), "is a link") {
		t.Fatal("a planted link survived CopyIn")
	}
}
