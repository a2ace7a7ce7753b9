package sdkcheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/gateway/gatewaytest"
	"github.com/steward-evals/steward/internal/transcript"
)

const realKey = gatewaytest.RealKey

var (
	startFake        = gatewaytest.StartFake
	checkOnlyRealKey = gatewaytest.CheckOnlyRealKey
	encoded          = gatewaytest.Encoded
)

type harness struct {
	g   *gateway.Gateway
	url string
	log *gatewaytest.SyncBuffer
}

// startGateway serves a gateway on loopback until the test ends.
func startGateway(t *testing.T, cfg gateway.Config) *harness {
	t.Helper()
	g, url, log := gatewaytest.Start(t, func(log io.Writer) (*gateway.Gateway, error) {
		if cfg.Logger == nil {
			cfg.Logger = log
		}
		return gateway.New(cfg)
	})
	return &harness{g: g, url: url, log: log}
}

// usage drains the attempt's calls, then reads its usage.
func (h *harness) usage(t *testing.T, key string) (gateway.Usage, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Drain(ctx, key); err != nil {
		t.Fatal(err)
	}
	return h.g.Usage(key)
}

func mustTranscript(t *testing.T, h *harness, key string) *transcript.Transcript {
	t.Helper()
	return gatewaytest.MustTranscript(t, h.g, key)
}

// sdkCheck drives both official SDKs, unchanged, through the gateway at
// gwURL with token tok, streaming and not, and returns the tokens the SDKs
// themselves reported.
func sdkCheckGateway(t *testing.T, gwURL, tok string) (in, out int64) {
	t.Helper()
	ctx := context.Background()

	oc := openai.NewClient(ooption.WithBaseURL(gwURL+"/v1"), ooption.WithAPIKey(tok))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 6*7?")},
	}
	cc, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("openai chat: %v", err)
	}
	if len(cc.Choices) == 0 || cc.Choices[0].Message.Content == "" || cc.Usage.PromptTokens == 0 {
		t.Fatalf("openai chat answer: %+v", cc)
	}
	in += cc.Usage.PromptTokens
	out += cc.Usage.CompletionTokens

	st := oc.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var text strings.Builder
	for st.Next() {
		c := st.Current()
		acc.AddChunk(c)
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("openai stream: %v", err)
	}
	if text.Len() == 0 {
		t.Fatal("openai stream: no text")
	}
	if text.String() != cc.Choices[0].Message.Content {
		t.Logf("stream text %q vs non-stream %q", text.String(), cc.Choices[0].Message.Content)
	}

	emb, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-test",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil || len(emb.Data) == 0 {
		t.Fatalf("openai embeddings: %v", err)
	}
	in += emb.Usage.PromptTokens

	ac := anthropic.NewClient(aoption.WithBaseURL(gwURL), aoption.WithAPIKey(tok))
	mp := anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 6*7?"))},
	}
	msg, err := ac.Messages.New(ctx, mp)
	if err != nil {
		t.Fatalf("anthropic messages: %v", err)
	}
	if len(msg.Content) == 0 || msg.Usage.InputTokens == 0 {
		t.Fatalf("anthropic answer: %+v", msg)
	}
	in += msg.Usage.InputTokens
	out += msg.Usage.OutputTokens

	as := ac.Messages.NewStreaming(ctx, mp)
	var m anthropic.Message
	for as.Next() {
		if err := m.Accumulate(as.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := as.Err(); err != nil {
		t.Fatalf("anthropic stream: %v", err)
	}
	if len(m.Content) == 0 || m.Content[0].Text == "" {
		t.Fatalf("anthropic stream message: %+v", m)
	}
	in += m.Usage.InputTokens
	out += m.Usage.OutputTokens

	return in, out
}
func TestSDKsThroughGatewayMock(t *testing.T) {
	h := startGateway(t, gateway.Config{Upstream: "mock", Prices: gateway.Prices{InputPerMTok: 2, OutputPerMTok: 4}})
	tok := h.g.Issue("att-sdk", nil)
	sin, sout := sdkCheckGateway(t, h.url, tok)
	h.g.Revoke(tok)
	if err := h.g.Drain(context.Background(), "att-sdk"); err != nil {
		t.Fatal(err)
	}
	u, _ := h.usage(t, "att-sdk")
	// The OpenAI stream's usage is counted by the gateway though the SDK did
	// not ask for it (and did not see it), so the gateway counts more than the SDKs saw.
	if u.InputTokens <= sin || u.OutputTokens <= sout || u.Requests != 5 {
		t.Fatalf("gateway counted %+v, SDKs saw %d in / %d out", u, sin, sout)
	}
	oc := openai.NewClient(ooption.WithBaseURL(h.url+"/v1"), ooption.WithAPIKey(tok))
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("revoked token through the SDK: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(h.url), aoption.WithAPIKey(tok))
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "c", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "authentication_error") {
		t.Fatalf("revoked token through the anthropic SDK: %v", err)
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
			h := startGateway(t, gateway.Config{Upstream: upstreamKind, BaseURL: base, APIKey: realKey,
				Prices: gateway.Prices{InputPerMTok: 1, OutputPerMTok: 1}})
			tok := h.g.Issue("att-fp", nil)
			sin, sout := sdkCheckGateway(t, h.url, tok)
			h.g.Revoke(tok)
			if err := h.g.Drain(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
			st := fp.Stats()
			checkOnlyRealKey(t, st)
			if st.Succeeded != 5 {
				t.Fatalf("provider answered %d, want 5: %+v", st.Succeeded, st)
			}
			u, _ := h.usage(t, "att-fp")
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

// Through the strict fake provider with the real SDKs: every call the
// SDKs made is in the transcript, with its content.
func TestCaptureSDKCallsThroughFakeProvider(t *testing.T) {
	_, fu := startFake(t, fakeprovider.Config{RPM: 10000, TPM: 10_000_000})
	h := startGateway(t, gateway.Config{Upstream: "openai", BaseURL: fu + "/v1", APIKey: realKey})
	tok := h.g.Issue("att-sdk", nil)
	sdkCheckGateway(t, h.url, tok)
	h.g.Revoke(tok)
	tr := mustTranscript(t, h, "att-sdk")
	var routes []string
	for _, c := range tr.Calls {
		routes = append(routes, c.Route)
		if c.Status != 200 || c.Request == nil || (c.Response == nil && c.ResponseText == "") || c.Truncated {
			t.Errorf("call %s: %+v", c.Route, c)
		}
	}
	want := "/v1/chat/completions /v1/chat/completions /v1/embeddings /v1/messages /v1/messages"
	if strings.Join(routes, " ") != want {
		t.Errorf("routes %q, want %q", strings.Join(routes, " "), want)
	}
	for _, i := range []int{1, 4} {
		if !tr.Calls[i].Stream || !json.Valid(tr.Calls[i].Response) {
			t.Errorf("streamed call %d not assembled: %s %q", i, tr.Calls[i].Response, tr.Calls[i].ResponseText)
		}
	}
	if strings.Contains(encoded(t, tr), realKey) || strings.Contains(encoded(t, tr), tok) {
		t.Error("a secret reached the transcript")
	}
}
