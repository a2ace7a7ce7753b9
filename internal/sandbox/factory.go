package sandbox

import (
	"context"
	"fmt"
)

// Factory makes the registered providers (Register;
// internal/sandbox/providers links them in): the provider factory of a
// launch and of its worker processes.
type Factory struct {
	// Getenv is handed to providers whose RunInfo has none.
	Getenv func(string) string
}

// Provider makes the named provider for one run.
func (r Factory) Provider(ctx context.Context, name string, ri RunInfo) (Provider, error) {
	d, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown sandbox provider %q (known: %v)", name, Names())
	}
	if ri.Getenv == nil {
		ri.Getenv = r.Getenv
	}
	return d.New(ctx, ri)
}

// Available says whether the named provider can make sandboxes here.
func (r Factory) Available(ctx context.Context, name string) bool {
	d, ok := Lookup(name)
	if !ok {
		return false
	}
	return d.Available == nil || d.Available(ctx)
}
