package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
)

// usageMeter keeps the largest input and output counts seen in a response
// (a format may report usage once, or, as Anthropic's stream does, input
// at the start and cumulative output later).
type usageMeter struct {
	api     API // the route's format
	in, out int64
	seen    bool
}

// observe reads usage from one JSON document as the route's format
// reports it; usageOnly reports a chunk that carries usage and nothing else
// (the extra chunk OpenAI's include_usage adds).
func (m *usageMeter) observe(doc []byte) (usageOnly bool) {
	in, out, ok, usageOnly := usageOf(m.api, doc)
	if ok {
		m.seen = true
		m.in = max(m.in, in)
		m.out = max(m.out, out)
	}
	return usageOnly
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
