package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// chatRequest is the built-in chat agent's request body: the whole message
// list when the input is one (inputJSON), else the text as a user message;
// the system prompt first; the model settings (a JSON object) alongside,
// never replacing the model or the messages.
func chatRequest(model, system, input, inputJSON, settings string) ([]byte, error) {
	var msgs []any
	var list []map[string]any
	if err := json.Unmarshal([]byte(inputJSON), &list); err == nil && len(list) > 0 {
		for i, m := range list {
			if r, _ := m["role"].(string); r == "" || m["content"] == nil {
				return nil, fmt.Errorf("STEWARD_INPUT_JSON: message %d has no role or content", i+1)
			}
			msgs = append(msgs, m)
		}
	} else {
		msgs = append(msgs, map[string]any{"role": "user", "content": input})
	}
	if system != "" {
		msgs = append([]any{map[string]any{"role": "system", "content": system}}, msgs...)
	}
	body := map[string]any{}
	if settings != "" {
		if err := json.Unmarshal([]byte(settings), &body); err != nil {
			return nil, fmt.Errorf("STEWARD_MODEL_SETTINGS is not a JSON object: %w", err)
		}
	}
	delete(body, "stream") // this agent reads one JSON reply
	body["model"], body["messages"] = model, msgs
	return json.Marshal(body)
}

func newAgent(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Built-in agents for quick starts"}
	var system string
	chat := &cobra.Command{
		Use:   "chat",
		Short: "Send STEWARD_INPUT to the model through the gateway and print the reply",
		Long: `A minimal model-only agent: it sends the sample's input to
OPENAI_BASE_URL/chat/completions with OPENAI_API_KEY (the gateway and the
attempt's token, set by Steward) and prints the reply on stdout. An input
that is a list of chat messages is sent whole (system prompt and history
included); a text input is sent as one user message. --system puts a system
prompt first. The model settings (model.settings: temperature, max_tokens,
…; STEWARD_MODEL_SETTINGS) go with the request. A multiple-choice sample's
input already holds its choices lettered and asks for 'ANSWER: $LETTER' (the
task's choices_template, Inspect's prompt by default), judged by match: choice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base := env.Getenv("OPENAI_BASE_URL")
			if base == "" {
				return exitWith(ExitBadInput, errors.New("OPENAI_BASE_URL is not set: run this agent inside a Steward sandbox"))
			}
			model := env.Getenv("STEWARD_MODEL")
			if model == "" {
				model = "mock"
			}
			body, err := chatRequest(model, system, env.Getenv("STEWARD_INPUT"), env.Getenv("STEWARD_INPUT_JSON"), env.Getenv("STEWARD_MODEL_SETTINGS"))
			if err != nil {
				return exitWith(ExitBadInput, err)
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimSuffix(base, "/")+"/chat/completions", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+env.Getenv("OPENAI_API_KEY"))
			resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
			if err != nil {
				return fmt.Errorf("call the model: %w", err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the model answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
			}
			var out struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
				return fmt.Errorf("read the model's reply: %v", err)
			}
			fmt.Fprintln(env.Stdout, out.Choices[0].Message.Content)
			return nil
		},
	}
	chat.Flags().StringVar(&system, "system", "", "a system prompt")
	cmd.AddCommand(chat)
	return cmd
}
