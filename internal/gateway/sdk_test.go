package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// sdkCheck drives both official SDKs, unchanged, through the gateway at
// gwURL with token tok, streaming and not, and returns the tokens the SDKs
// themselves reported.
func sdkCheck(t *testing.T, gwURL, tok string) (in, out int64) {
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
	h := startGateway(t, Config{Upstream: "mock", Prices: Prices{InputPerMTok: 2, OutputPerMTok: 4}})
	tok := h.g.Issue("att-sdk", nil)
	sin, sout := sdkCheck(t, h.url, tok)
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
