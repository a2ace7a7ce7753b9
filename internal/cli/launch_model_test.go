package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// --model and -M replace the YAML exactly: a launch that writes them in the
// file and one that gives them as flags have the same fingerprints, so the
// second carries everything the first judged. Bad values exit 2.
func TestLaunchModelFlags(t *testing.T) {
	dir := t.TempDir()
	body := func(model string) string {
		return "name: m\n" + model + "tasks:\n  - name: echo\n    sandbox: {provider: local}\n    exclusive: false\n    agent: 'printf \"%s\" \"$STEWARD_INPUT\"'\n    samples:\n      - {id: a, input: x, target: x}\n      - {id: b, input: y, target: y}\n"
	}
	written := writeFile(t, filepath.Join(dir, "written", "steward.yaml"), body("model:\n  name: gpt-test\n  settings:\n    temperature: 0.2\n    max_tokens: 64\n"))
	flagged := writeFile(t, filepath.Join(dir, "flagged", "steward.yaml"), body("model: {settings: {max_tokens: 1}}\n"))
	rec := filepath.Join(dir, "rec")
	s := newStreams()
	s.must(t, ExitOK, "launch", "--record", rec, written)
	s.must(t, ExitOK, "launch", "--record", rec, "--model", "gpt-test", "-M", "temperature=0.2", "--model-setting", "max_tokens=64", flagged)
	if !strings.Contains(s.stderr.String(), "2 carried") {
		t.Errorf("the flags did not fingerprint as the YAML does:\n%s", s.stderr.String())
	}
	s.must(t, ExitOK, "launch", "--dry", "--record", rec, "--model", "gpt-other", flagged)
	if strings.Contains(s.stdout.String()+s.stderr.String(), "2 carried") {
		t.Errorf("another model carried:\n%s", s.stdout.String())
	}
	s.must(t, ExitBadInput, "launch", "--dry", "--upstream", "openia", "-M", "temperature", "--model-base-url", "ftp://x", flagged)
	for _, want := range []string{`flag: --upstream: unknown upstream "openia" (did you mean "openai"?)`, `flag: -M: "temperature" is not key=value`, `flag: --model-base-url: "ftp://x" is not an http(s) URL`} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, s.stderr.String())
		}
	}
}

// An Inspect user's multiple-choice CSV, with its own column names, runs
// unchanged: its choices are lettered in the input, the letter answer is
// judged by match: choice, and ${VAR} fills in the eval set.
func TestLaunchMultipleChoiceCSV(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mmlu.csv"), "\ufeffqid,question,A,B,C,D,answer,subject\n"+
		"m1,\"What is 2+2?\",3,4,5,6,B,math\n"+
		"m2,\"Which is a colour?\",dog,\"red, or crimson\",cat,sky,B,words\n"+
		"m3,\"Pick the fruit\",apple,stone,iron,sand,C,food\n")
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), `tasks:
  - name: ${TASK_NAME:-mmlu}
    sandbox: {provider: local}
    exclusive: false
    agent: 'case "$STEWARD_INPUT" in *"B) 4"*|*"B) red"*) echo "ANSWER: B";; *) echo "(a)";; esac'
    samples_file: mmlu.csv
    fields: {id: qid, input: question, target: answer, choices: [A, B, C, D], metadata: [subject]}
`)
	s := newStreams()
	s.env["TASK_NAME"] = "mmlu-ci"
	s.must(t, ExitFailed, "launch", "--record", filepath.Join(dir, "rec"), "--json", set)
	out := s.stdout.String()
	for _, want := range []string{`"name": "mmlu-ci"`, `"sample": "m1"`, `"chose B"`, `"chose A, want C"`} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %s:\n%s", want, out)
		}
	}
}
