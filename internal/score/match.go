// Package score is the pure judging vocabulary: how an answer matches its
// targets (scorer.match), how a scorer command's exit status and output
// become a verdict, and how a sample's attempts reduce to its score
// (reduce.go). It runs nothing and touches no sandbox: the supervisor
// (internal/run) executes, this package decides. evalset validates with
// the same vocabulary, so what the eval set may say and what the judge
// understands are one list.
package score

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Match is a scorer.match kind: how an answer is compared with the
// sample's targets (any target matching passes).
type Match string

// The match kinds.
const (
	Exact    Match = "exact"    // equal after trimming (and folding case with ignore_case)
	Includes Match = "includes" // the answer contains the target
	Regex    Match = "regex"    // the target is a regular expression the answer matches
	Numeric  Match = "numeric"  // both parse as numbers that are equal (relative 1e-9)
	// Choice reads the letters a multiple-choice answer picks ("B",
	// "ANSWER: C", "(d)", "A, C") and passes when they are exactly the
	// target's letters (Inspect's choice scorer): the targets together are
	// the set of correct choices, not alternatives.
	Choice Match = "choice"
)

// DefaultMatch is the kind of a task that sets no scorer but has targets.
const DefaultMatch = Exact

// Matches lists every match kind, in the order the docs and errors give them.
var Matches = []Match{Exact, Includes, Regex, Numeric, Choice}

// Valid says whether m is one of Matches.
func (m Match) Valid() bool {
	for _, k := range Matches {
		if m == k {
			return true
		}
	}
	return false
}

// MatchNames are Matches as strings (for enum errors and the schema test).
func MatchNames() []string {
	out := make([]string, len(Matches))
	for i, m := range Matches {
		out[i] = string(m)
	}
	return out
}

// CheckTarget says what is wrong with a target for kind m (nil: nothing),
// so that validation refuses what MatchAnswer could never use.
func CheckTarget(m Match, ignoreCase bool, target string) error {
	switch m {
	case Regex:
		if _, err := regexp.Compile(regexFor(target, ignoreCase)); err != nil {
			return fmt.Errorf("target %q is not a valid regular expression: %v", target, err)
		}
	case Numeric:
		if _, err := strconv.ParseFloat(strings.TrimSpace(target), 64); err != nil {
			return fmt.Errorf("target %q is not a number (scorer.match is numeric)", target)
		}
	case Choice:
		if _, ok := ChoiceLetters(target); !ok {
			return fmt.Errorf("target %q is not a choice letter (A, B, …) or a list of them (scorer.match is choice)", target)
		}
	}
	return nil
}

// ChoiceLetters reads a list of choice letters: "A", "a", "A,C", "A, C",
// "A C" (upper-cased, sorted, without repeats). ok is false for anything
// else.
func ChoiceLetters(s string) ([]string, bool) {
	fields := strings.FieldsFunc(strings.TrimSpace(s), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return nil, false
	}
	seen := map[string]bool{}
	for _, f := range fields {
		if len(f) != 1 || !isLetter(f[0]) {
			return nil, false
		}
		seen[strings.ToUpper(f)] = true
	}
	out := make([]string, 0, len(seen))
	for l := range seen {
		out = append(out, l)
	}
	sort.Strings(out)
	return out, true
}

