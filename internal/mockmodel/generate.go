package mockmodel

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokens splits s into the mock tokenizer's pieces. Joining the pieces gives
// s back exactly. A piece is a run of up to four letters or digits, or one
// other symbol, with any whitespace before it attached to its front (trailing
// whitespace at the end of s is a piece of its own).
func Tokens(s string) []string {
	var out []string
	start := 0 // start of the current piece, including its leading whitespace
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			i += size
			continue
		}
		if isWordRune(r) {
			n := 0
			for i < len(s) && n < 4 {
				r, size = utf8.DecodeRuneInString(s[i:])
				if !isWordRune(r) {
					break
				}
				i += size
				n++
			}
		} else {
			i += size
		}
		out = append(out, s[start:i])
		start = i
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// CountTokens is the number of mock tokens in s: len(Tokens(s)).
func CountTokens(s string) int64 {
	return int64(len(Tokens(s)))
}

// Reply is the mock model's answer to prompt (the text of the last user
// message). The rules, in order:
//
//  1. the prompt contains "echo: X" (any case): the answer is X, trimmed;
//  2. the prompt contains an arithmetic expression over integers with
//     + - * / and parentheses ("What is 12*(3+4)?"): the answer is just the
//     number ("84"); non-integral quotients are written as decimals;
//  3. otherwise: a short sentence chosen by a hash of the prompt.
//
// Echo comes first so that "echo: 1+1" answers "1+1", as asked. Before
// all of them, a grading prompt (see Grade) gets a grade.
func Reply(prompt string) string {
	if g, ok := Grade(prompt); ok {
		return g
	}
	if i := strings.Index(strings.ToLower(prompt), "echo:"); i >= 0 {
		return strings.TrimSpace(prompt[i+len("echo:"):])
	}
	if v, ok := FindArithmetic(prompt); ok {
		return v
	}
	return sentence(prompt)
}

var (
	subjects = []string{"The quiet river", "A patient engineer", "The small lantern", "An old compass", "The morning train", "A careful reader", "The mock model", "A paper boat"}
	verbs    = []string{"keeps", "finds", "follows", "remembers", "answers", "carries", "measures", "watches"}
	objects  = []string{"the long road", "every question", "a steady rhythm", "the northern light", "its own shadow", "the next step", "a simple rule", "the open door"}
	endings  = []string{"today", "without hurry", "in good order", "once more", "as expected", "with care", "for now", "again"}
)

func sentence(prompt string) string {
	h := hash64(prompt)
	pick := func(list []string, shift uint) string { return list[(h>>shift)%uint64(len(list))] }
	return pick(subjects, 0) + " " + pick(verbs, 8) + " " + pick(objects, 16) + " " + pick(endings, 24) + "."
}

func hash64(s string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(s))
	return f.Sum64()
}

// FindArithmetic looks for an integer arithmetic expression (at least one
// binary operator) in s and returns its value as text.
func FindArithmetic(s string) (string, bool) {
	// Candidate runs are maximal stretches of expression characters.
	isExpr := func(r rune) bool {
		return r >= '0' && r <= '9' || strings.ContainsRune("+-*/() \t", r)
	}
	i := 0
	for i < len(s) {
		if !isExpr(rune(s[i])) {
			i++
			continue
		}
		j := i
		for j < len(s) && isExpr(rune(s[j])) {
			j++
		}
		if v, ok := evalCandidate(s[i:j]); ok {
			return v, true
		}
		i = j
	}
	return "", false
}

// evalCandidate trims a run to a well-formed expression and evaluates it.
func evalCandidate(run string) (string, bool) {
	run = strings.TrimSpace(run)
	if len(run) > 400 {
		return "", false
	}
	// Shrink from both ends over characters an expression cannot start or end with.
	for lo := 0; lo < len(run); lo++ {
		c := run[lo]
		if !(c >= '0' && c <= '9' || c == '(' || c == '-') {
			continue
		}
		for hi := len(run); hi > lo; hi-- {
			e := run[hi-1]
			if !(e >= '0' && e <= '9' || e == ')') {
				continue
			}
			if v, ok := evalExpr(run[lo:hi]); ok {
				return v, true
			}
		}
	}
	return "", false
}

