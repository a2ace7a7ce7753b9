package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/gateway/gatewaytest"
)

// Nothing of an agent's request (its prompt, query parameters, headers)
// reaches the gateway's log, whatever the upstream does with it: drops
// the connection (the transport's error names the URL), refuses it for
// its spend limit, answers 502 or 429 echoing it, or redirects to a URL
// that carries it. The existing tests check the log for the key only.
func TestRequestNeverReachesTheLog(t *testing.T) {
	const marker = "SECRETPROMPT42"
	for _, mode := range []string{"drop", "spend", "502", "redirect", "429"} {
		up := newUpstream(t, "openai", func(n int64, w http.ResponseWriter, r *http.Request, body []byte) {
			switch mode {
			case "drop":
				hj, _ := w.(http.Hijacker)
				c, _, _ := hj.Hijack()
				c.Close()
			case "spend":
				w.WriteHeader(429)
				io.WriteString(w, `{"error":{"type":"insufficient_quota","message":"for `+strings.ReplaceAll(string(body), `"`, `'`)+`"}}`)
			case "502":
				w.WriteHeader(502)
				w.Write(body)
			case "redirect":
				w.Header().Set("Location", "/x?"+string(body))
				w.WriteHeader(302)
			case "429":
				w.Header().Set("retry-after", "1")
				w.WriteHeader(429)
				w.Write(body)
			}
		})
		log := &gatewaytest.SyncBuffer{}
		h := startGateway(t, Config{Upstream: "openai", BaseURL: up.baseURL(), APIKey: realKey, Clock: clock.NewInstant(testEpoch), RetryLimit: 1, Logger: log})
		tok := h.g.Issue("att-"+mode, nil)
		post(t, h.url, "/v1/chat/completions?api-version="+marker+"&after="+marker+"&beta="+marker, tok, `{"model":"m","messages":[{"role":"user","content":"`+marker+`"}]}`, map[string]string{"User-Agent": marker})
		if strings.Contains(log.String(), marker) {
			t.Errorf("%s: log has the request: %s", mode, log.String())
		}
		if !strings.Contains(log.String(), "attempt att-"+mode+": ") {
			t.Errorf("%s: nothing logged for the attempt: %s", mode, log.String())
		}
	}
}
