// Package sdkcheck drives the official OpenAI and Anthropic Go SDKs against a
// server that answers like the mock upstream (mockmodel, fakeprovider, or the
// gateway in front of either) and checks that every response parses and
// carries the mock's answer and usage. It is its own module (sdkcheck/go.mod,
// run by `make test`) so that the SDKs and what they pull in stay out of
// Steward's build: the main module does not require them. Its tests check
// the mock, the fake provider and the gateway with the real SDKs.
package sdkcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/steward-evals/steward/internal/mockmodel"
)

// OpenAIClient is an openai-go client for baseURL (the server root; "/v1"
// is added) with the given key and no retries.
func OpenAIClient(baseURL, key string, opts ...option.RequestOption) *openai.Client {
	all := []option.RequestOption{
		option.WithBaseURL(strings.TrimSuffix(baseURL, "/") + "/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(30 * time.Second),
	}
	c := openai.NewClient(append(all, opts...)...)
	return &c
}

// AnthropicClient is an anthropic-sdk-go client for baseURL (the server
// root) with the given key and no retries.
func AnthropicClient(baseURL, key string, opts ...aoption.RequestOption) *anthropic.Client {
	all := []aoption.RequestOption{
		aoption.WithBaseURL(strings.TrimSuffix(baseURL, "/") + "/"),
		aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0),
		aoption.WithRequestTimeout(30 * time.Second),
	}
	c := anthropic.NewClient(append(all, opts...)...)
	return &c
}

// Prompts used by the checks, and the answers the mock gives them.
const (
	ArithmeticPrompt = "What is 12*(3+4)?"
	EchoPrompt       = "echo: The quick brown fox jumps over the lazy dog"
)

// chatInputTokens is the mock's count for one user message in chat or messages.
func chatInputTokens(prompt string, api mockmodel.API) int64 {
	if api == mockmodel.Anthropic {
		return 3 + mockmodel.CountTokens(prompt)
	}
	return 3 + 3 + mockmodel.CountTokens(prompt)
}

// All runs every check as subtests against baseURL with key.
func All(t *testing.T, baseURL, key string) {
	t.Helper()
	t.Run("openai/chat", func(t *testing.T) { OpenAIChat(t, baseURL, key) })
	t.Run("openai/chat-stream", func(t *testing.T) { OpenAIChatStream(t, baseURL, key) })
	t.Run("openai/responses", func(t *testing.T) { OpenAIResponses(t, baseURL, key) })
	t.Run("openai/responses-stream", func(t *testing.T) { OpenAIResponsesStream(t, baseURL, key) })
	t.Run("openai/completions", func(t *testing.T) { OpenAICompletions(t, baseURL, key) })
	t.Run("openai/embeddings", func(t *testing.T) { OpenAIEmbeddings(t, baseURL, key) })
	t.Run("openai/models", func(t *testing.T) { OpenAIModels(t, baseURL, key) })
	t.Run("anthropic/messages", func(t *testing.T) { AnthropicMessages(t, baseURL, key) })
	t.Run("anthropic/messages-stream", func(t *testing.T) { AnthropicMessagesStream(t, baseURL, key) })
	t.Run("anthropic/count-tokens", func(t *testing.T) { AnthropicCountTokens(t, baseURL, key) })
}

// OpenAIChat checks a non-streaming chat completion.
func OpenAIChat(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage(ArithmeticPrompt)},
	})
	if err != nil {
		t.Fatalf("chat completion: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "84" {
		t.Fatalf("choices = %+v, want one with content 84", resp.Choices)
	}
	if resp.Choices[0].FinishReason != "stop" || resp.Model != "mock" || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("finish=%q model=%q id=%q", resp.Choices[0].FinishReason, resp.Model, resp.ID)
	}
	wantIn := 3 + 3 + mockmodel.CountTokens("You are terse.") + 3 + mockmodel.CountTokens(ArithmeticPrompt)
	u := resp.Usage
	if u.PromptTokens != wantIn || u.CompletionTokens != 1 || u.TotalTokens != wantIn+1 || !u.JSON.PromptTokens.Valid() {
		t.Errorf("usage = %+v, want prompt %d completion 1", u, wantIn)
	}
}

