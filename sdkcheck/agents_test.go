package sdkcheck_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/sdkcheck"
)

// The calls coding agents make, in the official SDKs' shapes, through the
// gateway and with nothing but the environment a sandbox gets
// (gateway.Env): Codex CLI's Responses API stream (OPENAI_BASE_URL,
// OPENAI_API_KEY), Claude Code's Messages stream, token count and beta
// header (ANTHROPIC_BASE_URL, and the key either as x-api-key or, with
// ANTHROPIC_AUTH_TOKEN, as a bearer token), and a mini-swe-agent style loop's
// chat completions; in front of the fake provider speaking OpenAI and
// Anthropic (docs/agents.md).
func TestAgentShapesThroughGateway(t *testing.T) {
	for _, upstream := range []string{"openai", "anthropic"} {
		t.Run(upstream, func(t *testing.T) {
			fp, fu := startFake(t, fakeprovider.Config{RPM: 10000, TPM: 10_000_000})
			base := fu + "/v1"
			if upstream == "anthropic" {
				base = fu
			}
			h := startGateway(t, gateway.Config{Upstream: upstream, BaseURL: base, APIKey: realKey})
			tok := h.g.Issue("att-agents", nil)
			env := map[string]string{}
			for _, kv := range gateway.Env(h.url, tok) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			if env["OPENAI_BASE_URL"] != h.url+"/v1" || env["ANTHROPIC_BASE_URL"] != h.url || env["OPENAI_API_KEY"] != tok || env["ANTHROPIC_API_KEY"] != tok {
				t.Fatalf("sandbox environment %v", env)
			}
			// Every shape: chat and its stream, Responses and its stream,
			// completions, embeddings, models, messages and their stream,
			// count_tokens.
			sdkcheck.All(t, env["ANTHROPIC_BASE_URL"], env["OPENAI_API_KEY"])
			// Claude Code with ANTHROPIC_AUTH_TOKEN: the token as a bearer,
			// and the beta header it sends.
			ac := anthropic.NewClient(aoption.WithBaseURL(env["ANTHROPIC_BASE_URL"]+"/"), aoption.WithAuthToken(tok),
				aoption.WithHeader("anthropic-beta", "claude-code-20250219"), aoption.WithMaxRetries(0))
			st := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(sdkcheck.ArithmeticPrompt))}})
			var m anthropic.Message
			for st.Next() {
				if err := m.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil || len(m.Content) == 0 || m.Content[0].Text != "84" {
				t.Fatalf("bearer-token stream: %v %+v", err, m.Content)
			}
			checkOnlyRealKey(t, fp.Stats())
			if strings.Contains(h.log.String(), realKey) {
				t.Fatal("the real key is in the gateway's log")
			}
		})
	}
}
