package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
)

func newMerge(env Env) *cobra.Command {
	var out, format, title string
	cmd := &cobra.Command{
		Use:   "merge --out DIR RECORD...",
		Short: "Combine shard records into one record and one report",
		Long: `Combine the newest run of each shard record (the .steward directories that
matrix jobs uploaded) into one run in the record at --out, then print its
report. Rows come out in the whole eval set's discovery order.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return exitWith(ExitBadInput, errors.New("--out is required: the record directory to merge into"))
			}
			rep, err := merge(cmd.Context(), out, args, title)
			if err != nil {
				return err
			}
			if err := render(env.Stdout, rep, format, env); err != nil {
				return err
			}
			if code := exitFor(rep, false); code != ExitOK {
				return exitWith(code, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "record directory to merge into")
	cmd.Flags().StringVar(&format, "format", "terminal", "terminal, markdown, json or junit")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	return cmd
}

func merge(ctx context.Context, out string, inputs []string, title string) (*report.Report, error) {
	dst, err := record.Open(ctx, out)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	id := "merge-" + time.Now().UTC().Format("20060102-150405-") + record.NewID("")[:6]
	var merged record.Run
	var rows []record.Attempt
	var ramp []record.RampPoint
	seen := map[int]string{}
	var shards []string
	for _, in := range inputs {
		dir := in
		if filepath.Base(in) == record.FileName {
			dir = filepath.Dir(in)
		}
		if _, err := os.Stat(filepath.Join(dir, record.FileName)); err != nil {
			return nil, exitWith(ExitBadInput, fmt.Errorf("merge: %s holds no record (%s): %w", in, record.FileName, err))
		}
		src, err := record.Open(ctx, dir)
		if err != nil {
			return nil, err
		}
		runs, err := src.Runs(ctx)
		if err != nil || len(runs) == 0 {
			src.Close()
			return nil, exitWith(ExitBadInput, fmt.Errorf("merge: the record %s holds no run", dir))
		}
		r := runs[0]
		if merged.ID == "" {
			merged = r
		}
		if r.Shard != "" {
			shards = append(shards, r.Shard)
		}
		if r.Started.Before(merged.Started) {
			merged.Started = r.Started
		}
		if r.Finished.After(merged.Finished) {
			merged.Finished = r.Finished
		}
		if r.Status != "finished" {
			merged.Status = r.Status
		}
		as, err := src.Attempts(ctx, r.ID)
		if err != nil {
			src.Close()
			return nil, err
		}
		for _, a := range as {
			if other, dup := seen[a.Seq]; dup {
				src.Close()
				return nil, exitWith(ExitBadInput, fmt.Errorf("merge: attempt %s/%s#%d is in two records (%s and %s): were they sharded from the same eval set?", a.Task, a.Sample, a.Attempt, other, dir))
			}
			seen[a.Seq] = dir
			rows = append(rows, a)
		}
		pts, err := src.Ramp(ctx, r.ID)
		src.Close()
		if err != nil {
			return nil, err
		}
		ramp = append(ramp, pts...)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	merged.ID = id
	merged.Shard = ""
	merged.Title = title
	merged.Plan = fmt.Sprintf("merged %d shard records (%s)", len(inputs), strings.Join(shards, ", "))
	if err := dst.StartRun(ctx, merged); err != nil {
		return nil, err
	}
	for _, a := range rows {
		a.RunID = id
		if err := dst.Publish(ctx, a); err != nil {
			return nil, err
		}
	}
	if err := dst.AddRamp(ctx, id, ramp); err != nil {
		return nil, err
	}
	status := merged.Status
	if status == "" || status == "running" {
		status = "finished"
	}
	if err := dst.FinishRun(ctx, id, status, merged.Finished, nil); err != nil {
		return nil, err
	}
	return report.FromRecord(ctx, dst, []string{id}, title)
}

func newAction(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "action",
		Short: "Run as the GitHub Action (reads INPUT_*, writes outputs, summary, annotations and the PR comment)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := ghaction.Run(cmd.Context(), ghaction.Env{Getenv: env.Getenv, Stdout: env.Stdout, Stderr: env.Stderr}, func(ctx context.Context, o ghaction.LaunchOptions) (*report.Report, int, error) {
				if o.Merge {
					out := o.Record
					if out == "" {
						out = ".steward"
					}
					rep, err := merge(ctx, out, o.Records, o.Title)
					if err != nil {
						return nil, ExitBadInput, err
					}
					return rep, exitFor(rep, false), nil
				}
				lenv := env
				if o.Log != nil {
					lenv.Stderr = o.Log
				}
				f := launchFlags{concurrency: o.Concurrency, budget: o.BudgetUSD, rerun: o.Rerun, earlyExit: o.EarlyExit,
					shard: o.Shard, title: o.Title, record: o.Record, samplesRamp: o.SamplesRamp, grace: 4 * time.Second}
				changed := func(name string) bool {
					switch name {
					case "max-concurrency":
						return o.Concurrency > 0
					case "record":
						return o.Record != ""
					case "samples-ramp":
						return o.SamplesRamp != ""
					}
					return false
				}
				lenv.Stdout = io.Discard // the action renders its own outputs
				if o.Mask != nil {
					maskModelKey(o.EvalSet, env, o.Mask)
				}
				rep, cancelled, err := launch(ctx, lenv, o.EvalSet, f, changed)
				if err != nil {
					code := ExitInfra
					if isBadInput(err) {
						code = ExitBadInput
					}
					return rep, code, err
				}
				if cancelled {
					return rep, ExitCancelled, context.Canceled
				}
				return rep, exitFor(rep, false), nil
			})
			if code != 0 {
				return exitWith(code, nil)
			}
			return nil
		},
	}
}

// maskModelKey registers the model's real key with the runner's masking.
func maskModelKey(path string, env Env, mask func(string)) {
	for _, name := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		if v := env.Getenv(name); v != "" {
			mask(v)
		}
	}
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "api_key_env:"); ok && k == "" {
				if key := env.Getenv(strings.Trim(strings.TrimSpace(v), `"'`)); key != "" {
					mask(key)
				}
			}
		}
	}
}

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
…; STEWARD_MODEL_SETTINGS) go with the request.`,
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
