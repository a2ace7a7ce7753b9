package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
)

// TestGatewayWeighsThePaceByTheBody: the gateway tells its controller each
// request's size, so behind a provider whose tokens limit holds the pace, a
// request with a prompt five times the others' is followed by a longer gap
// than one of the usual size (the real gateway, the fake provider counting
// the prompt's tokens, a fake clock that moves only between requests).
func TestGatewayWeighsThePaceByTheBody(t *testing.T) {
	clk := clock.NewFake(testEpoch)
	_, fu := startFake(t, fakeprovider.Config{RPM: 6000, TPM: 60000, Clock: clk})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clk})
	ctl := h.g.Controller()
	tok := h.g.Issue("att-weigh", nil)
	var gapAfterBody func(body string, status int) time.Duration
	// gapAfter sends one request whose prompt is n words and returns the
	// pace's gap it left: how long after its admission the next request
	// may go (the clock stands still while it is in flight).
	gapAfter := func(n int) time.Duration {
		return gapAfterBody(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("word ", n)+`"}]}`, http.StatusOK)
	}
	gapAfterBody = func(body string, status int) time.Duration {
		t.Helper()
		clk.Advance(time.Hour) // the schedule is past, the buckets full
		sent := clk.Now()
		resp, _ := post(t, h.url, "/v1/chat/completions", tok, body, nil)
		if resp.StatusCode != status {
			t.Fatalf("status %d, want %d", resp.StatusCode, status)
		}
		ctl.mu.Lock()
		defer ctl.mu.Unlock()
		if !ctl.pacing {
			t.Fatal("not pacing behind an announced limit")
		}
		// A schedule long past restarts paceSlack before the admission.
		return ctl.nextAdmit.Sub(sent) + paceSlack
	}
	for i := 0; i < 8; i++ { // the averages settle on the usual size
		gapAfter(200)
	}
	usual := gapAfter(200)
	big := gapAfter(1000)
	if usual <= 0 || float64(big) < 2.5*float64(usual) {
		t.Fatalf("gap after the usual prompt %v, after one five times larger %v: want it weighed (over 2.5×)", usual, big)
	}
	// A large body the provider refuses (no model: a 400, no usage) costs
	// no tokens and tells nothing of its cost: the gap it was weighed by
	// is given back, so a sandbox sending such bodies does not take four
	// of the pace's gaps a turn.
	bad := gapAfterBody(`{"messages":[{"role":"user","content":"`+strings.Repeat("word ", 1000)+`"}]}`, http.StatusBadRequest)
	ctl.mu.Lock()
	plain := ctl.paceGap() // the pace's own gap now (the large answered prompt raised the average)
	ctl.mu.Unlock()
	if d := bad - plain; d < -plain/100 || d > plain/100 {
		t.Fatalf("gap after a large body refused with a 400 %v, want the pace's own %v (its weight given back)", bad, plain)
	}
}
