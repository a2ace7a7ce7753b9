package gateway

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/clock"
)

// keySim runs k gateways' controllers on one key, on a fake clock in steps
// of 5 ms, with unlimited demand: a requests bucket of rpm a minute refilled
// over a second and, when tpm > 0, a tokens bucket of tpm a minute refilled
// over ivl seconds (OpenAI's headers, resets to the millisecond). Every
// call is answered lat after it left (a 429 after 50 ms with fast429, as
// providers do); a 429 carries retry-after-ms (when the bucket that refused
// it holds the request again). Each gateway's agent sets the tokens of its
// requests (cost(i, n) for gateway i's nth; 1 000 each when nil), and
// hostile, when set, rewrites an answer's headers, usage and outcome (the
// upstream is untrusted). After every answer the gateway's pace must be a
// finite number, its gap never negative and its limit at least one.
type keySim struct {
	t        *testing.T
	clk      *clock.Fake
	cs       []*Controller
	lat      time.Duration
	rpm, tpm float64
	ivl      float64
	rl, tl   float64 // what the buckets hold: requests, tokens
	filled   time.Time
	pending  [][]simCall
	n        []int
	// sent and refused count each gateway's admissions and 429s, reqs
	// and toks the requests and tokens the key admitted from it, since
	// the last mark or window.
	sent, refused []int
	reqs, toks    []float64
	cost          func(i, n int) int64
	hostile       func(sent time.Time, h http.Header, tokens *int64, o *Outcome)
	fast429       bool
	// startAt, when set, is when each gateway's agent starts sending (a
	// join); active, when set, whether gateway i's agent sends at now.
	startAt []time.Time
	active  func(i int, now time.Time) bool
}

type simCall struct {
	tk         *Ticket
	sentAt     time.Time
	due        time.Time
	ok         bool
	rlev, tlev float64 // the buckets' levels as the request left them
	tokens     int64
}

func newKeySim(t *testing.T, k int, rpm, tpm, ivl float64, lat time.Duration) *keySim {
	clk := clock.NewFake(testEpoch)
	m := &keySim{t: t, clk: clk, lat: lat, rpm: rpm, tpm: tpm, ivl: ivl, rl: rpm / 60, tl: tpm / 60 * ivl, filled: testEpoch,
		pending: make([][]simCall, k), n: make([]int, k), sent: make([]int, k), refused: make([]int, k),
		reqs: make([]float64, k), toks: make([]float64, k)}
	for i := 0; i < k; i++ {
		m.cs = append(m.cs, NewController(StewardPolicy(), clk))
	}
	return m
}

// run drives the gateways for dur.
func (m *keySim) run(dur time.Duration) {
	m.t.Helper()
	end := m.clk.Now().Add(dur)
	for now := m.clk.Now(); now.Before(end); now = m.clk.Now() {
		for i, c := range m.cs {
			if m.startAt != nil && now.Before(m.startAt[i]) || m.active != nil && !m.active(i, now) {
				continue
			}
			for {
				tk, _ := c.TryAcquire()
				if tk == nil {
					break
				}
				m.refill(now)
				m.n[i]++
				cost := int64(1000)
				if m.cost != nil {
					cost = m.cost(i, m.n[i])
				}
				ok := m.rl >= 1 && (m.tpm <= 0 || m.tl >= float64(cost))
				if ok {
					m.rl--
					m.reqs[i]++
					if m.tpm > 0 {
						m.tl -= float64(cost)
						m.toks[i] += float64(cost)
					}
				}
				m.sent[i]++
				due := now.Add(m.lat)
				if m.fast429 && !ok {
					due = now.Add(50 * time.Millisecond)
				}
				m.pending[i] = append(m.pending[i], simCall{tk: tk, sentAt: now, due: due, ok: ok, rlev: m.rl, tlev: m.tl, tokens: cost})
				if len(m.pending[i]) > 100000 {
					m.t.Fatalf("gateway %d: %d calls in flight: no bound", i, len(m.pending[i]))
				}
			}
		}
		for i, c := range m.cs {
			keep := m.pending[i][:0]
			for _, p := range m.pending[i] {
				if p.due.After(now) {
					keep = append(keep, p)
					continue
				}
				h := m.headers(p)
				o, tok := OutcomeOK, p.tokens
				if !p.ok {
					o, tok = OutcomeRateLimited, 0
					m.refused[i]++
				}
				if m.hostile != nil {
					m.hostile(p.sentAt, h, &tok, &o)
				}
				info := ParseRateInfo(h, now)
				info.Tokens = tok
				c.Done(p.tk, o, info)
				m.check(i, h)
			}
			m.pending[i] = keep
		}
		m.clk.Advance(5 * time.Millisecond)
	}
}

