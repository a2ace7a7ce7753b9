package report

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything a renderer takes from eval output (answers, explanations, logs,
// reasons, sample ids, task names) passes through one of the functions in this
// file before it is written next to Markdown, HTML or a terminal. XML and JSON
// are escaped by encoding/xml and encoding/json.

// clean makes s a single line of printable text: CR/LF/tab become a space
// (or the separator given), other control characters, escape sequences and
// bidirectional overrides (the "trojan source" characters) are dropped, and
// invalid UTF-8 becomes U+FFFD.
func clean(s, newline string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevNL := false
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		if r == utf8.RuneError && size == 1 {
			b.WriteRune('\uFFFD')
			prevNL = false
			continue
		}
		switch {
		case r == '\r' || r == '\n':
			if !prevNL {
				b.WriteString(newline)
			}
			prevNL = true
			continue
		case r == '\t':
			b.WriteByte(' ')
		case isBidiControl(r):
			// dropped: they reorder what a reader sees
		case unicode.IsControl(r):
			// dropped: C0/C1 controls including ESC (terminal sequences)
		default:
			b.WriteRune(r)
		}
		prevNL = false
	}
	return strings.TrimSpace(b.String())
}

func isBidiControl(r rune) bool {
	switch {
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return true
	}
	return false
}

// textBlock keeps the lines of s but drops what clean drops within a line.
func textBlock(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = clean(l, " ")
	}
	return strings.Join(lines, "\n")
}

// truncate cuts s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	i := 0
	for k := 0; k < n-1; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "…"
}

// Plain returns s as one line of terminal-safe text of at most n runes
// (n <= 0: no limit). Control characters and escape sequences are removed so
// eval output cannot move the cursor, recolour or clear a terminal, and a line
// cannot start a GitHub workflow command.
func Plain(s string, n int) string {
	return truncate(clean(s, " ⏎ "), n)
}

// mdReplacer turns every character that could start Markdown or HTML
// structure into a character reference. CommonMark never treats a character
// reference as structure, so the text renders as written, in Markdown and in
// raw HTML blocks alike.
var mdReplacer = strings.NewReplacer(
	"&", "&amp;",
	"<", "&lt;",
	">", "&gt;",
	`"`, "&quot;",
	"'", "&#39;",
	"|", "&#124;",
	"`", "&#96;",
	"*", "&#42;",
	"_", "&#95;",
	"[", "&#91;",
	"]", "&#93;",
	"\\", "&#92;",
	"~", "&#126;",
	"$", "&#36;", // GitHub renders $…$ as math
	// GitHub links @handles and #123 references after rendering, on the
	// decoded text, so a character reference would not stop them: a zero-width
	// space after the sigil does.
	"#", "#\u200b",
	"@", "@\u200b", // no @mentions: a zero-width space breaks the handle
)

// MD returns s as a single line of Markdown-and-HTML-safe inline text of at
// most n runes before escaping (n <= 0: no limit). Newlines become <br> so a
// table cell stays one row. The result is for use inside a line (a table cell,
// after a label): never put it at the start of a line.
func MD(s string, n int) string {
	parts := strings.Split(truncate(clean(s, "\n"), n), "\n")
	for i, p := range parts {
		parts[i] = noAutolinks(mdReplacer.Replace(p))
	}
	return strings.Join(parts, "<br>")
}

// noAutolinks breaks what GitHub would turn into a link by itself (GFM's
// extended autolinks: "www." and "scheme://" in any case) with a zero-width
// space, which the reader does not see. GitHub finds autolinks in the
// decoded text, so a character reference would not stop them. E-mail
// addresses (also after mailto: or xmpp:) are broken by the zero-width
// space mdReplacer puts after every "@".
func noAutolinks(s string) string {
	s = noReferences(s)
	if !strings.Contains(s, "://") && !containsFold(s, "www.") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ':' && strings.HasPrefix(s[i+1:], "//"):
			b.WriteString(":\u200b")
		case (s[i] == 'w' || s[i] == 'W') && i+4 <= len(s) && strings.EqualFold(s[i:i+4], "www."):
			b.WriteString(s[i : i+3])
			b.WriteString("\u200b.")
			i += 3
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// noReferences breaks what GitHub links by itself after rendering, besides
// URLs, @mentions and #numbers (mdReplacer): "GH-12" (an issue, in any
// case) gets a zero-width space after "GH", and a word of 7 or more hex
// digits (a commit SHA, or its prefix) one after every 6 digits, so that no
// piece GitHub sees between word boundaries is long enough to be a SHA.
func noReferences(s string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); {
		if !isWord(s, i-1) {
			if i+3 < len(s) && (s[i] == 'G' || s[i] == 'g') && (s[i+1] == 'H' || s[i+1] == 'h') && s[i+2] == '-' && isDigit(s[i+3]) {
				b.WriteString(s[i : i+2])
				b.WriteString("\u200b")
				i += 2
				changed = true
				continue
			}
			j := i
			for j < len(s) && isHex(s[j]) {
				j++
			}
			if j-i >= 7 && !isWord(s, j) {
				for k := i; k < j; k += 6 {
					if k > i {
						b.WriteString("\u200b")
					}
					b.WriteString(s[k:min(k+6, j)])
				}
				i = j
				changed = true
				continue
			}
			if j > i {
				b.WriteString(s[i:j])
				i = j
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	if !changed {
		return s
	}
	return b.String()
}

// isWord reports whether s[i] is a word character (ASCII letter, digit or
// underscore); outside s is not.
func isWord(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}

// markerKey escapes a part of the sticky comment's marker so that it stays one
// token and cannot close the HTML comment it sits in: every byte outside
// [A-Za-z0-9._~/-] is percent-encoded.
func markerKey(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '~', c == '/', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
