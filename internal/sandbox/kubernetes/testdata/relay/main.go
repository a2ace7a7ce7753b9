// Command relay is the relay binary of the kubernetes tests' relay image
// (the real one is the steward binary): /steward __kuberelay LISTEN CONTROL.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != kuberelay.Arg {
		fmt.Fprintln(os.Stderr, "usage: relay", kuberelay.Arg, "SANDBOX-LISTEN CONTROL-LISTEN")
		os.Exit(2)
	}
	if err := kuberelay.Run(context.Background(), os.Args[2], os.Args[3], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
