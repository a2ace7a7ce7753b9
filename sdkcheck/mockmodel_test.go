package sdkcheck_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/steward-evals/steward/internal/mockmodel"
	"github.com/steward-evals/steward/sdkcheck"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mockmodel.New())
	t.Cleanup(srv.Close)
	return srv
}

func TestSDKs(t *testing.T) {
	srv := newServer(t)
	// The mock checks no key; any key works, as does none.
	sdkcheck.All(t, srv.URL, "any-key")
}

// The SDKs surface the mock's 400s as their typed API errors.
func TestSDKErrors(t *testing.T) {
	srv := newServer(t)
	oc := sdkcheck.OpenAIClient(srv.URL, "k")
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "mock"})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "messages" || oe.Code != "missing_required_parameter" {
		t.Fatalf("openai error = %v", err)
	}
	ac := sdkcheck.AnthropicClient(srv.URL, "k")
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model:    "mock",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Error(), "max_tokens") {
		t.Fatalf("anthropic error = %v", err)
	}
}

func TestMaxTokensTruncates(t *testing.T) {
	srv := newServer(t)
	oc := sdkcheck.OpenAIClient(srv.URL, "k")
	resp, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:               "mock",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("echo: one two six ten big")},
		MaxCompletionTokens: openai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "one two" || resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 2 {
		t.Fatalf("truncated = %q %q %+v", resp.Choices[0].Message.Content, resp.Choices[0].FinishReason, resp.Usage)
	}
	ac := sdkcheck.AnthropicClient(srv.URL, "k")
	msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "mock", MaxTokens: 3,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("echo: one two six ten big"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "one two six" || msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 3 {
		t.Fatalf("truncated = %q %q %+v", msg.Content[0].Text, msg.StopReason, msg.Usage)
	}
}

func TestAnthropicModelsShape(t *testing.T) {
	srv := newServer(t)
	ac := sdkcheck.AnthropicClient(srv.URL, "k")
	page, err := ac.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "mock" || page.Data[0].Type != "model" {
		t.Fatalf("models = %+v", page.Data)
	}
}
