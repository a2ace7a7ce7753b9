package gateway

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"
)

// Listeners are a gateway's listeners for one run, opened on demand (a
// worker's provider asks for its own while the run goes on): one per
// address, for the whole run, each serving until ctx ends. Safe for
// concurrent use.
type Listeners struct {
	gw      *Gateway
	ctx     context.Context
	serving errgroup.Group
	mu      sync.Mutex
	urls    map[string]string // listen address|host -> URL
}

// Listeners is a set of listeners of g that serve until ctx ends.
func (g *Gateway) Listeners(ctx context.Context) *Listeners {
	return &Listeners{gw: g, ctx: ctx, urls: map[string]string{}}
}

// Open makes the gateway listen on listen and returns the URL sandboxes
// use to reach it there, through host; proxied is a listener behind a
// trusted relay that names each connection's sandbox first (ServeProxied).
// An address opened before returns its URL.
func (ls *Listeners) Open(listen, host string, proxied bool) (string, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	key := listen + "|" + host
	if url, ok := ls.urls[key]; ok {
		return url, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", fmt.Errorf("listen for the model gateway on %s: %w", listen, err)
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	ls.urls[key] = url
	if proxied {
		ls.serving.Go(func() error { return ls.gw.ServeProxied(ls.ctx, ln) })
	} else {
		ls.serving.Go(func() error { return ls.gw.Serve(ls.ctx, ln) })
	}
	return url, nil
}

// Wait waits until every listener has stopped serving (ctx ended).
func (ls *Listeners) Wait() { _ = ls.serving.Wait() }
