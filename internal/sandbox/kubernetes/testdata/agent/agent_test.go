// Package agent is compiled (go test -c) into the sandbox image of the
// kubernetes relay test: in a pod, it drives the official OpenAI SDK at the
// gateway through the relay, with the per-attempt token it was given.
package agent

import (
	"os"
	"testing"

	"github.com/steward-evals/steward/internal/mockmodel/sdkcheck"
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
