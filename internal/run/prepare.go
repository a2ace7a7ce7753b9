package run

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/specs"
)

// prepared is what the prepare stage made ready once for the run (worker
// processes adopt it, W1): its own copies of the chosen specs, prepared
// (images checked or built, the run's networks made), the samples whose
// own environment could not be prepared and why, and the model gateway
// with its first listeners. close stops the gateway and finalizes the
// providers.
type prepared struct {
	*begun
	ready      specs.Set
	sampleErrs map[string]attempt.SampleEnvError
	gw         *gateway.Gateway
	listen     *gateway.Listeners
	gwURL      map[string]string // provider -> the base URL its sandboxes use
	// judgeURL is the gateway's loopback URL for the model judge ("" if no
	// task has one).
	judgeURL string
	cleanup  cleanups
}

// prepare checks the machine for every provider with work (docker: address
// pools, D1), prepares their specs and starts the gateway where each one's
// sandboxes reach it. The returned value is never nil: close it.
func prepare(ctx context.Context, b *begun) (*prepared, error) {
	pr := &prepared{begun: b, ready: b.specs.Clone(), sampleErrs: map[string]attempt.SampleEnvError{}}
	needed := pr.ready.Needed(pr.p, pr.taskProv)
	for name, n := range needed {
		if err := pr.preflight(ctx, name, n.All(pr.ready)); err != nil {
			return pr, err
		}
	}
	for name, n := range needed {
		if err := pr.prepareProvider(ctx, name, n); err != nil {
			return pr, err
		}
	}
	if err := pr.startGateway(needed); err != nil {
		return pr, err
	}
	return pr, nil
}

// preflight runs a provider's checks of the machine before anything is
// prepared (sandbox.Preflighter).
func (pr *prepared) preflight(ctx context.Context, name string, all []*sandbox.Spec) error {
	pf, ok := pr.providers[name].(sandbox.Preflighter)
	if !ok {
		return nil
	}
	confirm := pr.opts.Confirm
	if confirm == nil {
		confirm = func(string) bool { return false }
	}
	return pf.PreflightRun(ctx, all, pr.budget, pr.opts.Stderr, confirm, pr.opts.WriteDaemonJSON)
}

// prepareProvider prepares a provider's specs: the tasks' own (and the
// run's networks) first, whose failure is the run's; then each sample's
// own, whose failure is its own (sampleErrs).
func (pr *prepared) prepareProvider(ctx context.Context, name string, n *specs.Needed) error {
	prov := pr.providers[name]
	if err := prov.Prepare(ctx, n.Tasks); err != nil {
		return fmt.Errorf("prepare %s sandboxes: %w", name, err)
	}
	pr.cleanup.add(func() {
		fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := prov.Finalize(fctx); err != nil {
			fmt.Fprintf(pr.opts.Stderr, "steward: finalize %s provider: %v\n", prov.Name(), err)
		}
	})
	if err := pr.ready.PrepareSamples(ctx, prov, n.Samples, pr.sampleErrs, pr.opts.Stderr); err != nil {
		return fmt.Errorf("prepare %s sandboxes: %w", name, err)
	}
	return nil
}

// startGateway starts the model gateway with the real key, and a listener
// where each provider's sandboxes reach it (one per address for the whole
// run, workers included: they receive the URL), and one on loopback for
// the model judge when a task has one.
func (pr *prepared) startGateway(needed map[string]*specs.Needed) error {
	gw, err := pr.newGateway(len(needed) > 0)
	if err != nil {
		return err
	}
	gwCtx, stopGW := context.WithCancel(context.Background())
	pr.gw, pr.gwURL = gw, map[string]string{}
	pr.listen = gw.Listeners(gwCtx)
	pr.cleanup.add(func() {
		stopGW()
		pr.listen.Wait()
	})
	for name := range needed {
		addr, err := pr.providers[name].Gateway(gwCtx)
		if err != nil {
			return fmt.Errorf("find the gateway address for %s sandboxes: %w", name, err)
		}
		if pr.gwURL[name], err = pr.openGateway(addr); err != nil {
			return err
		}
	}
	for _, pt := range pr.p.Tasks {
		if pt.Task.Scorer.ModelGraded != nil {
			// The model judge's graders are called from this machine's
			// processes, on loopback (modeljudge.go).
			pr.judgeURL, err = pr.openGateway(sandbox.GatewayAddr{Listen: "127.0.0.1:0", Host: "127.0.0.1"})
			return err
		}
	}
	return nil
}

// newGateway makes the gateway: the upstream with the real key, or the mock
// when nothing runs (every attempt carried or skipped: no model call is
// made, so no key is needed).
func (pr *prepared) newGateway(runs bool) (*gateway.Gateway, error) {
	m := pr.es.Model
	key := ""
	if m.Upstream != "" && m.Upstream != "mock" {
		key = pr.opts.Getenv(m.APIKeyEnv)
		if key == "" && runs {
			return nil, badInput("%s: model.api_key_env: the environment variable %s is not set (the real key for the %s upstream)", pr.es.File, m.APIKeyEnv, m.Upstream)
		}
	}
	upstream, baseURL := m.Upstream, m.BaseURL
	if key == "" && !runs {
		upstream, baseURL = "mock", ""
	}
	policy := gateway.StewardPolicy()
	policy.HardMax = m.MaxConnectionsCeiling // 0: the gateway's own
	// Secrets are named in the eval set (secret_env), in _steward.yaml
	// (secrets) and in secret.EnvNames: read once (initSecrets).
	gw, err := gateway.New(gateway.Config{
		Secrets:  pr.secrets,
		Upstream: upstream, BaseURL: baseURL, APIKey: key, MaxConnections: m.MaxConnections, Policy: &policy,
		Prices: gateway.Prices{InputPerMTok: m.Prices.InputPerMTok, OutputPerMTok: m.Prices.OutputPerMTok},
		Logger: pr.opts.Stderr, Capture: pr.captureConfig(), BudgetUSD: pr.opts.BudgetUSD,
		DefaultMaxTokens: int64(cmp.Or(m.BudgetMaxTokens, evalset.DefaultBudgetMaxTokens)),
	})
	if err != nil {
		return nil, badInput("%s: model: %v", pr.es.File, err)
	}
	return gw, nil
}

// close stops the gateway, waits for its listeners, then finalizes the
// providers, in reverse order of their making.
func (pr *prepared) close() { pr.cleanup.run() }

type cleanups struct{ fns []func() }

func (c *cleanups) add(f func()) { c.fns = append(c.fns, f) }
func (c *cleanups) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
}

// openGateway makes the gateway listen where sandboxes reach it (once per
// address for the whole run, workers' included) and returns the URL they
// use; a listener that cannot be opened is the infrastructure's fault.
func (pr *prepared) openGateway(addr sandbox.GatewayAddr) (string, error) {
	url, err := pr.listen.Open(addr.Listen, addr.Host, addr.Proxied)
	if err != nil {
		return "", sandbox.InfraError(err)
	}
	return url, nil
}
