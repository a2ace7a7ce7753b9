package gateway

import "time"

// InspectPolicy mimics Inspect's adaptive connections: start 20, slow start
// then additive increase, ×0.8 per episode, min 10, max 100; it grows on
// success whether or not the limit is used and ignores rate-limit headers.
// It is the baseline the benchmarks compare StewardPolicy against, not a
// policy Steward ships.
func InspectPolicy() Policy {
	return Policy{
		Name: "inspect", Start: 20, Min: 10, Max: 100, Cut: 0.8,
		MinCooldown: time.Second,
	}
}
