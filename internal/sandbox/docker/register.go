package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/steward-evals/steward/internal/egress"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Name is the provider's name in eval sets.
const Name = "docker"

func init() {
	sandbox.Register(sandbox.Descriptor{
		Name:      Name,
		Summary:   "a container per attempt, from a local image or a build",
		Auto:      true,
		Available: Available,
		Check:     check,
		New: func(ctx context.Context, ri sandbox.RunInfo) (sandbox.Provider, error) {
			o := Options{
				RunID: ri.RunID, LockPath: ri.LockPath, Log: ri.Stderr,
				InContainer: InContainer(ri.Getenv), Labels: map[string]string{}, Liveness: ri.Liveness,
			}
			if err := EgressOptions(ri.Getenv, &o); err != nil {
				return nil, err
			}
			return New(ctx, o)
		},
		Sweep: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			if !Available(ctx) {
				fmt.Fprintln(w, "docker: no daemon answers; nothing to sweep")
				return nil
			}
			p, err := New(ctx, Options{Liveness: ri.Liveness})
			if err != nil {
				return err
			}
			_, err = p.Sweep(ctx, w)
			return err
		},
		Internal: []sandbox.InternalCommand{{
			Name: RelayArg, Usage: "LISTEN TARGET", Short: "internal: forward sandbox connections to the model gateway", Args: 2,
			Run: func(ctx context.Context, args []string, stderr io.Writer) error {
				return RunRelay(ctx, args[0], args[1], stderr)
			},
		}, {
			Name: egress.Arg, Usage: "LISTEN SPEC", Short: "internal: the egress proxy of a sandbox with a network allowlist", Args: 2,
			Run: func(ctx context.Context, args []string, stderr io.Writer) error {
				return egress.Run(ctx, args[0], args[1], stderr)
			},
		}},
		Doctor: func(ctx context.Context, w io.Writer, ri sandbox.RunInfo) error {
			if !Available(ctx) {
				fmt.Fprintln(w, "docker: no daemon answers (DOCKER_HOST or /var/run/docker.sock); tasks that name no provider run on the fallback provider")
				return nil
			}
			p, err := New(ctx, Options{InContainer: InContainer(ri.Getenv), Liveness: ri.Liveness})
			if err != nil {
				return err
			}
			return p.Doctor(ctx, w)
		},
	})
}

// check: a container needs an image to start from.
func check(s sandbox.Settings) []sandbox.Problem {
	if s.Image == "" && s.Build == "" {
		return []sandbox.Problem{{Message: "the docker provider needs image (a local image) or build (a directory with a Dockerfile)"}}
	}
	return nil
}

// InContainer: STEWARD_IN_CONTAINER=1|0 decides; otherwise Steward runs in a
// container of the daemon it talks to (the action's case) when /.dockerenv
// exists and the daemon knows a container by this host's name.
func InContainer(getenv func(string) string) bool {
	if getenv != nil {
		if v := getenv("STEWARD_IN_CONTAINER"); v != "" {
			return v == "1" || v == "true"
		}
	}
	if _, err := os.Stat("/.dockerenv"); err != nil {
		return false
	}
	host, err := os.Hostname()
	if err != nil {
		return false
	}
	cli, err := NewClient()
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.ContainerInspect(ctx, host)
	return err == nil
}

// SweepAfterRun removes what dead runs left, this run's crashed workers
// included (D4). It leaves untagged images to the next run's preflight
// sweep and to `steward sweep`: it runs on the way out of every run, a
// cancelled one's too, which the runner gives seconds.
func (p *Provider) SweepAfterRun(ctx context.Context) {
	_, _ = sweep(ctx, p.cli, p.scope, p.live, io.Discard, false)
}

// PreflightRun sweeps what dead runs left, then checks that the daemon's
// address pools can give the networks the run wants at this concurrency
// (D1). When they cannot, it shows the pools to write into daemon.json and
// writes them (keeping a backup; the daemon is not restarted) if write is
// set or confirm says yes; the run stops either way.
func (p *Provider) PreflightRun(ctx context.Context, specs []*sandbox.Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error {
	if _, err := p.Sweep(ctx, io.Discard); err != nil {
		fmt.Fprintf(w, "steward: sweep leftovers of dead runs: %v\n", err)
	}
	var plain []sandbox.Spec
	for _, s := range specs {
		plain = append(plain, *s)
	}
	rep, err := p.Preflight(ctx, NetworksWanted(plain, concurrency))
	if err != nil {
		return fmt.Errorf("address-pool preflight: %w", err)
	}
	if rep.Enough {
		return nil
	}
	_ = RenderPoolReport(w, rep)
	if write || (confirm != nil && confirm("Write this into the daemon configuration now (a backup is kept; the daemon is NOT restarted)?")) {
		path := rep.DaemonJSON // the daemon.json the pools were read from (or would be)
		backup, err := WriteDaemonJSON(path)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		fmt.Fprintf(w, "steward: wrote %s (backup %s). Nothing changes until you restart the daemon: %s\n", path, backup, rep.Restart)
	}
	return NotEnoughNetworks(rep.Want, rep.Free)
}

// NotEnoughNetworks is the error a launch stops with when the daemon's
// address pools cannot give the networks the run wants (D1).
func NotEnoughNetworks(want, free int) error {
	return sandbox.InfraError(fmt.Errorf("the run wants %d docker networks but the daemon's address pools can give only %d: apply the daemon.json above and restart the daemon, or lower --max-concurrency", want, free))
}

var (
	_ sandbox.Preflighter     = (*Provider)(nil)
	_ sandbox.AfterRunSweeper = (*Provider)(nil)
)
