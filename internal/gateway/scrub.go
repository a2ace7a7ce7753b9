package gateway

import "github.com/steward-evals/steward/internal/secret"

// Redacted replaces every secret Steward scrubs: the real key, the fleet's
// secrets and gateway tokens, wherever they would be stored or printed
// (the gateway's log and transcripts, attempt rows, artifacts, stderr).
// It is secret.Redacted, the one spelling.
const Redacted = secret.Redacted

const redacted = Redacted

// scrubber removes the real key and the configured secrets from anything
// that leaves the gateway towards a sandbox or a log: Steward's one
// scrubber (internal/secret).
type scrubber = secret.Scrubber

func newScrubber(values ...string) *scrubber { return secret.New(values...) }

// streamScrubber scrubs a byte stream written in arbitrary pieces: a secret
// split across writes is still caught (secret.Stream). An SSE event's
// closing blank line is never held.
type streamScrubber struct {
	s *scrubber
	z secret.Stream
}

// write returns the bytes safe to pass on now.
func (z *streamScrubber) write(p []byte) []byte {
	z.z.S = z.s
	return z.z.Write(p)
}

// flush returns what is held back at the end of the stream.
func (z *streamScrubber) flush() []byte { return z.z.Flush() }
