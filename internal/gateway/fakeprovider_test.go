package gateway

import (
	"context"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

func startFake(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Server, string) {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = realKey
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

// checkOnlyRealKey asserts the provider saw the real key and nothing else:
// no attempt token leaked upstream.
func checkOnlyRealKey(t *testing.T, st fakeprovider.Stats) {
	t.Helper()
	if len(st.APIKeys) != 1 || st.APIKeys[0] != realKey {
		t.Fatalf("provider saw keys %q, want only the real key", st.APIKeys)
	}
	if st.Unauthorized != 0 {
		t.Fatalf("provider refused %d requests as unauthorized", st.Unauthorized)
	}
}

func TestSDKsThroughGatewayFakeProvider(t *testing.T) {
	for _, upstreamKind := range []string{"openai", "anthropic"} {
		t.Run(upstreamKind, func(t *testing.T) {
			fp, fu := startFake(t, fakeprovider.Config{RPM: 10000, TPM: 10_000_000})
			base := fu + "/v1"
			if upstreamKind == "anthropic" {
				base = fu
			}
			h := startGateway(t, Config{Upstream: upstreamKind, BaseURL: base, APIKey: realKey,
				Prices: Prices{InputPerMTok: 1, OutputPerMTok: 1}})
			tok := h.g.Issue("att-fp", nil)
			sin, sout := sdkCheck(t, h.url, tok)
			st := fp.Stats()
			checkOnlyRealKey(t, st)
			if st.Succeeded != 5 {
				t.Fatalf("provider answered %d, want 5: %+v", st.Succeeded, st)
			}
			u, _ := h.g.Usage(tok)
			if u.InputTokens <= sin || u.OutputTokens <= sout {
				t.Fatalf("gateway counted %+v, SDKs saw %d/%d", u, sin, sout)
			}
			// The gateway charges what the provider says it served.
			// The gateway charges what the provider says it served (embeddings'
			// input tokens on top of the generating calls').
			if u.InputTokens < st.TokensIn || u.OutputTokens != st.TokensOut {
				t.Fatalf("gateway charged %d in / %d out; provider served %d / %d", u.InputTokens, u.OutputTokens, st.TokensIn, st.TokensOut)
			}
			if strings.Contains(h.log.String(), realKey) {
				t.Fatal("key in log")
			}
		})
	}
}

func TestFakeProviderFaultsAreRetried(t *testing.T) {
	fp, fu := startFake(t, fakeprovider.Config{ErrorRate: 0.3, DropRate: 0.2, Seed: 7})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: newInstantClock(), RetryLimit: 20})
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
	s := h.g.Window()
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
			h := startGateway(t, Config{Upstream: kind, BaseURL: base, APIKey: realKey, Clock: newInstantClock()})
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
	// instant must wait about a second, which the gateway does (on a clock
	// that the provider shares) instead of failing the agent.
	clk := newSharedClock()
	fp, fu := startFake(t, fakeprovider.Config{RPM: 60, Clock: clk})
	h := startGateway(t, Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey, Clock: clk})
	hooks := &hookLog{}
	tok := h.g.Issue("att-rl", hooks)
	for i := 0; i < 62; i++ {
		resp, body := post(t, h.url, "/v1/chat/completions", tok, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	st := fp.Stats()
	if st.RateLimited == 0 || st.Succeeded != 62 {
		t.Fatalf("provider stats %+v", st)
	}
	s := h.g.Window()
	if s.RateLimited == 0 || s.Episodes < 1 || s.Errors != 0 || s.Retries != s.RateLimited {
		t.Fatalf("signals %+v", s)
	}
	if !strings.HasPrefix(hooks.Events(), "start,end") {
		t.Fatalf("hooks %q", hooks.Events())
	}
}
