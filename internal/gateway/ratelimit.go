package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// rateHeaders are the registered formats' rate-limit headers, the
// fallback's first: one upstream answers a gateway, so whichever format's
// headers it sends are read.
func rateHeaders() []RateHeaders {
	var out []RateHeaders
	for _, a := range fallbackFirst() {
		out = append(out, a.RateHeaders())
	}
	return out
}

// bucketHeaders are the requests [0] and tokens [1] buckets' (limit,
// remaining, reset) headers of every format, for parseBuckets.
func bucketHeaders() [2][][3]string {
	var out [2][][3]string
	for _, rh := range rateHeaders() {
		for k, b := range [2][3]string{rh.Requests, rh.Tokens} {
			if b[0] != "" {
				out[k] = append(out[k], b)
			}
		}
	}
	return out
}

// ParseRateInfo reads the rate-limit headers of every registered format
// (API.RateHeaders). now resolves a Retry-After given as an HTTP date.
func ParseRateInfo(h http.Header, now time.Time) RateInfo {
	info := RateInfo{Fraction: -1, Remaining: -1}
	var quotas [][2]string
	for _, rh := range rateHeaders() {
		quotas = append(quotas, rh.Quotas...)
	}
	for _, p := range quotas {
		rs := h.Get(p[1])
		if rs == "" {
			continue
		}
		rem, ok := headerNumber(rs)
		if !ok || rem < 0 {
			continue
		}
		n := int64(math.Min(rem, 1<<62)) // an int64 however large a count the upstream sends
		if info.Remaining < 0 || n < info.Remaining {
			info.Remaining = n
		}
		lim, ok := headerNumber(h.Get(p[0]))
		f := -1.0
		switch {
		case ok && lim > 0:
			f = rem / lim
		case rem == 0:
			f = 0
		}
		if f >= 0 && (info.Fraction < 0 || f < info.Fraction) {
			info.Fraction = f
		}
	}
	info.RetryAfter = retryAfter(h, now)
	info.Buckets = parseBuckets(h, now)
	buckets := bucketHeaders()
	var rpm, tpm, reqs, toks []string
	for _, b := range buckets[0] {
		rpm = append(rpm, b[0])
		reqs = append(reqs, b[:]...)
	}
	for _, b := range buckets[1] {
		tpm = append(tpm, b[0])
		toks = append(toks, b[:]...)
	}
	info.RequestsPerMinute = headerMin(h, rpm...)
	info.TokensPerMinute = headerMin(h, tpm...)
	info.RequestsBank = bank(h, reqs...)
	info.TokensBank = bank(h, toks...)
	return info
}

// bank is what a bucket holds now, from its per-minute limit L, the
// remaining count R (in the per-minute unit) and the time T until it is full
// again: it refills at L a minute, so its interval is T × L / (L − R) and it
// holds R × interval / 1 min. -1 when a header is missing, the bucket is
// full (no reset to tell its interval), or the interval is under 10 s: a
// short bucket banks nothing worth spending, and its scaled remaining
// count would overstate what it holds.
func bank(h http.Header, names ...string) float64 {
	for i := 0; i+2 < len(names); i += 3 {
		ls, rs, ts := h.Get(names[i]), h.Get(names[i+1]), strings.TrimSpace(h.Get(names[i+2]))
		if ls == "" || rs == "" || ts == "" {
			continue
		}
		l, ok1 := headerNumber(ls)
		r, ok2 := headerNumber(rs)
		if !ok1 || !ok2 || l <= 0 || r < 0 || r >= l {
			return -1
		}
		// OpenAI's reset is a duration to the millisecond ("6m0s", "120ms").
		// Anthropic's is a time to the second, too coarse to tell a
		// one-second bucket from a minute's: no bank from it.
		t, err := time.ParseDuration(ts)
		if err != nil || t <= 0 {
			return -1
		}
		interval := t.Seconds() * l / (l - r)
		if interval < 10 {
			return -1
		}
		return r * math.Min(interval, 60) / 60
	}
	return -1
}

