package gateway

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// multi: several gateways on one key, a requests bucket (1 s interval)
// and a tokens bucket (ivl interval); each gateway's agent sets the tokens
// of its requests (cost(i, n) for gateway i's nth request).
type multi struct {
	clk           *clock.Fake
	cs            []*Controller
	lat           time.Duration
	rpm, tpm      float64
	ivl           float64
	rl, tl        float64
	filled        time.Time
	pending       [][]mcall
	n             []int
	sent, refused []int
	reqs, toks    []float64 // admitted requests and tokens since the last window
	cost          func(i, n int) int64
	stopAt        []time.Time
}

type mcall struct {
	tk         *Ticket
	due        time.Time
	ok         bool
	rlev, tlev float64
	tokens     int64
}

func newMulti(k int, rpm, tpm, ivl float64, lat time.Duration) *multi {
	clk := clock.NewFake(testEpoch)
	m := &multi{clk: clk, lat: lat, rpm: rpm, tpm: tpm, ivl: ivl, rl: rpm / 60, tl: tpm / 60 * ivl, filled: testEpoch,
		pending: make([][]mcall, k), n: make([]int, k), sent: make([]int, k), refused: make([]int, k), stopAt: make([]time.Time, k),
		reqs: make([]float64, k), toks: make([]float64, k)}
	for i := 0; i < k; i++ {
		m.cs = append(m.cs, NewController(StewardPolicy(), clk))
	}
	return m
}

func (m *multi) run(t *testing.T, dur time.Duration) {
	end := m.clk.Now().Add(dur)
	for now := m.clk.Now(); now.Before(end); now = m.clk.Now() {
		dt := now.Sub(m.filled).Seconds()
		m.rl = math.Min(m.rpm/60, m.rl+dt*m.rpm/60)
		m.tl = math.Min(m.tpm/60*m.ivl, m.tl+dt*m.tpm/60)
		m.filled = now
		for i, c := range m.cs {
			if !m.stopAt[i].IsZero() && !now.Before(m.stopAt[i]) {
				continue
			}
			for {
				tk, _ := c.TryAcquire()
				if tk == nil {
					break
				}
				m.n[i]++
				cost := m.cost(i, m.n[i])
				ok := m.rl >= 1 && m.tl >= float64(cost)
				if ok {
					m.rl--
					m.tl -= float64(cost)
					m.reqs[i]++
					m.toks[i] += float64(cost)
				}
				m.sent[i]++
				m.pending[i] = append(m.pending[i], mcall{tk: tk, due: now.Add(m.lat), ok: ok, rlev: m.rl, tlev: m.tl, tokens: cost})
			}
		}
		for i, c := range m.cs {
			keep := m.pending[i][:0]
			for _, p := range m.pending[i] {
				if p.due.After(now) {
					keep = append(keep, p)
					continue
				}
				h := http.Header{}
				rcap, tcap := m.rpm/60, m.tpm/60*m.ivl
				h.Set("x-ratelimit-limit-requests", fmt.Sprint(m.rpm))
				h.Set("x-ratelimit-remaining-requests", fmt.Sprint(math.Floor(math.Max(p.rlev, 0)*60)))
				h.Set("x-ratelimit-reset-requests", fmt.Sprintf("%dms", int(math.Ceil((rcap-p.rlev)/rcap*1000))))
				h.Set("x-ratelimit-limit-tokens", fmt.Sprint(m.tpm))
				h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(math.Floor(math.Max(p.tlev, 0)*60/m.ivl)))
				h.Set("x-ratelimit-reset-tokens", fmt.Sprintf("%dms", int(math.Ceil((tcap-p.tlev)/(m.tpm/60)*1000))))
				o, tok := OutcomeOK, p.tokens
				if !p.ok {
					o, tok = OutcomeRateLimited, 0
					m.refused[i]++
				}
				info := ParseRateInfo(h, now)
				info.Tokens = tok
				c.Done(p.tk, o, info)
			}
			m.pending[i] = keep
		}
		m.clk.Advance(5 * time.Millisecond)
	}
}

// window returns, since the last call, what the key was used for (its
// busier bucket's share of its rate), and each gateway's use of it, share
// of its requests refused and pace.
func (m *multi) window(secs float64) (key float64, own, refused []float64) {
	var r, tk float64
	for i := range m.cs {
		r += m.reqs[i]
		tk += m.toks[i]
		own = append(own, math.Max(m.reqs[i]/(m.rpm/60*secs), m.toks[i]/(m.tpm/60*secs)))
		refused = append(refused, float64(m.refused[i])/math.Max(float64(m.sent[i]), 1))
		m.reqs[i], m.toks[i], m.sent[i], m.refused[i] = 0, 0, 0, 0
	}
	return math.Max(r/(m.rpm/60*secs), tk/(m.tpm/60*secs)), own, refused
}

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
	m := newMulti(2, 1200, 600000, 60, lat)
	m.cost = func(i, n int) int64 {
		if i == 0 {
			return p.cost(n)
		}
		return 1000
	}
	m.run(t, 150*time.Second)
	m.window(150)
	m.run(t, 150*time.Second)
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
