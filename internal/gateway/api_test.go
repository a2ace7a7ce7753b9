package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/secret"
)

// Every registered wire format keeps the contract the gateway relies on;
// a new format's file is checked here without naming it.
func TestEveryAPIKeepsTheContract(t *testing.T) {
	all := APIs()
	if len(all) < 2 {
		t.Fatalf("want at least openai and anthropic registered, got %d", len(all))
	}
	envSeen := map[string]string{}
	for _, a := range all {
		t.Run(a.Name(), func(t *testing.T) {
			if got, ok := LookupAPI(a.Name()); !ok || got.Name() != a.Name() {
				t.Fatal("LookupAPI does not find it")
			}
			up := a.Upstream()
			if u, err := url.Parse(up.BaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				t.Errorf("default base URL %q", up.BaseURL)
			}
			if up.KeyEnv == "" || DefaultKeyEnv(a.Name()) != up.KeyEnv || !slices.Contains(secret.EnvNames, up.KeyEnv) {
				t.Errorf("key variable %q is not the default or not among the secret variables", up.KeyEnv)
			}
			for k := ErrInvalid; k <= ErrUpstream; k++ {
				var doc map[string]any
				if err := json.Unmarshal(errorJSON(a, 400, k, "c", "the message"), &doc); err != nil || !strings.Contains(string(errorJSON(a, 400, k, "c", "the message")), "the message") {
					t.Errorf("error kind %d: %s (%v)", k, errorJSON(a, 400, k, "c", "the message"), err)
				}
			}
			env := a.Env("http://gw:1", "stw-tok")
			if len(env) == 0 {
				t.Error("no sandbox variables")
			}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if other, dup := envSeen[k]; dup {
					t.Errorf("%s is set by %s too", k, other)
				}
				envSeen[k] = a.Name()
				if v != "stw-tok" && !strings.HasPrefix(v, "http://gw:1") {
					t.Errorf("%s=%s is neither the token nor the gateway", k, v)
				}
			}
			h := http.Header{}
			a.Authorize(h, "the-key")
			if a.Token(h) != "the-key" {
				t.Errorf("Token does not read what Authorize writes: %v", h)
			}
			path, body := a.Ask("m", "grade this", 10)
			if own, method, hasBody := routeOf(path); own == nil || own.Name() != a.Name() || method != http.MethodPost || !hasBody {
				t.Errorf("Ask's route %s is not one of its own POST routes", path)
			}
			if !json.Valid(body) {
				t.Errorf("Ask's body %s", body)
			}
			if _, billable := a.Estimate(path, body, 7); !billable {
				t.Errorf("Ask's route %s is not billed", path)
			}
			// A floor, never above the gateway's own estimate from the size.
			lp, lb := a.Ask("m", strings.Repeat("grade this answer ", 200), 10)
			if f := a.InputFloor(lp, lb); f < 0 || f > int64(len(lb))/4 {
				t.Errorf("InputFloor of a %d-byte request is %d, over its size estimate", len(lb), f)
			}
			rh := a.RateHeaders()
			for _, hs := range [][]string{rh.Requests[:], rh.Tokens[:], rh.InputLimits} {
				for _, n := range hs {
					if n != strings.ToLower(n) {
						t.Errorf("rate-limit header %q is not lower case", n)
					}
				}
			}
		})
	}
	// A path two formats route takes the same method in both.
	for _, p := range []string{"/v1/models", "/v1/models/gpt-4o"} {
		var methods []string
		for _, a := range all {
			if m, _ := a.Route(p); m != "" {
				methods = append(methods, m)
			}
		}
		if len(slices.Compact(methods)) > 1 {
			t.Errorf("%s: methods %v", p, methods)
		}
	}
	if got := Upstreams(); got[0] != MockUpstream || len(got) != len(all)+1 {
		t.Errorf("Upstreams %v", got)
	}
	if ClientAPI(MockUpstream).Name() != "openai" || ClientAPI("anthropic").Name() != "anthropic" {
		t.Error("ClientAPI: the mock is spoken to as OpenAI, an upstream in its own format")
	}
}

// Each format spells the gateway's errors as it always has (the table
// before the interface, issue 26 item 4).
func TestErrorKindsInEachFormat(t *testing.T) {
	want := map[ErrorKind][2]string{
		ErrInvalid:    {"invalid_request_error", "invalid_request_error"},
		ErrNotFound:   {"invalid_request_error", "not_found_error"},
		ErrAuth:       {"invalid_request_error", "authentication_error"},
		ErrTooLarge:   {"invalid_request_error", "request_too_large"},
		ErrBusy:       {"rate_limit_error", "rate_limit_error"},
		ErrOverloaded: {"overloaded_error", "overloaded_error"},
		ErrBudget:     {"insufficient_quota", "billing_error"},
		ErrLimit:      {"insufficient_quota", "permission_error"},
		ErrSpendLimit: {"insufficient_quota", "rate_limit_error"},
		ErrUpstream:   {"api_error", "api_error"},
	}
	oa, _ := LookupAPI("openai")
	an, _ := LookupAPI("anthropic")
	for k, w := range want {
		var o struct {
			Error struct {
				Type string `json:"type"`
				Code any    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(errorJSON(oa, 400, k, "some_code", "m"), &o); err != nil || o.Error.Type != w[0] || o.Error.Code != "some_code" {
			t.Errorf("openai kind %d: %+v, want %s", k, o, w[0])
		}
		var a struct {
			Type  string `json:"type"`
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(errorJSON(an, 400, k, "some_code", "m"), &a); err != nil || a.Type != "error" || a.Error.Type != w[1] {
			t.Errorf("anthropic kind %d: %+v, want %s", k, a, w[1])
		}
	}
	// OpenAI's code is null when the gateway has none.
	if b := errorJSON(oa, 500, ErrUpstream, "", "m"); !strings.Contains(string(b), `"code":null`) {
		t.Errorf("no code: %s", b)
	}
}

// The remaining endpoint refuses a request without the attempt's token in
// the caller's format, as the model routes do: an Anthropic client hears
// authentication_error (it heard invalid_request_error before the formats
// were one interface).
func TestRemainingRefusalInTheCallersFormat(t *testing.T) {
	h := startGateway(t, Config{Upstream: "mock"})
	req, _ := http.NewRequest(http.MethodGet, h.url+RemainingPath, nil)
	req.Header.Set("x-api-key", "stw-nope")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), `"type":"authentication_error"`) {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
}

// A known path with the wrong method is 405 for every route, a model's
// entry too (it was 404 there before the routes were the formats').
func TestWrongMethodOnAModelIs405(t *testing.T) {
	h := startGateway(t, Config{Upstream: "mock"})
	tok := h.g.Issue("att-405", nil)
	resp, body := post(t, h.url, "/v1/models/gpt-4o", tok, `{}`, nil)
	if resp.StatusCode != 405 || !strings.Contains(body, "not allowed") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// Anthropic's messages are estimated from what Anthropic reads, max_tokens:
// an OpenAI field beside it no longer lowers the estimate a budget holds.
func TestAnthropicEstimateReadsMaxTokens(t *testing.T) {
	an, _ := LookupAPI("anthropic")
	for _, c := range []struct {
		body string
		out  int64
	}{
		{`{"max_tokens":4000,"max_completion_tokens":1}`, 4000},
		{`{"max_tokens":50,"n":3}`, 50},
		{`{"model":"c"}`, 100},
	} {
		if out, billable := an.Estimate("/v1/messages", []byte(c.body), 100); out != c.out || !billable {
			t.Errorf("%s: out %d billable %v, want %d", c.body, out, billable, c.out)
		}
	}
}