func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms := strings.TrimSpace(h.Get("retry-after-ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 && v < float64(maxRetryAfter/time.Millisecond) {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	ra := strings.TrimSpace(h.Get("retry-after"))
	if ra == "" {
		return 0
	}
	if v, err := strconv.ParseFloat(ra, 64); err == nil {
		if !(v > 0) || v > maxRetryAfter.Seconds() {
			return 0
		}
		return time.Duration(v * float64(time.Second))
	}
	if t, err := http.ParseTime(ra); err == nil {
		if d := t.Sub(now); d > 0 && d <= maxRetryAfter {
			return d
		}
	}
	return 0
}

// maxRetryAfter: a longer Retry-After, in any of its forms, is not read
// (it would hold every request of the gateway for weeks).
const maxRetryAfter = 1e6 * time.Second

// hasRetryAfter reports whether the response named any Retry-After.
func hasRetryAfter(h http.Header) bool {
	return h.Get("retry-after") != "" || h.Get("retry-after-ms") != ""
}

// spendLimit reports whether a 429 is a spend-limit (quota, billing)
// refusal rather than congestion, and a short reason, in the words OpenAI,
// Anthropic and the servers compatible with them use (their
// API.SpendLimit).
func spendLimit(h http.Header, body []byte) (string, bool) {
	if hasRetryAfter(h) {
		return "", false
	}
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		code, _ := e.Error.Code.(string)
		for _, s := range []string{e.Error.Type, code} {
			ls := strings.ToLower(s)
			if strings.Contains(ls, "insufficient_quota") || strings.Contains(ls, "billing") {
				return s, true
			}
		}
	}
	lb := bytes.ToLower(body)
	for _, s := range []string{"insufficient_quota", "billing_hard_limit", "billing", "credit balance", "spend limit"} {
		if bytes.Contains(lb, []byte(s)) {
			return s, true
		}
	}
	return "", false
}

// requestTooLarge reports whether a 429 refuses a request for asking more
// tokens than the key allows in a minute (OpenAI's "Request too large for
// … on tokens per min (TPM): Limit …, Requested …"): it never passes,
// whatever the wait, and is not congestion. Read from the error's message
// as it starts, not from anywhere in the body (an upstream may echo the
// request).
func requestTooLarge(body []byte) bool {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	return json.Unmarshal(body, &e) == nil && strings.HasPrefix(strings.ToLower(strings.TrimSpace(e.Error.Message)), "request too large")
}

// charsPerTokenCeiling is the most characters of text one token stands
// for, on average over a whole prompt, that an input floor allows
// (API.InputFloor): English prose and code run about four characters a
// token in OpenAI's and Anthropic's tokenizers, other scripts fewer; only
// long runs of whitespace or repeated punctuation go further. Twice the
// usual, so that a prompt the upstream counts lighter than its size
// suggests is still never taken for one too large for the key (the
// floor errs toward congestion).
const charsPerTokenCeiling = 8

// floorTokens is the fewest tokens chars characters of text count.
func floorTokens(chars int64) int64 { return chars / charsPerTokenCeiling }

// textChars is the characters of every string in a decoded JSON value
// (objects' values, not their keys): the text of a tool's schema or a
// call's arguments as the model reads it, without the JSON's escapes.
func textChars(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(utf8.RuneCountInString(x))
	case []any:
		var n int64
		for _, e := range x {
			n += textChars(e)
		}
		return n
	case map[string]any:
		var n int64
		for _, e := range x {
			n += textChars(e)
		}
		return n
	}
	return 0
}

// contentChars is the characters of a message's content as a format
// writes it: a string, or a list of parts, each counted by part (a part
// that is not an object counts as an empty one).
func contentChars(v any, part func(map[string]any) int64) int64 {
	switch c := v.(type) {
	case string:
		return textChars(c)
	case []any:
		var n int64
		for _, x := range c {
			p, _ := x.(map[string]any)
			n += part(p)
		}
		return n
	}
	return 0
}

// tooLargeForKey reports whether a 429 refuses a request that can never
// pass, whoever words it: the request's input floor (API.InputFloor)
// exceeds the whole limit, not what is left, of a bucket the answer names
// that counts input (inputLimit). It returns that header and its limit.
// A floor of 0 (none vouched for) never makes a request too large: the
// 429 stays congestion.
func tooLargeForKey(h http.Header, floor int64) (header string, limit float64, ok bool) {
	name, lim, ok := inputLimit(h)
	if !ok || floor <= 0 || float64(floor) <= lim {
		return "", 0, false
	}
	return name, lim, true
}

// inputLimit is the smallest limit of a bucket that counts input an
// answer names (RateHeaders.InputLimits; of each format's, the first the
// answer carries), and its header; false when there is none, or none a
// positive finite number.
func inputLimit(h http.Header) (header string, limit float64, ok bool) {
	for _, rh := range rateHeaders() {
		for _, name := range rh.InputLimits {
			v := h.Get(name)
			if v == "" {
				continue
			}
			if lim, good := headerNumber(v); good && lim > 0 && (!ok || lim < limit) {
				header, limit, ok = name, lim, true
			}
			break
		}
	}
	return header, limit, ok
}

// headerNumber is a header's value as a finite number; false when it is
// not one (absent, not a number, NaN or ±Inf): an upstream's headers are
// not trusted to be numbers of a rate.
func headerNumber(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// headerMin is the smallest positive finite number among the named headers (0: none).
func headerMin(h http.Header, names ...string) float64 {
	best := 0.0
	for _, n := range names {
		if v, ok := headerNumber(h.Get(n)); ok && v > 0 && (best == 0 || v < best) {
			best = v
		}
	}
	return best
}
