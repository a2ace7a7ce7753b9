package gateway

import (
	"bytes"
	"sort"
	"strings"
)

// Redacted replaces every secret Steward scrubs: the real key, the fleet's
// secrets and gateway tokens, wherever they would be stored or printed
// (the gateway's log and transcripts, attempt rows, artifacts, stderr).
const Redacted = "[redacted]"

const redacted = Redacted

// minSecretLen is the shortest value scrubbed: shorter "secrets" would
// mangle ordinary text and protect nothing.
const minSecretLen = 8

// scrubber removes the real key and the configured secrets from anything
// that leaves the gateway towards a sandbox or a log.
type scrubber struct {
	secrets [][]byte // longest first
}

func newScrubber(values ...string) *scrubber {
	seen := map[string]bool{}
	s := &scrubber{}
	for _, v := range values {
		if len(v) < minSecretLen || seen[v] {
			continue
		}
		seen[v] = true
		s.secrets = append(s.secrets, []byte(v))
	}
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	return s
}

func (s *scrubber) empty() bool { return s == nil || len(s.secrets) == 0 }

// bytes returns b with every secret replaced (b itself when none occurs).
func (s *scrubber) bytes(b []byte) []byte {
	if s.empty() {
		return b
	}
	for _, sec := range s.secrets {
		if bytes.Contains(b, sec) {
			b = bytes.ReplaceAll(b, sec, []byte(redacted))
		}
	}
	return b
}

func (s *scrubber) string(v string) string {
	if s.empty() {
		return v
	}
	for _, sec := range s.secrets {
		v = strings.ReplaceAll(v, string(sec), redacted)
	}
	return v
}

// contains reports whether v holds a secret.
func (s *scrubber) contains(v string) bool {
	if s.empty() {
		return false
	}
	for _, sec := range s.secrets {
		if strings.Contains(v, string(sec)) {
			return true
		}
	}
	return false
}

// held is how many trailing bytes of b could be the start of a secret that
// the next write completes: the longest proper prefix of a secret that b
// ends with.
func (s *scrubber) held(b []byte) int {
	best := 0
	for _, sec := range s.secrets {
		max := len(sec) - 1
		if max > len(b) {
			max = len(b)
		}
		for k := max; k > best; k-- {
			if bytes.HasSuffix(b, sec[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// streamScrubber scrubs a byte stream written in arbitrary pieces: a secret
// split across writes is still caught. It holds back only a tail that could
// be the start of a secret, so what it passes on is never delayed beyond
// that (an SSE event's closing blank line is never held).
type streamScrubber struct {
	s       *scrubber
	pending []byte
}

// write returns the bytes safe to pass on now.
func (z *streamScrubber) write(p []byte) []byte {
	if z.s.empty() {
		return p
	}
	buf := append(z.pending, p...)
	buf = z.s.bytes(buf)
	h := z.s.held(buf)
	out := append([]byte(nil), buf[:len(buf)-h]...)
	z.pending = append(z.pending[:0], buf[len(buf)-h:]...)
	return out
}

// flush returns what is held back at the end of the stream.
func (z *streamScrubber) flush() []byte {
	out := z.pending
	z.pending = nil
	return out
}
