package gateway

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A run's listeners: one per address (the same address and host again is
// the same URL), each serving the gateway until the run's context ends; an
// address that cannot be listened on is said with it.
func TestListeners(t *testing.T) {
	g, err := New(Config{Upstream: "mock"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ls := g.Listeners(ctx)
	url, err := ls.Open("127.0.0.1:0", "127.0.0.1", false)
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("Open = %q, %v", url, err)
	}
	if again, err := ls.Open("127.0.0.1:0", "127.0.0.1", false); again != url || err != nil {
		t.Errorf("the same address again = %q, %v; want %q", again, err, url)
	}
	other, err := ls.Open("127.0.0.1:0", "localhost", true)
	if err != nil || other == url || !strings.HasPrefix(other, "http://localhost:") {
		t.Errorf("another host = %q, %v", other, err)
	}
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatalf("the gateway does not answer: %v", err)
	}
	resp.Body.Close()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := ls.Open(held.Addr().String(), "127.0.0.1", false); err == nil || !strings.Contains(err.Error(), "listen for the model gateway on "+held.Addr().String()) {
		t.Errorf("an address in use: %v", err)
	}
	stop()
	ls.Wait()
	if _, err := http.Get(url + "/v1/models"); err == nil {
		t.Error("the gateway still answers once the run's context ended")
	}
}
