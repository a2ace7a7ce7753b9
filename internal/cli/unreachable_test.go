package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A provider that cannot be reached is an infrastructure error: the attempt
// is infra, not errored, and the launch exits 3, not 1, also when the agent
// gives up (its client's timeout) before the gateway's retries run out
// (issue 23 item 10).
func TestUnreachableProviderIsInfra(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("no curl for the agent")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there: connection refused
	dir := t.TempDir()
	set := writeFile(t, filepath.Join(dir, "steward.yaml"), `name: unreachable
model:
  upstream: openai
  name: gpt-test
  base_url: http://`+dead+`/v1
tasks:
  - name: ask
    sandbox: {provider: local}
    exclusive: false
    agent: 'curl -sS --max-time 2 -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" -d "{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" "$OPENAI_BASE_URL/chat/completions"'
    samples:
      - {id: a, input: hi, target: hello}
`)
	s := newStreams()
	s.env["PATH"] = os.Getenv("PATH")
	s.env["OPENAI_API_KEY"] = "sk-test-unreachable-0123456789"
	code := s.run(t, "launch", "--record", filepath.Join(dir, "rec"), set)
	if code != ExitInfra {
		t.Fatalf("exit %d, want 3 (infrastructure)\nstdout:\n%s\nstderr:\n%s", code, s.stdout.String(), s.stderr.String())
	}
	if out := s.stdout.String() + s.stderr.String(); !strings.Contains(out, "infra") {
		t.Errorf("the attempt is not shown as infra:\n%s", out)
	}
}
