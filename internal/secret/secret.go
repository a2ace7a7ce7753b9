// Package secret is Steward's one list of the variables that hold secrets
// and its one scrubber: every string that leaves a process Steward ran (host
// hooks, sandbox setup, agents, scorers, image builds) passes a Scrubber made
// here before it is stored or printed, and the gateway scrubs with the same
// type. It imports nothing of Steward's.
package secret

import (
	"bytes"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces every secret Steward scrubs, wherever it would be stored
// or printed (the one spelling).
const Redacted = "[redacted]"

// MinLen is the shortest value scrubbed: shorter "secrets" would mangle
// ordinary text and protect nothing.
const MinLen = 8

// EnvNames are the variables whose values are secret whenever they are set,
// whatever the eval set says: the GitHub token (as the job and the action's
// input hold it), the runner's own tokens and the providers' usual key
// variables. A worker process never inherits them, the action masks them,
// and every Scrubber of a launch removes them. The eval set adds its own
// (model.api_key_env, secret_env, and _steward.yaml's secrets): Names.
var EnvNames = []string{
	"GITHUB_TOKEN", "INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN",
	"ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "STEWARD_API_KEY",
}

// AddEnvNames adds variables to EnvNames, each once: a package that knows
// more of them adds them from its init function (the gateway's wire
// formats, their key variables: gateway.Register). Call it from init only;
// EnvNames is read without a lock.
func AddEnvNames(names ...string) {
	for _, n := range names {
		if n != "" && !slices.Contains(EnvNames, n) {
			EnvNames = append(EnvNames, n)
		}
	}
}

// Names is EnvNames followed by the given names (the eval set's key
// variable, secret_env, _steward.yaml's secrets), without repeats or "".
func Names(more ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range EnvNames {
		add(n)
	}
	for _, m := range more {
		for _, n := range m {
			add(n)
		}
	}
	return out
}

// Values are the values of the named variables that are set.
func Values(getenv func(string) string, names []string) []string {
	var out []string
	for _, n := range names {
		if v := getenv(n); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Without is environ (KEY=VALUE entries, as os.Environ gives them) without
// the named variables: the environment of a process that must not hold
// them (a worker).
func Without(environ, names []string) []string {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	var out []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}

// Scrubber replaces secret values with Redacted. The zero value and nil
// scrub nothing. It is safe for concurrent use.
type Scrubber struct {
	secrets [][]byte // longest first
	folded  []string // the same, lower-cased
}

// New is a Scrubber of values (those shorter than MinLen are ignored).
func New(values ...string) *Scrubber {
	seen := map[string]bool{}
	s := &Scrubber{}
	for _, v := range values {
		if len(v) < MinLen || seen[v] {
			continue
		}
		seen[v] = true
		s.secrets = append(s.secrets, []byte(v))
	}
	sort.SliceStable(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	for _, v := range s.secrets {
		s.folded = append(s.folded, strings.ToLower(string(v)))
	}
	return s
}

// With is a Scrubber of s's values and more.
func (s *Scrubber) With(more ...string) *Scrubber {
	var vals []string
	if s != nil {
		for _, v := range s.secrets {
			vals = append(vals, string(v))
		}
	}
	return New(append(vals, more...)...)
}

// Empty reports whether s scrubs nothing.
func (s *Scrubber) Empty() bool { return s == nil || len(s.secrets) == 0 }

// Bytes returns b with every secret replaced (b itself when none occurs).
func (s *Scrubber) Bytes(b []byte) []byte {
	if s.Empty() {
		return b
	}
	for _, sec := range s.secrets {
		if bytes.Contains(b, sec) {
			b = bytes.ReplaceAll(b, sec, []byte(Redacted))
		}
	}
	return b
}

// String returns v with every secret replaced.
func (s *Scrubber) String(v string) string {
	if s.Empty() {
		return v
	}
	for _, sec := range s.secrets {
		v = strings.ReplaceAll(v, string(sec), Redacted)
	}
	return v
}

// Ellipsis marks where Steward cut a text short (a tail, a truncation):
// Clipped looks for a cut secret beside it.
const Ellipsis = "…"

// minPart is the shortest piece of a cut secret Clipped removes.
const minPart = 4

// Clipped is String, and also removes what is left of a secret that a cut
// split: a text (or a piece of it after Ellipsis) that begins with the end
// of a secret, and one (or a piece before Ellipsis) that ends with its
// start, of at least 4 bytes. Use it on tails and truncations.
func (s *Scrubber) Clipped(v string) string {
	v = s.String(v)
	if s.Empty() {
		return v
	}
	// Pieces between cuts: each may start with a secret's end and end with
	// a secret's start.
	parts := strings.Split(v, Ellipsis)
	for i, p := range parts {
		if n := s.headPart(p); n > 0 {
			p = Redacted + p[n:]
		}
		if n := s.tailPart(p); n > 0 {
			p = p[:len(p)-n] + Redacted
		}
		parts[i] = p
	}
	return strings.Join(parts, Ellipsis)
}

// headPart is the length of the longest proper suffix of a secret (at
// least minPart) that p begins with.
func (s *Scrubber) headPart(p string) int {
	best := 0
	for _, sec := range s.secrets {
		for k := len(sec) - 1; k >= minPart && k > best; k-- {
			if strings.HasPrefix(p, string(sec[len(sec)-k:])) {
				best = k
				break
			}
		}
	}
	return best
}

// tailPart is the length of the longest proper prefix of a secret (at least
// minPart) that p ends with.
func (s *Scrubber) tailPart(p string) int {
	best := 0
	for _, sec := range s.secrets {
		for k := len(sec) - 1; k >= minPart && k > best; k-- {
			if strings.HasSuffix(p, string(sec[:k])) {
				best = k
				break
			}
		}
	}
	return best
}

// Strings scrubs each of vs in place and returns it.
func (s *Scrubber) Strings(vs []string) []string {
	for i := range vs {
		vs[i] = s.String(vs[i])
	}
	return vs
}

// Contains reports whether v holds a secret.
func (s *Scrubber) Contains(v string) bool {
	if s.Empty() {
		return false
	}
	for _, sec := range s.secrets {
		if strings.Contains(v, string(sec)) {
			return true
		}
	}
	return false
}

// ContainsFold reports whether v holds a secret in any letter case (an
// HTTP header name, which Go and the wire case-fold).
func (s *Scrubber) ContainsFold(v string) bool {
	if s.Empty() {
		return false
	}
	lv := strings.ToLower(v)
	for _, sec := range s.folded {
		if strings.Contains(lv, sec) {
			return true
		}
	}
	return false
}

// Held is how many trailing bytes of b could be the start of a secret that
// the next write completes: the longest proper prefix of a secret that b
// ends with.
func (s *Scrubber) Held(b []byte) int {
	if s.Empty() {
		return 0
	}
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

// Stream scrubs a byte stream written in arbitrary pieces: a secret split
// across writes is still caught. It holds back only a tail that could be
// the start of a secret, so what it passes on is never delayed beyond that.
// It is not safe for concurrent use (Writer is).
type Stream struct {
	S       *Scrubber
	pending []byte
}

// Write returns the bytes safe to pass on now.
func (z *Stream) Write(p []byte) []byte {
	if z.S.Empty() {
		return p
	}
	buf := append(z.pending, p...)
	buf = z.S.Bytes(buf)
	h := z.S.Held(buf)
	out := append([]byte(nil), buf[:len(buf)-h]...)
	z.pending = append(z.pending[:0], buf[len(buf)-h:]...)
	return out
}

// Flush returns what is held back at the end of the stream.
func (z *Stream) Flush() []byte {
	out := z.pending
	z.pending = nil
	return out
}

// Writer scrubs everything written through it before it reaches w (stderr,
// a worker's output, a log): a secret split across writes is still caught.
// Writes are serialised. Flush passes on what it holds back at the end.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
	z  Stream
}

// NewWriter scrubs what is written to w with s.
func NewWriter(w io.Writer, s *Scrubber) *Writer {
	return &Writer{w: w, z: Stream{S: s}}
}

// Write scrubs p and writes what is safe to pass on; it reports len(p)
// written unless w fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.z.Write(p)
	if len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Scrubber is what w scrubs with.
func (w *Writer) Scrubber() *Scrubber { return w.z.S }

// Flush writes what is held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if out := w.z.Flush(); len(out) > 0 {
		_, err := w.w.Write(out)
		return err
	}
	return nil
}

// Error is err with its message scrubbed; errors.Is and errors.As still see
// err.
func (s *Scrubber) Error(err error) error {
	if err == nil || !s.Contains(err.Error()) {
		return err
	}
	return &scrubbed{msg: s.String(err.Error()), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