func isLetter(b byte) bool { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') }

// letterList is one letter, or several joined by commas, "&", "/", "and"
// or spaces ("A, C", "A and C", "A C").
const letterList = `[A-Za-z](?:(?:\s*[,&/]\s*|\s+and\s+|\s+)[A-Za-z])*`

var (
	// "ANSWER: C", "Answer: (b)", "the answer is D.", "Final answer: A, C".
	answerRE = regexp.MustCompile(`(?i)\banswer(?:\s+is)?\s*[:：]?[\s*_"'(\[]*(` + letterList + `)(?:[^A-Za-z]|$)`)
	// An answer that is only letters: "B", "(d)", "B.", "**C**", "A, C".
	bareRE = regexp.MustCompile(`^[\s*_"'(\[]*(` + letterList + `)[\s*_"')\].:]*$`)
	andRE  = regexp.MustCompile(`(?i)\s+and\s+|[&/]`)
)

// ParseChoiceAnswer reads the letters an answer picks: an answer that is
// only letters ("B", "(d)", "A, C", "**C**"), else the last "ANSWER: …"
// (Inspect's format, any case; "the answer is …" too). ok is false when
// the answer names no letter that way.
func ParseChoiceAnswer(answer string) ([]string, bool) {
	a := strings.TrimSpace(answer)
	var got string
	if m := bareRE.FindStringSubmatch(a); m != nil {
		got = m[1]
	} else if ms := answerRE.FindAllStringSubmatch(a, -1); len(ms) > 0 {
		got = ms[len(ms)-1][1]
	} else {
		return nil, false
	}
	return ChoiceLetters(andRE.ReplaceAllString(got, ","))
}

func regexFor(target string, ignoreCase bool) string {
	if ignoreCase {
		return "(?i)" + target
	}
	return target
}

// MatchAnswer compares an answer with targets (any target matching passes)
// and says why; an error is a scorer that cannot judge (no target, a bad
// regular expression, an unknown kind). The empty kind is Exact.
func MatchAnswer(kind Match, ignoreCase bool, answer string, targets []string) (bool, string, error) {
	if len(targets) == 0 {
		return false, "", errors.New("the sample has no target to match")
	}
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if ignoreCase {
			s = strings.ToLower(s)
		}
		return s
	}
	for _, tg := range targets {
		switch kind {
		case "", Exact:
			if norm(answer) == norm(tg) {
				return true, "exact match", nil
			}
		case Includes:
			if strings.Contains(norm(answer), norm(tg)) {
				return true, "answer includes the target", nil
			}
		case Regex:
			re, err := regexp.Compile(regexFor(tg, ignoreCase))
			if err != nil {
				return false, "", fmt.Errorf("target regex %q: %w", tg, err)
			}
			if re.MatchString(answer) {
				return true, "regex match", nil
			}
		case Choice:
			return matchChoice(answer, targets)
		case Numeric:
			a, err1 := strconv.ParseFloat(strings.TrimSpace(strings.ReplaceAll(answer, ",", "")), 64)
			b, err2 := strconv.ParseFloat(strings.TrimSpace(tg), 64)
			if err1 == nil && err2 == nil && numericEqual(a, b) {
				return true, "numeric match", nil
			}
		default:
			return false, "", fmt.Errorf("unknown match %q", kind)
		}
	}
	return false, fmt.Sprintf("answer %q does not match target %q", Truncate(answer, 200), Truncate(targets[0], 200)), nil
}

// matchChoice passes when the answer picks exactly the targets' letters.
func matchChoice(answer string, targets []string) (bool, string, error) {
	want := map[string]bool{}
	for _, tg := range targets {
		ls, ok := ChoiceLetters(tg)
		if !ok {
			return false, "", fmt.Errorf("target %q is not a choice letter", tg)
		}
		for _, l := range ls {
			want[l] = true
		}
	}
	wantS := make([]string, 0, len(want))
	for l := range want {
		wantS = append(wantS, l)
	}
	sort.Strings(wantS)
	got, ok := ParseChoiceAnswer(answer)
	if !ok {
		return false, fmt.Sprintf("no choice letter in the answer %q (want %s)", Truncate(answer, 200), strings.Join(wantS, ", ")), nil
	}
	if strings.Join(got, ",") == strings.Join(wantS, ",") {
		return true, "chose " + strings.Join(got, ", "), nil
	}
	return false, fmt.Sprintf("chose %s, want %s", strings.Join(got, ", "), strings.Join(wantS, ", ")), nil
}

// numericEqual: equal, or within a relative 1e-9 of each other.
func numericEqual(a, b float64) bool {
	return a == b || abs(a-b) <= 1e-9*max(abs(a), abs(b))
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Truncate cuts s to n bytes, marking the cut with "…".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