type exprParser struct {
	s   string
	pos int
	ops int
}

func evalExpr(s string) (string, bool) {
	p := &exprParser{s: s}
	v, ok := p.sum()
	p.skip()
	if !ok || p.pos != len(p.s) || p.ops == 0 {
		return "", false
	}
	return formatRat(v), true
}

func (p *exprParser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *exprParser) peek() byte {
	p.skip()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *exprParser) sum() (*big.Rat, bool) {
	v, ok := p.product()
	if !ok {
		return nil, false
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, true
		}
		p.pos++
		w, ok := p.product()
		if !ok {
			return nil, false
		}
		p.ops++
		if op == '+' {
			v = new(big.Rat).Add(v, w)
		} else {
			v = new(big.Rat).Sub(v, w)
		}
	}
}

func (p *exprParser) product() (*big.Rat, bool) {
	v, ok := p.unary()
	if !ok {
		return nil, false
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' {
			return v, true
		}
		p.pos++
		w, ok := p.unary()
		if !ok {
			return nil, false
		}
		p.ops++
		if op == '*' {
			v = new(big.Rat).Mul(v, w)
		} else {
			if w.Sign() == 0 {
				return nil, false
			}
			v = new(big.Rat).Quo(v, w)
		}
	}
}

func (p *exprParser) unary() (*big.Rat, bool) {
	switch p.peek() {
	case '-':
		p.pos++
		v, ok := p.unary()
		if !ok {
			return nil, false
		}
		return new(big.Rat).Neg(v), true
	case '(':
		p.pos++
		v, ok := p.sum()
		if !ok || p.peek() != ')' {
			return nil, false
		}
		p.pos++
		return v, true
	}
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start || p.pos-start > 30 {
		return nil, false
	}
	v, ok := new(big.Rat).SetString(p.s[start:p.pos])
	return v, ok
}

func formatRat(v *big.Rat) string {
	if v.IsInt() {
		return v.Num().String()
	}
	s := v.FloatString(6)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Embedding is the mock embedding of text: a deterministic unit vector of
// the given number of dimensions, drawn from a generator seeded by a hash of
// the text.
func Embedding(text string, dims int) []float32 {
	if dims <= 0 {
		dims = 1
	}
	x := hash64(text)
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)/float64(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	if norm > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / norm)
		}
	}
	return v
}

// embeddingBytes encodes v as OpenAI does for encoding_format "base64":
// little-endian float32s.
func embeddingBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// Grade answers a grading prompt: one with "[Submission]:" and
// "[Criterion]:" sections (Steward's model judge template, and Inspect's
// model_graded_qa), each running to the next "***" line or the end. The
// submission meets the criterion when the criterion's words, lower-cased
// and with punctuation dropped, appear in it in order as a phrase; the
// reply gives that reason and ends "GRADE: C", else "GRADE: I". ok is
// false for any other prompt.
func Grade(prompt string) (reply string, ok bool) {
	sub, ok1 := section(prompt, "[Submission]:")
	crit, ok2 := section(prompt, "[Criterion]:")
	if !ok1 || !ok2 {
		return "", false
	}
	s, c := words(sub), words(crit)
	if c != "" && strings.Contains(" "+s+" ", " "+c+" ") {
		return "The submission states what the criterion asks for.\nGRADE: C", true
	}
	return "The submission does not state what the criterion asks for.\nGRADE: I", true
}

// section is the text after marker up to the next "***" line (or the end).
func section(prompt, marker string) (string, bool) {
	i := strings.Index(prompt, marker)
	if i < 0 {
		return "", false
	}
	rest := prompt[i+len(marker):]
	if j := strings.Index(rest, "\n***"); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// words is s lower-cased, with every run of non-letters and non-digits one space.
func words(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) }), " ")
}
