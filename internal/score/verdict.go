package score

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The scorer command's contract (docs/evalset.md, "The scorer's contract"):
//
//   - exit 0 passes, exit 1 fails: the conventional test runner's statuses;
//   - a JSON last line of stdout, {"passed": bool, "score": number,
//     "explanation": string}, refines the verdict of an exit 0 or 1 (it may
//     fail an attempt whose scorer exited 0, never pass one whose scorer
//     exited 1: the line may be the agent's own output the scorer showed);
//   - anything else is no verdict: exit 2 or more (a missing script, a
//     syntax error, 126/127 command not found, 128+N killed by signal N), a
//     timeout, running out of memory, or a last line that claims to be a
//     verdict but is malformed. The attempt is then errored, never failed,
//     and so never carried as judged.

// Exit statuses of a scorer command that are verdicts.
const (
	ExitPass = 0
	ExitFail = 1
)

// Run is what a scorer command did, as the judge needs it (no sandbox types).
type Run struct {
	Exit      int
	Stdout    []byte
	Stderr    []byte
	TimedOut  bool
	OOMKilled bool
}

// Verdict is a judged attempt's outcome.
type Verdict struct {
	Passed      bool
	Score       float64
	Explanation string
}

// NoVerdict is a scorer that did not judge: the attempt is errored, with
// Reason (which carries the scorer's output tail) as its reason.
type NoVerdict struct{ Reason string }

func (e *NoVerdict) Error() string { return e.Reason }

// TailBytes is how much of each stream a reason keeps.
const TailBytes = 300

// Command turns a scorer command's run into a verdict, or a *NoVerdict.
// timeout names the bound a timed-out scorer hit (for its reason).
func Command(r Run, timeout string) (Verdict, error) {
	out := OutputTail(r.Stdout, r.Stderr, TailBytes)
	switch {
	case r.TimedOut:
		return Verdict{}, &NoVerdict{"scorer timed out (" + timeout + "): no verdict" + sep(out)}
	case r.OOMKilled:
		return Verdict{}, &NoVerdict{"scorer ran out of memory: no verdict" + sep(out)}
	case r.Exit != ExitPass && r.Exit != ExitFail:
		return Verdict{}, &NoVerdict{fmt.Sprintf("scorer exited %d, which is no verdict (0 passes, 1 fails; %s)%s", r.Exit, exitMeaning(r.Exit), sep(out))}
	}
	v, ok, err := verdictLine(r.Stdout)
	if err != nil {
		return Verdict{}, &NoVerdict{fmt.Sprintf("scorer exited %d but its last line is a malformed verdict (%v)%s", r.Exit, err, sep(out))}
	}
	if !ok {
		if r.Exit == ExitPass {
			return Verdict{Passed: true, Score: 1}, nil
		}
		return Verdict{Explanation: "scorer exited 1" + sep(out)}, nil
	}
	passed := r.Exit == ExitPass
	if v.Passed != nil {
		passed = *v.Passed
	}
	if passed && r.Exit != ExitPass {
		// The line may be the agent's own output (a scorer that shows it
		// before checking it): a verdict can fail an attempt whose scorer
		// exited 0, never pass one whose scorer failed.
		return Verdict{Explanation: fmt.Sprintf("scorer exited %d (its last line says passed: the exit status wins)", r.Exit)}, nil
	}
	s := 0.0
	if passed {
		s = 1
	}
	if v.Score != nil {
		s = *v.Score
	}
	return Verdict{Passed: passed, Score: s, Explanation: v.Explanation}, nil
}

type verdictJSON struct {
	Passed      *bool    `json:"passed"`
	Score       *float64 `json:"score"`
	Explanation string   `json:"explanation"`
}

// verdictLine reads the last line of stdout as a JSON verdict. ok is false
// when it is none (not a JSON object, or one without "passed" and "score":
// any output of the agent's the scorer showed). err is a line that names
// "passed" or "score" but with values of the wrong type.
func verdictLine(stdout []byte) (v verdictJSON, ok bool, err error) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(last, "{") {
		return v, false, nil
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(last), &keys) != nil {
		return v, false, nil
	}
	_, hasP := keys["passed"]
	_, hasS := keys["score"]
	if !hasP && !hasS {
		return v, false, nil
	}
	if err := json.Unmarshal([]byte(last), &v); err != nil {
		return v, false, fmt.Errorf("want {\"passed\": bool, \"score\": number, \"explanation\": string}: %v", err)
	}
	if v.Passed == nil && v.Score == nil {
		return v, false, nil // both null
	}
	return v, true, nil
}

// exitMeaning says what a non-verdict exit status usually is.
func exitMeaning(code int) string {
	switch {
	case code == 126:
		return "126: the command was not executable"
	case code == 127:
		return "127: command not found"
	case code > 128 && code < 160:
		return fmt.Sprintf("%d: killed by signal %d", code, code-128)
	case code < 0:
		return "killed by a signal"
	}
	return "any other status is the scorer's own error"
}

func sep(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// OutputTail is the useful end of a command's stdout and stderr for a
// reason: each stream's last n bytes, named, "" when both are empty.
func OutputTail(stdout, stderr []byte, n int) string {
	var parts []string
	if s := Tail(stdout, n); s != "" {
		parts = append(parts, "stdout: "+s)
	}
	if s := Tail(stderr, n); s != "" {
		parts = append(parts, "stderr: "+s)
	}
	return strings.Join(parts, "; ")
}

// Tail is the last n bytes of b, trimmed, a cut marked with "…".
func Tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++ // never cut a character in two
		}
		s = "…" + s[i:]
	}
	return s
}
