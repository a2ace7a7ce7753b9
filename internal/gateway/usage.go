package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

type usageFields struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheCreation    int64 `json:"cache_creation_input_tokens"`
	CacheRead        int64 `json:"cache_read_input_tokens"`
}

func (u *usageFields) tokens() (in, out int64) {
	if u == nil {
		return 0, 0
	}
	in = u.PromptTokens + u.InputTokens + u.CacheCreation + u.CacheRead
	out = u.CompletionTokens + u.OutputTokens
	return in, out
}

type usageHolder struct {
	Usage    *usageFields `json:"usage"`
	Response *struct {
		Usage *usageFields `json:"usage"`
	} `json:"response"`
	Message *struct {
		Usage *usageFields `json:"usage"`
	} `json:"message"`
	Choices json.RawMessage `json:"choices"`
}

// usageMeter keeps the largest input and output counts seen in a response:
// OpenAI reports usage once; Anthropic's stream reports input in
// message_start and cumulative output in message_delta.
type usageMeter struct {
	in, out int64
	seen    bool
}

var usageKey = []byte(`"usage"`)

// observe reads usage from one JSON document; usageOnly reports a chunk that
// carries usage with no choices (the extra chunk include_usage adds).
func (m *usageMeter) observe(doc []byte) (usageOnly bool) {
	if !bytes.Contains(doc, usageKey) {
		return false
	}
	var h usageHolder
	if json.Unmarshal(doc, &h) != nil {
		return false
	}
	for _, u := range []*usageFields{h.Usage, respUsage(h), msgUsage(h)} {
		if u == nil {
			continue
		}
		in, out := u.tokens()
		m.seen = true
		if in > m.in {
			m.in = in
		}
		if out > m.out {
			m.out = out
		}
	}
	return h.Usage != nil && bytes.Equal(bytes.TrimSpace(h.Choices), []byte("[]"))
}

func respUsage(h usageHolder) *usageFields {
	if h.Response == nil {
		return nil
	}
	return h.Response.Usage
}

func msgUsage(h usageHolder) *usageFields {
	if h.Message == nil {
		return nil
	}
	return h.Message.Usage
}

// copySSE copies an event stream from r to w event by event, flushing after
// each, reading usage from data lines. When dropUsageOnly is set, the
// usage-only chunk (which the gateway asked for, not the client) is left out.
// start runs once before the first byte is written. It returns whether
// anything was written, and the read error that ended the copy (nil: the
// stream reached its end) and the first write error. After a write error
// (the client went away) it reads on without writing, for the usage: the
// provider bills the whole answer.
func copySSE(w http.ResponseWriter, r io.Reader, m *usageMeter, dropUsageOnly bool, start func()) (wrote bool, readErr, writeErr error) {
	fl, _ := w.(http.Flusher)
	br := bufio.NewReaderSize(r, 32<<10)
	var event, data []byte
	emit := func() error {
		if len(event) == 0 {
			return nil
		}
		skip := writeErr != nil
		if len(data) > 0 && m != nil {
			if m.observe(data) && dropUsageOnly {
				skip = true
			}
		}
		if !skip {
			if !wrote && start != nil {
				start()
			}
			if _, err := w.Write(event); err != nil {
				event, data = event[:0], data[:0]
				return err
			}
			wrote = true
			if fl != nil {
				fl.Flush()
			}
		}
		event, data = event[:0], data[:0]
		return nil
	}
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: gather it whole.
			full := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if len(line) > 0 {
			event = append(event, line...)
			trimmed := bytes.TrimRight(line, "\r\n")
			if len(trimmed) == 0 {
				if werr := emit(); werr != nil && writeErr == nil {
					writeErr = werr
				}
			} else if bytes.HasPrefix(trimmed, []byte("data:")) {
				d := bytes.TrimPrefix(trimmed[5:], []byte(" "))
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, d...)
			}
		}
		if err != nil {
			if werr := emit(); werr != nil && writeErr == nil {
				writeErr = werr
			}
			if err == io.EOF {
				return wrote, nil, writeErr
			}
			return wrote, err, writeErr
		}
	}
}
