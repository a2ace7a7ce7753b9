//go:build kubeagent

// Package agent is compiled (go test -C sdkcheck -tags kubeagent -c) into the sandbox image of the
// kubernetes relay test: in a pod, it drives the official OpenAI SDK at the
// gateway through the relay, with the per-attempt token it was given. The build tag keeps it out of
// `go test ./...`: it runs only in that pod, where the gateway is.
package agent

import (
	"os"
	"testing"

	"github.com/steward-evals/steward/sdkcheck"
)

func TestAgent(t *testing.T) {
	url, key := os.Getenv("OPENAI_BASE_URL"), os.Getenv("OPENAI_API_KEY")
	if url == "" || key == "" {
		t.Fatal("OPENAI_BASE_URL and OPENAI_API_KEY must be set")
	}
	url = url[:len(url)-len("/v1")]
	sdkcheck.OpenAIChat(t, url, key)
	sdkcheck.OpenAIChatStream(t, url, key)
}
