// Command egressd is `steward __egress LISTEN SPEC` alone, so that
// TestEgressAllowlist builds a small static binary for the proxy image
// instead of the whole CLI.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/steward-evals/steward/internal/egress"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != egress.Arg {
		fmt.Fprintln(os.Stderr, "usage: egressd __egress LISTEN SPEC")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := egress.Run(ctx, os.Args[2], os.Args[3], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
