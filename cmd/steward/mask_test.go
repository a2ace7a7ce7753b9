package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/fakeprovider"
	"github.com/steward-evals/steward/internal/ghaction/fakegithub"
	"github.com/steward-evals/steward/internal/ghaction/runnerlog"
)

// keyEvalSet talks to a real-style upstream (the fake provider) with the key
// in a variable whose name only the eval set knows.
const keyEvalSet = `
name: masked
model:
  upstream: openai
  name: gpt-test
  base_url: BASE/v1
  api_key_env: MY_MODEL_KEY   # the variable's name
secret_env: [MY_HOOK_TOKEN]
tasks:
  - name: arith
    sandbox: {provider: local}
    exclusive: false
    agent: '"$STEWARD_BIN" agent chat'
    scorer: {match: numeric}
    samples:
      - {id: mul, input: "What is 6*7?", target: "42"}
`

// No secret reaches the job log: the model key named by api_key_env, the
// variables the eval set marks secret (secret_env) and the GitHub token are
// masked before workflow commands are switched off (a mask
// added while they are off is ignored by the runner, which then prints the
// add-mask line and the key with it). The log is read as the runner reads it.
func TestActionMasksSecretsBeforeCommandsStop(t *testing.T) {
	t.Parallel()
	const key = "sk-modelKey-9f8e7d6c5b4a"
	const tok = "ghs_maskedToken4321"
	const hook = "hook-secret-5a6b7c8d"
	fp := fakeprovider.New(fakeprovider.Config{APIKey: key})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, err := fp.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gh := fakegithub.New(t)
	gh.AddToken(tok, "github-actions[bot]", true)
	gh.AddPullRequest("octo", "evals", 17)

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "steward.yaml"), strings.Replace(keyEvalSet, "BASE", base, 1))
	g := newGHEnv(t, dir, gh.URL, 17)
	g.vars["INPUT_GITHUB-TOKEN"] = tok
	g.vars["MY_MODEL_KEY"] = key
	g.vars["MY_HOOK_TOKEN"] = hook
	out, code := g.run(t)
	if code != 0 {
		t.Fatalf("exit %d (the key must reach the provider):\n%s", code, out)
	}
	if st := fp.Stats(); !slices.Contains(st.APIKeys, key) || st.Succeeded == 0 {
		t.Fatalf("the provider never saw the key: %+v", st)
	}
	l := runnerlog.Parse(out)
	if l.Stops == 0 || l.Unresumed {
		t.Fatalf("workflow commands: %d stops, unresumed %v", l.Stops, l.Unresumed)
	}
	for _, s := range []string{key, tok, hook} {
		if !slices.Contains(l.MasksBeforeStop, s) {
			t.Errorf("%.6s… is not masked before the first ::stop-commands:: (masks before: %d, all: %d)", s, len(l.MasksBeforeStop), len(l.Masks))
		}
	}
	if leaks := l.Leaks(key, tok, hook); len(leaks) > 0 {
		t.Fatalf("the job log shows %d secret(s):\n%s", len(leaks), l.Text())
	}
}
