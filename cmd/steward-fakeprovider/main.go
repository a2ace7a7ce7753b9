// Command steward-fakeprovider runs the fake model provider
// (internal/fakeprovider) as its own process, for benchmarks and manual
// tests. It prints its base URL on stdout, then serves until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/steward-evals/steward/internal/fakeprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("steward-fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg fakeprovider.Config
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "API key callers must send (empty: any non-empty key)")
	fs.IntVar(&cfg.RPM, "rpm", 0, "requests per minute (0: unlimited)")
	fs.IntVar(&cfg.TPM, "tpm", 0, "tokens (input + output) per minute (0: unlimited)")
	fs.DurationVar(&cfg.Interval, "interval", 0, "enforce the limits over this interval, e.g. 1s (0: a minute)")
	fs.DurationVar(&cfg.BaseLatency, "base-latency", 0, "time to first byte, e.g. 300ms")
	fs.DurationVar(&cfg.PerTokenLatency, "per-token-latency", 0, "added per output token, e.g. 20ms")
	fs.Float64Var(&cfg.TimeScale, "time-scale", 1, "multiplies every latency (0.01 = 100x faster)")
	fs.Float64Var(&cfg.ErrorRate, "error-rate", 0, "fraction of admitted requests answered with -error-status")
	fs.IntVar(&cfg.ErrorStatus, "error-status", 500, "status of injected errors (500, 502, 503, 529)")
	fs.Float64Var(&cfg.DropRate, "drop-rate", 0, "fraction of admitted requests whose connection is closed")
	fs.IntVar(&cfg.DropAfterTokens, "drop-after-tokens", 0, "cut dropped streams after this many tokens instead of before the answer")
	fs.Float64Var(&cfg.SlowRate, "slow-rate", 0, "fraction of admitted requests that are slow")
	fs.DurationVar(&cfg.SlowLatency, "slow-latency", 0, "extra time to first byte of a slow request")
	fs.BoolVar(&cfg.SpendLimit, "spend-limit", false, "refuse every request with 429 insufficient_quota (no Retry-After)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for fault draws and ids")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "steward-fakeprovider: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	srv := fakeprovider.New(cfg)
	url, err := srv.Start(ctx, *addr)
	if err != nil {
		fmt.Fprintf(stderr, "steward-fakeprovider: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, url)
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "steward-fakeprovider: %v\n", err)
		return 1
	}
	st := srv.Stats()
	fmt.Fprintf(stderr, "steward-fakeprovider: %d requests, %d ok, %d rate-limited, %d quota, %d 5xx, %d dropped, %d tokens in, %d out, max in flight %d\n",
		st.Requests, st.Succeeded, st.RateLimited, st.QuotaRefused, st.Injected5xx, st.Dropped, st.TokensIn, st.TokensOut, st.MaxInFlight)
	return 0
}
