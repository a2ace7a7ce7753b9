// Package gatewaytest is the gateway's test harness, used by the gateway's
// own tests and by the SDK checks (the sdkcheck module): a gateway served
// on loopback for the length of a test, the fake provider behind it, and
// checks of what reached the provider and what the transcript kept.
//
// It does not import the gateway (the gateway's in-package tests import
// it): the gateway is anything that serves a listener.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/transcript"
)

// RealKey is the provider key the tests configure; no token may replace
// it upstream and no transcript may keep it.
const RealKey = "sk-real-SECRET-0123456789abcdef"

// SyncBuffer is a log sink safe for concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Server is what Start serves: a gateway.
type Server interface {
	Serve(ctx context.Context, ln net.Listener) error
}

// Start makes a server with newServer (given a log it may write to) and
// serves it on loopback until the test ends, when a serve error fails the
// test. It returns the server, its base URL and the log.
func Start[S Server](t testing.TB, newServer func(log io.Writer) (S, error)) (S, string, *SyncBuffer) {
	t.Helper()
	log := &SyncBuffer{}
	s, err := newServer(log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String(), log
}

// StartFake serves the fake provider on loopback until the test ends (its
// key RealKey unless cfg names one) and returns it with its URL.
func StartFake(t testing.TB, cfg fakeprovider.Config) (*fakeprovider.Server, string) {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = RealKey
	}
	fp := fakeprovider.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return fp, u
}

// CheckOnlyRealKey asserts the provider saw the real key and nothing else:
// no attempt token leaked upstream.
func CheckOnlyRealKey(t testing.TB, st fakeprovider.Stats) {
	t.Helper()
	if len(st.APIKeys) != 1 || st.APIKeys[0] != RealKey {
		t.Fatalf("provider saw keys %q, want only the real key", st.APIKeys)
	}
	if st.Unauthorized != 0 {
		t.Fatalf("provider refused %d requests as unauthorized", st.Unauthorized)
	}
}

// Transcripts is the part of the gateway that keeps transcripts.
type Transcripts interface {
	Drain(ctx context.Context, key string) error
	Transcript(key string) *transcript.Transcript
}

// MustTranscript drains the attempt key's calls and returns its transcript.
func MustTranscript(t testing.TB, g Transcripts, key string) *transcript.Transcript {
	t.Helper()
	if err := g.Drain(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	tr := g.Transcript(key)
	if tr == nil {
		t.Fatalf("no transcript for %s", key)
	}
	return tr
}

// Encoded is the transcript as JSON.
func Encoded(t testing.TB, tr *transcript.Transcript) string {
	t.Helper()
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
