package kuberelay

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// readyLog is the relay's log: ready closes at its first line ("relay:
// sandboxes on ..."), which the relay writes once it listens.
type readyLog struct {
	once  sync.Once
	ready chan struct{}
}

func (l *readyLog) Write(p []byte) (int, error) {
	l.once.Do(func() { close(l.ready) })
	return len(p), nil
}

// get does an HTTP GET over a fresh connection to addr and returns the body.
func get(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Sandbox connections reach the gateway only through control connections the
// supervisor opened (the relay dials nothing); many at once, each paired with
// its own control connection; without a supervisor they are refused after
// PairTimeout rather than held forever.
func TestRelayPairsSandboxesWithControlConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gateway:"+r.URL.Path) })}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gw.Serve(gl)
	defer gw.Close()

	sandboxAddr, controlAddr := freeAddr(t), freeAddr(t)
	relayDone := make(chan error, 1)
	rlog := &readyLog{ready: make(chan struct{})}
	go func() { relayDone <- run(ctx, sandboxAddr, controlAddr, rlog, 3*time.Second) }()
	// The relay prints its first line once both listeners are open.
	select {
	case <-rlog.ready:
	case err := <-relayDone:
		t.Fatalf("relay ended before it listened: %v", err)
	}

	// No supervisor yet: a sandbox connection is not served.
	if _, err := get(t, sandboxAddr); err == nil {
		t.Fatal("a sandbox connection was served with no supervisor")
	}

	fctx, fcancel := context.WithCancel(ctx)
	dials := make(chan struct{}, 1000)
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		Feed(fctx, 4, func(ctx context.Context) (net.Conn, error) {
			dials <- struct{}{}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", controlAddr)
		}, gl.Addr().String(), io.Discard)
	}()
	const n = 20
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			body, err := get(t, sandboxAddr)
			if err == nil && body != "gateway:/x" {
				err = io.ErrUnexpectedEOF
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("sandbox request through the relay: %v", err)
		}
	}
	if len(dials) < n {
		t.Fatalf("%d control connections for %d sandbox connections: each needs its own", len(dials), n)
	}
	fcancel()
	<-feedDone
	// The supervisor is gone: its idle control connections are dropped, and
	// new sandbox connections are refused after the pairing timeout.
	if _, err := get(t, sandboxAddr); err == nil {
		t.Fatal("served after the supervisor left")
	}
	cancel()
	if err := <-relayDone; err != nil {
		t.Fatalf("relay: %v", err)
	}
}
