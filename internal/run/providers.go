package run

import (
	"context"
	"fmt"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Registry is the ProviderFactory of the registered sandbox providers
// (sandbox.Register; internal/sandbox/providers links them in).
type Registry struct {
	// Getenv is handed to providers whose RunInfo has none.
	Getenv func(string) string
}

// Provider makes the named provider for one run.
func (r Registry) Provider(ctx context.Context, name string, ri RunInfo) (sandbox.Provider, error) {
	d, ok := sandbox.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown sandbox provider %q (known: %v)", name, sandbox.Names())
	}
	if ri.Getenv == nil {
		ri.Getenv = r.Getenv
	}
	return d.New(ctx, ri)
}

// Available says whether the named provider can make sandboxes here.
func (r Registry) Available(ctx context.Context, name string) bool {
	d, ok := sandbox.Lookup(name)
	if !ok {
		return false
	}
	return d.Available == nil || d.Available(ctx)
}

// availability asks f, once per provider, whether it answers here (nil f: none does).
func availability(ctx context.Context, f ProviderFactory) func(name string) bool {
	asked := map[string]bool{}
	return func(name string) bool {
		ok, done := asked[name]
		if !done {
			ok = f != nil && f.Available(ctx, name)
			asked[name] = ok
		}
		return ok
	}
}