// OpenAIChatStream checks a streaming chat completion with include_usage.
func OpenAIChatStream(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "mock",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(EchoPrompt)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	chunks, contentChunks := 0, 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			contentChunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	want := mockmodel.Reply(EchoPrompt)
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want {
		t.Fatalf("accumulated = %+v, want %q", acc.Choices, want)
	}
	if int64(contentChunks) != mockmodel.CountTokens(want) {
		t.Errorf("content chunks = %d, want one per token (%d)", contentChunks, mockmodel.CountTokens(want))
	}
	if acc.Choices[0].FinishReason != "stop" {
		t.Errorf("finish = %q", acc.Choices[0].FinishReason)
	}
	if acc.Usage.PromptTokens != chatInputTokens(EchoPrompt, mockmodel.OpenAI) || acc.Usage.CompletionTokens != mockmodel.CountTokens(want) {
		t.Errorf("stream usage = %+v", acc.Usage)
	}
}

// OpenAIResponses checks a non-streaming Responses API call.
func OpenAIResponses(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	resp, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "mock",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(ArithmeticPrompt)},
	})
	if err != nil {
		t.Fatalf("responses: %v", err)
	}
	if got := resp.OutputText(); got != "84" {
		t.Fatalf("output text = %q, want 84", got)
	}
	if resp.Status != "completed" || resp.Usage.InputTokens != 3+mockmodel.CountTokens(ArithmeticPrompt) || resp.Usage.OutputTokens != 1 {
		t.Errorf("status=%q usage=%+v", resp.Status, resp.Usage)
	}
}

// OpenAIResponsesStream checks a streaming Responses API call.
func OpenAIResponsesStream(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	stream := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "mock",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(EchoPrompt)},
	})
	defer stream.Close()
	var text strings.Builder
	var final responses.Response
	types := map[string]int{}
	lastSeq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		types[ev.Type]++
		if ev.SequenceNumber != lastSeq+1 {
			t.Errorf("sequence_number %d after %d", ev.SequenceNumber, lastSeq)
		}
		lastSeq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("responses stream: %v", err)
	}
	want := mockmodel.Reply(EchoPrompt)
	if text.String() != want || final.OutputText() != want {
		t.Fatalf("deltas %q, final %q, want %q", text.String(), final.OutputText(), want)
	}
	for _, ty := range []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"} {
		if types[ty] != 1 {
			t.Errorf("event %s seen %d times, want 1", ty, types[ty])
		}
	}
	if final.Usage.OutputTokens != mockmodel.CountTokens(want) || final.Usage.InputTokens == 0 {
		t.Errorf("final usage = %+v", final.Usage)
	}
}

