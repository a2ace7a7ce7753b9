// Command relay is the relay binary of the kubernetes tests' relay image
// (the real one is the steward binary): /steward __kuberelay LISTEN CONTROL.
// "/steward fetch URL" prints what URL answers within 3 s, or exits 1 (the
// NetworkPolicy test's probe: busybox-static's wget cannot run FROM scratch).
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "fetch" {
		resp, err := (&http.Client{Timeout: 3 * time.Second}).Get(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		os.Stdout.Write(b)
		if resp.StatusCode != http.StatusOK {
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 4 || os.Args[1] != kuberelay.Arg {
		fmt.Fprintln(os.Stderr, "usage: relay", kuberelay.Arg, "SANDBOX-LISTEN CONTROL-LISTEN")
		os.Exit(2)
	}
	if err := kuberelay.Run(context.Background(), os.Args[2], os.Args[3], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
