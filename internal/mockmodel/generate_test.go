package mockmodel

import (
	"math"
	"strings"
	"testing"
)

func TestReply(t *testing.T) {
	tests := []struct {
		prompt, want string
	}{
		{"What is 12*(3+4)?", "84"},
		{"What is 2+2", "4"},
		{"compute (1 + 2) * 3 - 4 / 2 please", "7"},
		{"7/2 =", "3.5"},
		{"-3+5?", "2"},
		{"1/3", "0.333333"},
		{"what is 10/0 and 1+1", "2"},
		{"echo: hello world  ", "hello world"},
		{"Please ECHO: 1+1", "1+1"},
		{"echo:", ""},
	}
	for _, tt := range tests {
		if got := Reply(tt.prompt); got != tt.want {
			t.Errorf("Reply(%q) = %q, want %q", tt.prompt, got, tt.want)
		}
	}
}

func TestReplySentenceDeterministic(t *testing.T) {
	a, b := Reply("tell me a story"), Reply("tell me a story")
	if a != b {
		t.Fatalf("Reply not deterministic: %q vs %q", a, b)
	}
	if !strings.HasSuffix(a, ".") || len(strings.Fields(a)) < 5 {
		t.Fatalf("Reply(story) = %q, want a short sentence", a)
	}
	// Different prompts reach different sentences (at least among a few).
	seen := map[string]bool{}
	for _, p := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		seen[Reply(p)] = true
	}
	if len(seen) < 4 {
		t.Fatalf("only %d distinct sentences for 8 prompts", len(seen))
	}
	// No arithmetic where there is none: a number alone is not an expression.
	if v, ok := FindArithmetic("gpt-4 in 2024"); ok {
		t.Fatalf("FindArithmetic found %q in text without an operator between numbers", v)
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		s    string
		want []string
	}{
		{"", nil},
		{"84", []string{"84"}},
		{"What is 12*(3+4)?", []string{"What", " is", " 12", "*", "(", "3", "+", "4", ")", "?"}},
		{"internationalization", []string{"inte", "rnat", "iona", "liza", "tion"}},
		{" hi  ", []string{" hi", "  "}},
		{"héllo wörld", []string{"héll", "o", " wörl", "d"}},
	}
	for _, tt := range tests {
		got := Tokens(tt.s)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.s, got, tt.want)
		}
		if strings.Join(got, "") != tt.s {
			t.Errorf("Tokens(%q) does not join back: %q", tt.s, strings.Join(got, ""))
		}
		if CountTokens(tt.s) != int64(len(tt.want)) {
			t.Errorf("CountTokens(%q) = %d, want %d", tt.s, CountTokens(tt.s), len(tt.want))
		}
	}
}

func TestEmbedding(t *testing.T) {
	a := Embedding("hello", 64)
	b := Embedding("hello", 64)
	c := Embedding("world", 64)
	if len(a) != 64 {
		t.Fatalf("len = %d", len(a))
	}
	var norm float64
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("embedding not deterministic at %d", i)
		}
		if a[i] != c[i] {
			same = false
		}
		norm += float64(a[i]) * float64(a[i])
	}
	if same {
		t.Fatal("different texts gave the same embedding")
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Fatalf("norm^2 = %v, want 1", norm)
	}
}
