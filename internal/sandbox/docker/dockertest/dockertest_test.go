package dockertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Two suites' busybox images share no layer of their build chains: the legacy
// builder reuses an identical step's untagged layer across builds, and a suite
// removing its image with its parents then deletes a layer that another
// suite's concurrent build has just chosen from the cache ("No such image",
// seen in CI). With the owner copied first, every layer is the suite's own.
func TestBusyboxContextsShareNoLayer(t *testing.T) {
	Client(t)
	chains := make([][]string, 2)
	for i, suite := range []string{"a", "b"} {
		owner := fmt.Sprintf("dockertest-%s-%d", suite, os.Getpid()) // another checkout's run keeps its own
		tag := "steward-dockertest:" + owner
		dir := BusyboxContext(t, owner)
		run(t, "build", "--pull=false", "-q", "-t", tag, dir)
		t.Cleanup(func() { _, _ = CLI("rmi", "-f", tag) })
		for id := range strings.FieldsSeq(run(t, "history", "-q", tag)) {
			if id != "<missing>" {
				chains[i] = append(chains[i], id)
			}
		}
	}
	if len(chains[0]) < 4 {
		t.Fatalf("history of the first image holds %d layers, want every step's: %v", len(chains[0]), chains[0])
	}
	for _, id := range chains[0] {
		for _, other := range chains[1] {
			if id == other {
				t.Fatalf("layer %s is in both suites' chains:\n%v\n%v", id, chains[0], chains[1])
			}
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := CLI(args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
