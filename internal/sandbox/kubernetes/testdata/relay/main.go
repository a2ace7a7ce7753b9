// Command relay is the relay binary of the kubernetes tests' relay image
// (the real one is the steward binary): /steward __kuberelay LISTEN CONTROL.
// "/steward fetch URL" prints what URL answers within 3 s, or exits 1 (the
// NetworkPolicy test's probe: busybox-static's wget cannot run FROM scratch).
// "/steward __kuberelay-ready ADDR" is the relay pod's startup probe, and
// "/steward __late DURATION __kuberelay ..." a relay that listens late.
// The same binary is the tests' gateway client in sandbox pods:
// /steward __client ADDR TOKEN [PROXY-LINE] sends GET /v1/models with the
// token over a fresh connection to ADDR, first writing PROXY-LINE (a forged
// PROXY protocol line) when given, and prints "status N".
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == kuberelay.ReadyArg {
		if err := kuberelay.Ready(context.Background(), os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "__late" {
		// A relay that listens late, as one on a loaded node does: the
		// behaviour under test (TestClusterRelayListensLate), not a wait.
		d, err := time.ParseDuration(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		time.Sleep(d)
		os.Args = append(os.Args[:1], os.Args[3:]...)
	}
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
	if len(os.Args) >= 4 && os.Args[1] == "__client" {
		os.Exit(client(os.Args[2], os.Args[3], os.Args[4:]))
	}
	if len(os.Args) != 4 || os.Args[1] != kuberelay.Arg {
		fmt.Fprintln(os.Stderr, "usage: relay", kuberelay.Arg, "SANDBOX-LISTEN CONTROL-LISTEN | relay __client ADDR TOKEN [PROXY-LINE]")
		os.Exit(2)
	}
	if err := kuberelay.Run(context.Background(), os.Args[2], os.Args[3], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func client(addr, token string, pre []string) int {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if len(pre) > 0 && pre[0] != "" {
		io.WriteString(c, pre[0]+"\r\n")
	}
	fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("status %d\n%s\n", resp.StatusCode, b)
	return 0
}
