// Package transcript is the shape of what the model gateway captures of an
// attempt's model calls, and how it is stored: JSON, gzip-compressed. The
// gateway writes it, the record keeps it as an opaque blob, reports read it.
// Everything in a transcript is eval output and untrusted.
package transcript

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Capture modes (the fleet setting `transcripts`).
const (
	ModeFull     = "full"     // requests and responses with their content
	ModeMetadata = "metadata" // time, route, model, status, retries, latency, tokens, cost; no content
	ModeOff      = "off"      // nothing captured
)

// ValidMode says whether m is a capture mode.
func ValidMode(m string) bool { return m == ModeFull || m == ModeMetadata || m == ModeOff }

// Default caps, in bytes of uncompressed captured content.
const (
	DefaultAttemptCap = 4 << 20   // per attempt
	DefaultRunCap     = 512 << 20 // per run (the gateway's lifetime)
	// MaxDecoded bounds what Decode inflates, whatever the blob claims.
	MaxDecoded = 64 << 20
)

// Transcript is every model call one attempt made through the gateway, in
// the order they started.
type Transcript struct {
	Mode  string `json:"mode"`
	Calls []Call `json:"calls"`
	// Truncated, when set, says why some content was left out (a cap was
	// reached); calls past it keep their metadata but lose their content.
	Truncated string `json:"truncated,omitempty"`
	// Dropped counts calls not kept at all (past the per-attempt call cap).
	Dropped int `json:"dropped,omitempty"`
}

// Call is one request from the sandbox and what it got back.
type Call struct {
	Time    time.Time     `json:"time"`
	Method  string        `json:"method"`
	Route   string        `json:"route"`
	Model   string        `json:"model,omitempty"`
	Stream  bool          `json:"stream,omitempty"`
	Status  int           `json:"status"` // what the agent got
	Latency time.Duration `json:"latency_ns"`
	// Tries are the upstream tries; more than one means retries, each with
	// the backoff it waited before it started.
	Tries        []Try   `json:"tries,omitempty"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// Request is the request body (JSON) as the agent sent it, scrubbed.
	Request json.RawMessage `json:"request,omitempty"`
	// Response is the response body (JSON); a streamed response is
	// assembled from its events into the shape of the non-streamed one.
	Response json.RawMessage `json:"response,omitempty"`
	// ResponseText holds a response that is not JSON (cut to the cap).
	ResponseText string `json:"response_text,omitempty"`
	// Truncated: this call's content was cut or left out (see Transcript.Truncated).
	Truncated bool `json:"truncated,omitempty"`
	// By is who made the call: "" the agent, ByScorer the model judge's
	// graders (their spend is the attempt's grading, not the agent's).
	By string `json:"by,omitempty"`
}

// ByScorer marks a call the scorer (a model judge's grader) made.
const ByScorer = "scorer"

// Try is one upstream try of a call.
type Try struct {
	Start   time.Time     `json:"start"`
	Wait    time.Duration `json:"wait_ns,omitempty"` // backoff waited before this try
	Status  int           `json:"status,omitempty"`  // 0: no answer (connection failed)
	Error   string        `json:"error,omitempty"`
	Latency time.Duration `json:"latency_ns"`
}

// Encode gzips t's JSON.
func Encode(t *Transcript) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(t); err != nil {
		return nil, fmt.Errorf("encode transcript: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode transcript: %w", err)
	}
	return b.Bytes(), nil
}

// Decode reads what Encode wrote, inflating at most MaxDecoded bytes.
func Decode(blob []byte) (*Transcript, error) {
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		return nil, fmt.Errorf("decode transcript: %w", err)
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, MaxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("decode transcript: %w", err)
	}
	if len(raw) > MaxDecoded {
		return nil, fmt.Errorf("decode transcript: larger than %d bytes inflated", MaxDecoded)
	}
	var t Transcript
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("decode transcript: %w", err)
	}
	return &t, nil
}
