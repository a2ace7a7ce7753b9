package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/clock"
)

// An upstream that cannot be reached is the provider's failure, also when
// the agent gives up before the gateway's retries run out (its client's
// timeout, the attempt's end): the call counts as failed by the upstream, so
// the attempt is infra, never the agent's errored (issue 23 item 10).
func TestUnreachableUpstreamCountsWhenTheAgentGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there: connection refused

	clk := clock.NewFake(testEpoch)
	h := startGateway(t, Config{Upstream: "openai", BaseURL: dead, APIKey: realKey, Clock: clk})
	tok := h.g.Issue("att-unreachable", nil)
	before := clk.Pending()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	clk.BlockUntil(before + 1) // the gateway waits out its first retry's backoff
	cancel()                   // the agent gives up
	<-done
	h.settle(t)
	u, ok := h.usage(t, tok)
	if !ok || u.UpstreamFailed != 1 {
		t.Fatalf("usage %+v: the unreachable upstream's call is not counted as the upstream's failure", u)
	}
}
