package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A worker holds no secret: not the model key (whatever variable holds it),
// not a variable the eval set or _steward.yaml marks secret, not the
// runner's tokens. A local agent reads its worker's environment (its parent,
// the same user) and reports every secret value it finds there.
func TestWorkersHoldNoSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "_steward.yaml"), "secrets: [FLEET_SECRET]\n")
	writeFile(t, filepath.Join(dir, "steward.yaml"), `
model: {upstream: mock, name: mock-1, api_key_env: MY_MODEL_KEY}
secret_env: [HOOK_TOKEN]
tasks:
  - name: peek
    sandbox: {provider: local}
    agent: 'tr "\000" "\n" < /proc/$PPID/environ | grep -c "value-of-a-secret" ; true'
    scorer: {match: exact}
    samples:
      - {id: a, input: "x", target: "0"}
`)
	secrets := map[string]string{
		"MY_MODEL_KEY": "sk-value-of-a-secret-model", "OPENAI_API_KEY": "sk-value-of-a-secret-openai",
		"ANTHROPIC_API_KEY": "sk-value-of-a-secret-anthropic", "STEWARD_API_KEY": "value-of-a-secret-steward",
		"HOOK_TOKEN": "value-of-a-secret-hook", "FLEET_SECRET": "value-of-a-secret-fleet",
		"GITHUB_TOKEN": "ghs_value-of-a-secret", "ACTIONS_RUNTIME_TOKEN": "value-of-a-secret-runtime",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "value-of-a-secret-oidc",
	}
	cmd := exec.Command(exe, "launch", "--record", t.TempDir(), "--max-workers", "1", "steward.yaml")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range secrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil || !strings.Contains(out.String(), "1 passed") {
		t.Fatalf("a worker's environment holds secrets (the agent counted them; want 0): %v\n%s", err, out.String())
	}
}
