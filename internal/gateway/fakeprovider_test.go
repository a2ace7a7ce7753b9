package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway/gatewaytest"
)

var (
	startFake        = gatewaytest.StartFake
	checkOnlyRealKey = gatewaytest.CheckOnlyRealKey
)

func TestFakeProviderFaultsAreRetried(t *testing.T) {
	fp, fu := startFake(t, fakeprovider.Config{ErrorRate: 0.3, DropRate: 0.2, Seed: 7})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clock.NewInstant(testEpoch), RetryLimit: 20})
	hooks := &hookLog{}
	tok := h.g.Issue("att-f", hooks)
	for i := 0; i < 30; i++ {
		resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: agent saw %d %s", i, resp.StatusCode, body)
		}
	}
	st := fp.Stats()
	checkOnlyRealKey(t, st)
	if st.Injected5xx == 0 || st.Dropped == 0 || st.Succeeded != 30 {
		t.Fatalf("faults not exercised: %+v", st)
	}
	s := h.window(t)
	if int64(s.Retries) != st.Injected5xx+st.Dropped || s.Errors != 0 {
		t.Fatalf("retries %d, provider faults %d+%d", s.Retries, st.Injected5xx, st.Dropped)
	}
	if n := strings.Count(hooks.Events(), "start"); n != s.Retries {
		t.Fatalf("BackoffStart called %d times for %d retries", n, s.Retries)
	}
}

func TestFakeProviderSpendLimitFailsFast(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			fp, fu := startFake(t, fakeprovider.Config{SpendLimit: true})
			base, path, hdr := fu+"/v1", "/v1/chat/completions", map[string]string(nil)
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
			if kind == "anthropic" {
				base, path, hdr = fu, "/v1/messages", map[string]string{"anthropic-version": "2023-06-01"}
				body = `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
			}
			h := startGateway(t, Config{Upstream: kind, BaseURL: base, APIKey: realKey, Clock: clock.NewInstant(testEpoch)})
			tok := h.g.Issue("att-sl", nil)
			resp, rb := post(t, h.url, path, tok, body, hdr)
			if resp.StatusCode != 429 || !strings.Contains(rb, "spend limit or quota") {
				t.Fatalf("got %d %s", resp.StatusCode, rb)
			}
			if st := fp.Stats(); st.QuotaRefused != 1 || st.Requests != 1 {
				t.Fatalf("spend-limit refusal retried: %+v", st)
			}
		})
	}
}

func TestFakeProvider429sRetriedToSuccess(t *testing.T) {
	// 60 RPM with a bucket that starts full: the 61st request in the same
	// instant must wait about a second. The gateway and the provider share
	// a clock, so waits are the provider's own time.
	for _, tc := range []struct {
		name   string
		policy Policy
	}{{"inspect", InspectPolicy()}, {"steward", StewardPolicy()}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewInstant(testEpoch)
			fp, fu := startFake(t, fakeprovider.Config{RPM: 60, Clock: clk})
			p := tc.policy
			h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clk, Policy: &p})
			hooks := &hookLog{}
			tok := h.g.Issue("att-rl", hooks)
			for i := 0; i < 70; i++ {
				resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
				if resp.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
			}
			st := fp.Stats()
			s := h.window(t)
			if st.Succeeded != 70 || s.Errors != 0 {
				t.Fatalf("provider %+v, signals %+v", st, s)
			}
			switch tc.name {
			case "inspect":
				// Blind to the headers: it meets 429s and retries them.
				if st.RateLimited == 0 || s.Episodes < 1 || !s.Pushback || s.Retries != s.RateLimited || !strings.HasPrefix(hooks.Events(), "start,end") {
					t.Fatalf("provider %+v, signals %+v, hooks %q", st, s, hooks.Events())
				}
			case "steward":
				// Reads the announced 60 RPM, paces under it from the first
				// answer, and meets no 429 at all; the window says the pace,
				// not the sample limit, held requests back.
				if st.RateLimited != 0 || !h.g.Controller().Pacing() || !s.Saturated {
					t.Fatalf("steward met %d 429s (pacing %v, saturated %v)", st.RateLimited, h.g.Controller().Pacing(), s.Saturated)
				}
				if el := clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); el < 5*time.Second {
					t.Fatalf("70 requests at 60 RPM from a full bucket took %s of provider time", el)
				}
			}
		})
	}
}
