package evalset

import (
	"strings"
	"testing"
)

// Issue 23 item 7: a file that is not valid UTF-8 is refused with the line
// and column of the first bad byte (yaml.v3 said only "invalid leading
// UTF-8 octet", with no line), and a JSONL sample whose string holds such a
// byte is refused with its line (encoding/json replaced it with U+FFFD and
// the run went ahead on an input nobody wrote).
func TestInvalidUTF8IsRefusedWithItsLine(t *testing.T) {
	jsonlTask := "tasks:\n  - name: t\n    agent: x\n    samples_file: s.jsonl\n"
	for _, c := range []badCase{
		{name: "eval set", files: yamlOnly(okTask + "    # caf\xe9\n"),
			want: []string{"steward.yaml:6: not valid UTF-8 (byte 0xe9 at column 10)"}},
		{name: "eval set, first line", files: yamlOnly("# \xff\n" + okTask),
			want: []string{"steward.yaml:1: not valid UTF-8 (byte 0xff at column 3)"}},
		{name: "fleet file", files: map[string]string{"steward.yaml": okTask, "_steward.yaml": "max_sandboxes: 4\n# na\xefve\n"},
			want: []string{"_steward.yaml:2: not valid UTF-8 (byte 0xef at column 5)"}},
		{name: "jsonl string", files: map[string]string{"steward.yaml": jsonlTask,
			"s.jsonl": `{"id": "a", "input": "ok", "target": "ok"}` + "\n" + `{"id": "b", "input": "caf` + "\xe9" + `", "target": "x"}` + "\n"},
			want: []string{"s.jsonl:2: not valid UTF-8 (byte 0xe9 at column 26)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := problems(t, writeTree(t, c.files), LoadOptions{})
			if len(got) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d:\n got  %s\n want %s", i, got[i], w)
				}
			}
		})
	}
	// Valid UTF-8 beyond ASCII loads.
	if got := problems(t, writeTree(t, yamlOnly(okTask+"    # café ☕\n")), LoadOptions{}); len(got) != 0 {
		t.Fatalf("valid UTF-8 refused: %v", got)
	}
}