// OpenAICompletions checks the legacy completions API, plain and streaming.
func OpenAICompletions(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	params := openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel("mock"),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(ArithmeticPrompt)},
	}
	resp, err := c.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatalf("completions: %v", err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Text != "84" || resp.Usage.PromptTokens != mockmodel.CountTokens(ArithmeticPrompt) {
		t.Fatalf("completion = %+v usage %+v", resp.Choices, resp.Usage)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Completions.NewStreaming(context.Background(), params)
	defer stream.Close()
	var text strings.Builder
	var usage openai.CompletionUsage
	for stream.Next() {
		ch := stream.Current()
		for _, choice := range ch.Choices {
			text.WriteString(choice.Text)
		}
		if ch.JSON.Usage.Valid() {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("completions stream: %v", err)
	}
	if text.String() != "84" || usage.CompletionTokens != 1 {
		t.Fatalf("stream text %q usage %+v", text.String(), usage)
	}
}

// OpenAIEmbeddings checks embeddings: dimensions, determinism, usage.
func OpenAIEmbeddings(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	resp, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model:      "mock-embedding",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}},
		Dimensions: openai.Int(16),
	})
	if err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	if len(resp.Data) != 2 || len(resp.Data[0].Embedding) != 16 || resp.Data[1].Index != 1 {
		t.Fatalf("embeddings data = %+v", resp.Data)
	}
	want := mockmodel.Embedding("alpha", 16)
	for i, v := range resp.Data[0].Embedding {
		if float32(v) != want[i] {
			t.Fatalf("embedding[0][%d] = %v, want %v", i, v, want[i])
		}
	}
	if n := mockmodel.CountTokens("alpha") + mockmodel.CountTokens("beta"); resp.Usage.PromptTokens != n || resp.Usage.TotalTokens != n {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// OpenAIModels checks the model list.
func OpenAIModels(t *testing.T, baseURL, key string) {
	t.Helper()
	c := OpenAIClient(baseURL, key)
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatalf("models: %v", err)
	}
	if len(page.Data) == 0 || page.Data[0].ID != "mock" || page.Data[0].Object != "model" {
		t.Fatalf("models = %+v", page.Data)
	}
}

func anthropicParams(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "mock",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
}

// AnthropicMessages checks a non-streaming Messages API call.
func AnthropicMessages(t *testing.T, baseURL, key string) {
	t.Helper()
	c := AnthropicClient(baseURL, key)
	msg, err := c.Messages.New(context.Background(), anthropicParams(ArithmeticPrompt))
	if err != nil {
		t.Fatalf("messages: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "84" {
		t.Fatalf("content = %+v, want one text block 84", msg.Content)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Errorf("stop=%q role=%q id=%q", msg.StopReason, msg.Role, msg.ID)
	}
	if msg.Usage.InputTokens != chatInputTokens(ArithmeticPrompt, mockmodel.Anthropic) || msg.Usage.OutputTokens != 1 {
		t.Errorf("usage = %+v", msg.Usage)
	}
}

// AnthropicMessagesStream checks a streaming Messages API call: every
// event type, the accumulated message and its usage.
func AnthropicMessagesStream(t *testing.T, baseURL, key string) {
	t.Helper()
	c := AnthropicClient(baseURL, key)
	stream := c.Messages.NewStreaming(context.Background(), anthropicParams(EchoPrompt))
	defer stream.Close()
	var msg anthropic.Message
	types := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		types[ev.Type]++
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("messages stream: %v", err)
	}
	want := mockmodel.Reply(EchoPrompt)
	if len(msg.Content) != 1 || msg.Content[0].Text != want {
		t.Fatalf("accumulated content = %+v, want %q", msg.Content, want)
	}
	n := mockmodel.CountTokens(want)
	if types["message_start"] != 1 || types["content_block_start"] != 1 || int64(types["content_block_delta"]) != n ||
		types["content_block_stop"] != 1 || types["message_delta"] != 1 || types["message_stop"] != 1 {
		t.Errorf("event counts = %v", types)
	}
	if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens != n || msg.Usage.InputTokens != chatInputTokens(EchoPrompt, mockmodel.Anthropic) {
		t.Errorf("stop=%q usage=%+v", msg.StopReason, msg.Usage)
	}
}

// AnthropicCountTokens checks /v1/messages/count_tokens.
func AnthropicCountTokens(t *testing.T, baseURL, key string) {
	t.Helper()
	c := AnthropicClient(baseURL, key)
	res, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "mock",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(ArithmeticPrompt))},
	})
	if err != nil {
		t.Fatalf("count tokens: %v", err)
	}
	if res.InputTokens != chatInputTokens(ArithmeticPrompt, mockmodel.Anthropic) {
		t.Errorf("input tokens = %d", res.InputTokens)
	}
}
