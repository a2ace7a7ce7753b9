package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// otherSecret is a value from the configurable secret list.
const otherSecret = "ghp_OTHERsecretVALUE0123456789"

// TestHostileUpstreamKeyNeverReturns plays an upstream (or a proxy in front
// of it) that echoes the key and a listed secret everywhere it can: a 200
// body, headers, a redirect, an SSE line split across chunks, an error after
// retries, and a body in an encoding the gateway did not ask for. Nothing the
// sandbox receives holds either value.
func TestHostileUpstreamKeyNeverReturns(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		fl := w.(http.Flusher)
		switch r.URL.Query().Get("case") {
		case "body200":
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the key is %s and the token %s"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`, realKey, otherSecret)
		case "header":
			w.Header().Set("X-Echo-Key", realKey)
			w.Header().Add("X-Echo-Other", "Bearer "+otherSecret)
			w.Header().Set("X-"+realKey, "1")
			w.Header().Set("Set-Cookie", "k="+realKey)
			io.WriteString(w, chatOK)
		case "redirect":
			w.Header().Set("Location", "https://evil.invalid/steal?k="+realKey)
			w.WriteHeader(http.StatusFound)
			fmt.Fprintf(w, "moved: %s", realKey)
		case "redirect307":
			w.Header().Set("Location", "/v1/chat/completions?k="+realKey)
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			// The key split across chunks inside one data line, and the
			// secret split across three chunks.
			half := len(realKey) / 2
			io.WriteString(w, `data: {"choices":[{"delta":{"content":"`+realKey[:half])
			fl.Flush()
			io.WriteString(w, realKey[half:]+` and `+otherSecret[:5])
			fl.Flush()
			io.WriteString(w, otherSecret[5:12])
			fl.Flush()
			io.WriteString(w, otherSecret[12:]+`"}}]}`+"\n\n")
			fl.Flush()
			io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
		case "sse-tail":
			// The stream ends in the middle of a key prefix: held bytes must
			// still come out at the end.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"usage\":{\"prompt_tokens\":1}}\n\ndata: tail "+realKey[:6])
		case "error500":
			w.Header().Set("X-Debug", "key="+realKey)
			w.WriteHeader(500)
			fmt.Fprintf(w, `{"error":{"message":"bad key %s"}}`, realKey)
		case "encoded":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "\x1b"+realKey)
		case "404":
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":{"message":"no model for %s"}}`, otherSecret)
		}
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Secrets: []string{otherSecret}, Clock: newInstantClock(), RetryLimit: 1})
	tok := h.g.Issue("att-hostile", nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		name   string
		status int
		want   string
	}{
		{"body200", 200, "the key is [redacted] and the token [redacted]"},
		{"header", 200, `"hi"`},
		{"redirect", 502, "redirect (302)"},
		{"redirect307", 502, "redirect (307)"},
		{"sse", 200, `[redacted] and [redacted]"}}]}`},
		{"sse-tail", 200, "data: tail " + realKey[:6]},
		{"error500", 500, "bad key [redacted]"},
		{"encoded", 502, "content encoding (br)"},
		{"404", 404, "no model for [redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions?case="+c.name, strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var seen strings.Builder
			for k, vs := range resp.Header {
				fmt.Fprintf(&seen, "%s: %s\n", k, strings.Join(vs, ","))
			}
			seen.Write(b)
			all := seen.String()
			if strings.Contains(all, realKey) || strings.Contains(all, otherSecret) {
				t.Fatalf("a secret reached the sandbox:\n%s", all)
			}
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
				t.Fatalf("got %d, want %d with %q:\n%s", resp.StatusCode, c.status, c.want, all)
			}
			if resp.Header.Get("Location") != "" || resp.Header.Get("Set-Cookie") != "" {
				t.Fatalf("Location or Set-Cookie passed on:\n%s", all)
			}
		})
	}
	if strings.Contains(h.log.String(), realKey) || strings.Contains(h.log.String(), otherSecret) {
		t.Fatalf("a secret is in the log:\n%s", h.log.String())
	}
}

// TestStreamScrubberEverySplit writes a stream holding secrets in two pieces
// at every possible split point: the output is always the scrubbed whole.
func TestStreamScrubberEverySplit(t *testing.T) {
	s := newScrubber(realKey, otherSecret, "short")
	in := "data: x" + realKey + "y" + realKey[:5] + "z" + otherSecret + realKey + "\n\ntail" + realKey[:9]
	want := strings.ReplaceAll(strings.ReplaceAll(in, realKey, redacted), otherSecret, redacted)
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j += 7 {
			z := streamScrubber{s: s}
			var out []byte
			out = append(out, z.write([]byte(in[:i]))...)
			out = append(out, z.write([]byte(in[i:j]))...)
			out = append(out, z.write([]byte(in[j:]))...)
			out = append(out, z.flush()...)
			if string(out) != want {
				t.Fatalf("split at %d,%d:\n got %q\nwant %q", i, j, out, want)
			}
		}
	}
	// An event's end is never held back.
	z := streamScrubber{s: s}
	if got := string(z.write([]byte("data: a\n\n"))); got != "data: a\n\n" {
		t.Fatalf("held back %q", got)
	}
}

// rawRequest sends an exact request line, so no client cleans the path.
func rawRequest(t *testing.T, base, method, target, tok string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", method, target, tok)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestDotSegmentsAndEncodedSeparatorsRefused sends paths that a naive route
// check accepts but the upstream may resolve elsewhere (with the real key):
// dot segments, percent-encoded dots, slashes and backslashes, double
// encoding, encoded query and fragment characters. None reaches the upstream.
func TestDotSegmentsAndEncodedSeparatorsRefused(t *testing.T) {
	up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
		io.WriteString(w, `{"object":"list","data":[]}`)
	})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey})
	tok := h.g.Issue("att-path", nil)
	for _, target := range []string{
		"/v1/models/..",
		"/v1/models/.",
		"/v1/models/%2e%2e",
		"/v1/models/%2E%2E",
		"/v1/models/.%2e",
		"/v1/models/%252e%252e",
		"/v1/models/..%2f..%2forganization",
		"/v1/models/x%2f..%2f..%2fadmin",
		"/v1/models/..%5c..%5cadmin",
		"/v1/models/x%3Fa=1",
		"/v1/models/x%23frag",
		"/v1/models/x\\..\\admin",
		"/v1/./models",
		"/v1//models",
		"/v1/models/../models",
		"/v1/chat/completions/..",
		"/v1/chat/%2e%2e/completions",
	} {
		method := "GET"
		if strings.Contains(target, "chat") {
			method = "POST"
		}
		status, body := rawRequest(t, h.url, method, target, tok)
		if status != 400 && status != 404 {
			t.Errorf("%s %s: got %d %s, want a refusal", method, target, status, body)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("refused paths reached the upstream %d times", n)
	}
	// The routes themselves still work.
	if status, body := rawRequest(t, h.url, "GET", "/v1/models/ft:gpt-4o-mini:org:name:abc.1", tok); status != 200 {
		t.Fatalf("a model id with colons and dots: %d %s", status, body)
	}
}
