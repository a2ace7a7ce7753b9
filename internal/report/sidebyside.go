package report

import (
	"strings"
	"unicode"
)

// SamplePair is one sample on both sides of a comparison: each side's
// attempts (their answers and statuses) and the diff of the first
// attempt's answers, for the HTML viewer's side by side.
type SamplePair struct {
	Task, Sample string
	Base, Head   []AttemptRow
	// Changed: the two sides' scores or answers differ.
	Changed bool
	// Diff is base's first answer against head's (word by word).
	Diff []DiffOp
}

// DiffOp is one run of a diff: "=" in both, "-" only in base, "+" only in head.
type DiffOp struct {
	Op   string `json:"op"`
	Text string `json:"text"`
}

// diffCells bounds the word diff's table (base words × head words); past
// it the two answers are shown as replaced whole.
const diffCells = 4 << 20

// SideBySide pairs head's and base's attempts sample by sample (head's
// order, then samples only base has), changed samples first.
func SideBySide(head, base *Report) []SamplePair {
	type k struct{ t, s string }
	idx := map[k]int{}
	var out []SamplePair
	add := func(a AttemptRow, isHead bool) {
		key := k{a.Task, a.Sample}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, SamplePair{Task: a.Task, Sample: a.Sample})
		}
		if isHead {
			out[i].Head = append(out[i].Head, a)
		} else {
			out[i].Base = append(out[i].Base, a)
		}
	}
	for _, a := range head.Attempts {
		add(a, true)
	}
	baseRun := ""
	if len(base.RunIDs) > 0 {
		baseRun = base.RunIDs[0]
	}
	for _, a := range base.Attempts {
		// The base's own run only (not the evidence added from older runs).
		if baseRun != "" && a.Run != "" && a.Run != baseRun {
			continue
		}
		add(a, false)
	}
	for i := range out {
		p := &out[i]
		var ba, ha string
		if len(p.Base) > 0 {
			ba = p.Base[0].Answer
		}
		if len(p.Head) > 0 {
			ha = p.Head[0].Answer
		}
		p.Diff = WordDiff(ba, ha)
		p.Changed = ba != ha || len(p.Base) == 0 || len(p.Head) == 0 || meanScore(p.Base) != meanScore(p.Head) || statuses(p.Base) != statuses(p.Head)
	}
	// Changed samples first, each group in discovery order.
	var changed, same []SamplePair
	for _, p := range out {
		if p.Changed {
			changed = append(changed, p)
		} else {
			same = append(same, p)
		}
	}
	return append(changed, same...)
}

func statuses(as []AttemptRow) string {
	var b strings.Builder
	for _, a := range as {
		b.WriteString(string(a.Status) + " ")
	}
	return b.String()
}

func meanScore(as []AttemptRow) float64 {
	var s float64
	var n int
	for _, a := range as {
		if a.Score != nil {
			s += *a.Score
			n++
		}
	}
	if n == 0 {
		return -1
	}
	return s / float64(n)
}

// WordDiff diffs a against b by words, merging adjacent runs of one kind.
func WordDiff(a, b string) []DiffOp {
	if a == b {
		return nil // nothing to show: the answers are the same
	}
	x, y := words(a), words(b)
	if len(x)*len(y) > diffCells {
		return merge([]DiffOp{{"-", a}, {"+", b}})
	}
	// lcs[i][j] = LCS length of x[i:], y[j:].
	n, m := len(x), len(y)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []DiffOp
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			ops = append(ops, DiffOp{"=", x[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, DiffOp{"-", x[i]})
			i++
		default:
			ops = append(ops, DiffOp{"+", y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, DiffOp{"-", x[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, DiffOp{"+", y[j]})
	}
	return merge(ops)
}

func words(s string) []string {
	// Tokens: runs of letters and digits, runs of whitespace, and every
	// other character on its own (so "6," is "6" then ",").
	class := func(r rune) int {
		switch {
		case unicode.IsSpace(r):
			return 0
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			return 1
		}
		return 2
	}
	var out []string
	start, prev := 0, -1
	for i, r := range s {
		c := class(r)
		if prev >= 0 && (c != prev || c == 2) {
			out = append(out, s[start:i])
			start = i
		}
		prev = c
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func merge(ops []DiffOp) []DiffOp {
	var out []DiffOp
	for _, o := range ops {
		if o.Text == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Op == o.Op {
			out[n-1].Text += o.Text
			continue
		}
		out = append(out, o)
	}
	return out
}

// diffText is the diff as plain text for tests: [-gone-]{+new+}.
func diffText(ops []DiffOp) string {
	var b strings.Builder
	for _, o := range ops {
		switch o.Op {
		case "-":
			b.WriteString("[-" + o.Text + "-]")
		case "+":
			b.WriteString("{+" + o.Text + "+}")
		default:
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// htmlPairs bounds the side by side on one page: every changed sample up
// to it, then unchanged ones while room is left.
const htmlPairs = 400

func pairsShown(ps []SamplePair) ([]SamplePair, int) {
	if len(ps) <= htmlPairs {
		return ps, 0
	}
	return ps[:htmlPairs], len(ps) - htmlPairs
}
