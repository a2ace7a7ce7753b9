package run

import "context"

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
