package gateway

import (
	"fmt"
	"testing"
	"time"
)

// usePatterns are what gateway 0's agent makes its requests use.
type usePattern struct {
	name string
	cost func(n int) int64
}

// shareTokens runs two gateways on one key whose tokens bucket binds
// (600 000 TPM refilled over a minute, 1 200 RPM over a second: ten
// requests of 1 000 tokens a second), gateway 0's agent choosing the
// tokens its requests use, gateway 1's using 1 000 each; 150 s to settle,
// then 150 s measured: the key's use (its busier bucket's share of its
// rate), each gateway's and the share of its requests refused.
func shareTokens(t *testing.T, lat time.Duration, p usePattern) (key float64, own, refused []float64) {
	m := newKeySim(t, 2, 1200, 600000, 60, lat)
	m.cost = func(i, n int) int64 {
		if i == 0 {
			return p.cost(n)
		}
		return 1000
	}
	m.run(150 * time.Second)
	m.window(150)
	m.run(150 * time.Second)
	key, own, refused = m.window(150)
	t.Logf("key used %.2f; gateways %.2f %.2f; refused %.3f %.3f", key, own[0], own[1], refused[0], refused[1])
	return key, own, refused
}

// Gateway 0's agent shapes its requests' tokens (the same as the other's,
// tiny, or alternating small and large): its estimate of its own
// use (requests × the average tokens a request used) is off, yet the key
// stays used (80 % of its busier bucket or more), neither gateway falls
// under a fifth of a bucket and 5 % or fewer of either's requests are
// refused, at 1 s and 10 s calls.
func TestHostileAgentTokensOnASharedKey(t *testing.T) {
	for _, lat := range []time.Duration{time.Second, 10 * time.Second} {
		for _, p := range []usePattern{
			{"1 000 each", func(n int) int64 { return 1000 }},
			{"100 and 1 900 in turn", func(n int) int64 { return []int64{100, 1900}[n%2] }},
			{"1 each", func(n int) int64 { return 1 }},
		} {
			t.Run(fmt.Sprintf("%v/%s", lat, p.name), func(t *testing.T) {
				key, own, refused := shareTokens(t, lat, p)
				if key < 0.8 || own[0] < 0.2 || own[1] < 0.2 || refused[0] > 0.05 || refused[1] > 0.05 {
					t.Errorf("key used %.2f (want 0.8 or more), gateways %.2f and %.2f of a bucket (0.2 or more), %.3f and %.3f refused (0.05 or less)", key, own[0], own[1], refused[0], refused[1])
				}
			})
		}
	}
}