// refill fills the buckets for the time since the last request reached
// them (in one step: summed in 5 ms steps, the rounding moved a header's
// count across an integer).
func (m *keySim) refill(now time.Time) {
	dt := now.Sub(m.filled).Seconds()
	capa := m.rpm / 60
	m.rl = math.Min(capa, m.rl+dt*capa)
	m.tl = math.Min(m.tpm/60*m.ivl, m.tl+dt*m.tpm/60)
	m.filled = now
}

// headers are the provider's answer to call p: the buckets as it left
// them and, on a 429, when the bucket that refused it holds it again.
func (m *keySim) headers(p simCall) http.Header {
	h := http.Header{}
	rcap := m.rpm / 60
	h.Set("x-ratelimit-limit-requests", fmt.Sprint(m.rpm))
	h.Set("x-ratelimit-remaining-requests", fmt.Sprint(math.Floor(math.Max(p.rlev, 0)*60)))
	h.Set("x-ratelimit-reset-requests", fmt.Sprintf("%dms", int(math.Ceil((rcap-p.rlev)/rcap*1000))))
	wait := (1 - p.rlev) / rcap
	if m.tpm > 0 {
		tcap := m.tpm / 60 * m.ivl
		h.Set("x-ratelimit-limit-tokens", fmt.Sprint(m.tpm))
		h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(math.Floor(math.Max(p.tlev, 0)*60/m.ivl)))
		h.Set("x-ratelimit-reset-tokens", fmt.Sprintf("%dms", int(math.Ceil((tcap-p.tlev)/(m.tpm/60)*1000))))
		wait = math.Max(wait, (float64(p.tokens)-p.tlev)/(m.tpm/60))
	}
	if !p.ok {
		h.Set("retry-after-ms", fmt.Sprint(int(math.Ceil(math.Max(wait, 0)*1000))))
	}
	return h
}

// check: gateway i's pace is a finite number, its gap never negative, its
// limit at least one.
func (m *keySim) check(i int, h http.Header) {
	m.t.Helper()
	c := m.cs[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.paceRate()
	if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || math.IsNaN(c.share.frac) || math.IsNaN(c.share.pace) || c.limit < 1 || math.IsNaN(c.limit) || math.IsNaN(c.tokensPerReq) {
		m.t.Fatalf("gateway %d, after headers %v: pace %v (share frac %v pace %v), limit %v, tokens a request %v", i, h, p, c.share.frac, c.share.pace, c.limit, c.tokensPerReq)
	}
	if g := c.paceGap(); c.pacing && g < 0 {
		m.t.Fatalf("gateway %d, after headers %v: pace gap %v", i, h, g)
	}
}

// mark returns the admissions and 429s of every gateway since the last
// mark or window.
func (m *keySim) mark() (sent, refused int) {
	for i := range m.cs {
		sent += m.sent[i]
		refused += m.refused[i]
		m.sent[i], m.refused[i], m.reqs[i], m.toks[i] = 0, 0, 0, 0
	}
	return sent, refused
}

// window returns, since the last mark or window, what the key was used for
// over secs (its busier bucket's share of its rate), and each gateway's use
// of it and share of its requests refused.
func (m *keySim) window(secs float64) (key float64, own, refused []float64) {
	var r, tk float64
	for i := range m.cs {
		r += m.reqs[i]
		tk += m.toks[i]
		u := m.reqs[i] / (m.rpm / 60 * secs)
		if m.tpm > 0 {
			u = math.Max(u, m.toks[i]/(m.tpm/60*secs))
		}
		own = append(own, u)
		refused = append(refused, float64(m.refused[i])/math.Max(float64(m.sent[i]), 1))
		m.reqs[i], m.toks[i], m.sent[i], m.refused[i] = 0, 0, 0, 0
	}
	key = r / (m.rpm / 60 * secs)
	if m.tpm > 0 {
		key = math.Max(key, tk/(m.tpm/60*secs))
	}
	return key, own, refused
}

// sane checks that over dur of sane answers (after settle) the gateways
// sent between lo and hi of the key's rate, and 5 % or fewer of their
// requests were refused.
func (m *keySim) sane(what string, settle, dur time.Duration, lo, hi float64) {
	m.t.Helper()
	m.hostile = nil
	m.run(settle)
	m.mark()
	m.run(dur)
	sent, refused := m.mark()
	rate := float64(sent) / dur.Seconds() / (m.rpm / 60)
	if rate < lo || rate > hi || float64(refused) > 0.05*float64(sent) {
		c := m.cs[0]
		c.mu.Lock()
		p, lim := c.paceRate(), c.limit
		c.mu.Unlock()
		m.t.Fatalf("%s: then sane answers: sent %.3f of the key's rate (want %.2f–%.2f), %d of %d refused (pace %.3g/s, limit %v)", what, rate, lo, hi, refused, sent, p, lim)
	}
	m.t.Logf("%s: then sane answers: %.3f of the key's rate, %d of %d refused", what, rate, refused, sent)
}
