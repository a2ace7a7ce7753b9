// Package mockmodel is Steward's built-in deterministic "mock" upstream. It
// speaks the OpenAI (chat completions, responses, completions, embeddings,
// models) and Anthropic (messages) wire formats, streaming included, and
// reports usage, so the quickstart and the tests need no API key.
//
// Its answers are a pure function of the request (see Reply), its token
// counts come from a small deterministic tokenizer (see Tokens), and it
// validates requests the way the real APIs do. It does not check API keys.
//
// The request parsing (Parse), the answer (Call) and the wire writers
// (Call.Write, Error.Write) are exported so that internal/fakeprovider serves
// exactly the same formats.
package mockmodel

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/steward-evals/steward/internal/clock"
)

// Options tune the handler New returns.
type Options struct {
	// Clock gives the "created" timestamps; nil means the wall clock.
	Clock clock.Clock
}

// New returns the mock upstream as an http.Handler serving paths under /v1.
func New() http.Handler { return NewWithOptions(Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(o Options) http.Handler {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return &handler{clock: o.Clock}
}

type handler struct {
	clock clock.Clock
	seq   atomic.Uint64
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.seq.Add(1)
	reqID := fmt.Sprintf("req_mock_%06d", n)
	c, e := Parse(r)
	if e != nil {
		e.Write(w, reqID)
		return
	}
	id := fmt.Sprintf("mock%06d%08x", n, uint32(hash64(fmt.Sprint(c.Prompts))))
	// A write error means the client went away; there is no one to tell.
	_ = c.Write(r.Context(), w, Meta{ID: id, RequestID: reqID, Now: h.clock.Now()}, nil)
}
