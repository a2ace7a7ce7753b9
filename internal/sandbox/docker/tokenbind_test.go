package docker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/gateway"
	"github.com/steward-evals/steward/internal/sandbox"
)

// TestTokenBoundToItsSandbox plays a sandbox that got hold of another
// sandbox's gateway token (an agent that exfiltrated it, a token in a shared
// file): with each token bound to the container address it was issued for,
// the stolen token is refused from the thief's container, while each
// sandbox's own token works.
func TestTokenBoundToItsSandbox(t *testing.T) {
	t.Parallel()
	r := newRun(t, nil)
	a, b := spec(t, "bind-a"), spec(t, "bind-b")
	prepare(t, r, &a, &b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ga, err := r.P.Gateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{Upstream: "mock"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", ga.Listen)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ctx, ln) }()
	url := fmt.Sprintf("http://%s:%d", ga.Host, ln.Addr().(*net.TCPAddr).Port)

	sa, sb := mustCreate(t, r, a), mustCreate(t, r, b)
	tokA, tokB := g.Issue("a", nil), g.Issue("b", nil)
	for tok, s := range map[string]*Sandbox{tokA: sa, tokB: sb} {
		ip, ok := s.GatewayPeer()
		if !ok || !ip.Is4() {
			t.Fatalf("sandbox %s: no gateway peer address (%v %v)", s.ID(), ip, ok)
		}
		if err := g.Bind(tok, ip); err != nil {
			t.Fatal(err)
		}
	}
	call := func(s sandbox.Sandbox, tok string) string {
		t.Helper()
		res, err := s.Exec(context.Background(), sandbox.ExecSpec{
			Shell:   fmt.Sprintf(`wget -q -O- --header "Authorization: Bearer %s" %s/v1/models 2>&1; echo " exit=$?"`, tok, url),
			Timeout: 30 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Stdout)
	}
	if out := call(sa, tokA); !strings.Contains(out, `"object":"list"`) || !strings.Contains(out, "exit=0") {
		t.Fatalf("sandbox a with its own token: %s", out)
	}
	if out := call(sb, tokB); !strings.Contains(out, "exit=0") {
		t.Fatalf("sandbox b with its own token: %s", out)
	}
	if out := call(sb, tokA); !strings.Contains(out, "401") || strings.Contains(out, "exit=0") {
		t.Fatalf("sandbox b used sandbox a's token: %s", out)
	}
	if out := call(sa, tokB); !strings.Contains(out, "401") || strings.Contains(out, "exit=0") {
		t.Fatalf("sandbox a used sandbox b's token: %s", out)
	}
}
