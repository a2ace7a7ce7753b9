// Package faultproxy is a loopback proxy in front of the real Docker daemon
// socket that can refuse, hang, drop or stall selected Docker Engine API
// calls. It injects faults into the real engine for tests: everything it does
// not intercept is forwarded to the daemon unchanged, hijacked streams
// (exec attach, the "Upgrade: tcp" protocol) included.
//
// Point a Docker client at it with DOCKER_HOST=tcp://127.0.0.1:PORT (the
// string Start returns), or at a unix socket path.
package faultproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
)

// DefaultUpstream is the Docker daemon's usual socket.
const DefaultUpstream = "unix:///var/run/docker.sock"

// Action is what the proxy does with a request that matches a Rule.
type Action int

const (
	// Pass forwards the request to the daemon (the default for unmatched requests).
	Pass Action = iota
	// Refuse answers Status (default 500) with a Docker-style JSON error
	// body {"message": Message}; the daemon never sees the request.
	Refuse
	// Hang never answers and never forwards: the request is held until the
	// client goes away or the proxy is closed.
	Hang
	// Drop closes the client's connection without an answer; the daemon
	// never sees the request.
	Drop
	// Stall forwards the request (the daemon does the work) but withholds
	// the answer: for an ordinary call nothing comes back; for a hijacked
	// stream (exec start, attach) the upgrade headers are relayed and then
	// no output ever arrives, as if the command hung. The client's side of
	// the stream is still forwarded.
	Stall
)

func (a Action) String() string {
	switch a {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Hang:
		return "hang"
	case Drop:
		return "drop"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Rule selects requests and says what to do with them. Rules are tried in
// order; the first that matches and has uses left applies.
type Rule struct {
	// Method matches the HTTP method ("" matches any).
	Method string
	// Path is a regular expression matched against the URL path with the
	// API version prefix removed, e.g. `^/containers/create$` or
	// `^/exec/[^/]+/start$`.
	Path string
	// Action is applied to matching requests.
	Action Action
	// Status and Message shape a Refuse answer (default 500, "injected fault").
	Status  int
	Message string
	// Times limits the rule to the first Times matching requests (0: all of them).
	Times int
}

type rule struct {
	Rule
	re   *regexp.Regexp
	hits int
}

// Proxy is a fault-injecting Docker API proxy.
type Proxy struct {
	network, address string // upstream dial target

	mu       sync.Mutex
	rules    []*rule
	requests []string
	conns    map[net.Conn]bool
	ln       net.Listener
	closed   chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

var versionPrefix = regexp.MustCompile(`^/v[0-9]+(\.[0-9]+)*/`)

// New returns a proxy for the daemon at upstream ("unix:///path" or
// "tcp://host:port"; "" is DefaultUpstream).
func New(upstream string) (*Proxy, error) {
	if upstream == "" {
		upstream = DefaultUpstream
	}
	p := &Proxy{conns: map[net.Conn]bool{}, closed: make(chan struct{})}
	switch {
	case strings.HasPrefix(upstream, "unix://"):
		p.network, p.address = "unix", strings.TrimPrefix(upstream, "unix://")
	case strings.HasPrefix(upstream, "tcp://"):
		p.network, p.address = "tcp", strings.TrimPrefix(upstream, "tcp://")
	default:
		return nil, fmt.Errorf("parse upstream %q: want unix:///path or tcp://host:port", upstream)
	}
	return p, nil
}

// SetRules replaces the rules (and their use counts).
func (p *Proxy) SetRules(rules ...Rule) error {
	var rs []*rule
	for _, r := range rules {
		re, err := regexp.Compile(r.Path)
		if err != nil {
			return fmt.Errorf("compile rule path %q: %w", r.Path, err)
		}
		rs = append(rs, &rule{Rule: r, re: re})
	}
	p.mu.Lock()
	p.rules = rs
	p.mu.Unlock()
	return nil
}

// Hits returns how many requests each rule of the last SetRules was applied to.
func (p *Proxy) Hits() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.hits
	}
	return out
}

// Requests returns every request seen so far as "METHOD /path action"
// (path without the version prefix), in arrival order.
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

// Start listens on addr ("127.0.0.1:0" for a free loopback port, or
// "unix:///path/to/sock") and serves until ctx ends or Close is called. It
// returns the value for DOCKER_HOST ("tcp://127.0.0.1:PORT" or "unix:///path").
func (p *Proxy) Start(ctx context.Context, addr string) (string, error) {
	var lc net.ListenConfig
	network, a := "tcp", addr
	if strings.HasPrefix(addr, "unix://") {
		network, a = "unix", strings.TrimPrefix(addr, "unix://")
	}
	ln, err := lc.Listen(ctx, network, a)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Close()
		case <-p.closed:
		}
	}()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			select {
			case <-p.closed:
				p.mu.Unlock()
				c.Close()
				return
			default:
			}
			p.conns[c] = true
			p.wg.Add(1)
			p.mu.Unlock()
			go func() {
				defer p.wg.Done()
				p.serve(c)
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
			}()
		}
	}()
	if network == "unix" {
		return "unix://" + a, nil
	}
	return "tcp://" + ln.Addr().String(), nil
}

// Close stops listening, releases held requests and closes every connection.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		close(p.closed)
		if p.ln != nil {
			_ = p.ln.Close()
		}
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
	return nil
}

// match picks the rule for a request and records it.
func (p *Proxy) match(req *http.Request) *rule {
	path := "/" + strings.TrimPrefix(versionPrefix.ReplaceAllString(req.URL.Path, ""), "/")
	p.mu.Lock()
	defer p.mu.Unlock()
	var hit *rule
	for _, r := range p.rules {
		if r.Method != "" && !strings.EqualFold(r.Method, req.Method) {
			continue
		}
		if !r.re.MatchString(path) {
			continue
		}
		if r.Times > 0 && r.hits >= r.Times {
			continue
		}
		r.hits++
		hit = r
		break
	}
	act := Pass
	if hit != nil {
		act = hit.Action
	}
	p.requests = append(p.requests, req.Method+" "+path+" "+act.String())
	return hit
}

// hold blocks until the client closes its side or the proxy closes.
func (p *Proxy) hold(c net.Conn, br *bufio.Reader) {
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, br)
		close(gone)
	}()
	select {
	case <-gone:
	case <-p.closed:
	}
}

// serve handles one client connection: a sequence of keep-alive requests,
// possibly ending in a hijacked stream.
func (p *Proxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	var up net.Conn
	var upbr *bufio.Reader
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		r := p.match(req)
		act := Pass
		if r != nil {
			act = r.Action
		}
		switch act {
		case Refuse:
			_, _ = io.Copy(io.Discard, req.Body)
			status, msg := r.Status, r.Message
			if status == 0 {
				status = http.StatusInternalServerError
			}
			if msg == "" {
				msg = "injected fault"
			}
			body, _ := json.Marshal(map[string]string{"message": msg})
			resp := &http.Response{
				StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Request: req,
				Header:        http.Header{"Content-Type": {"application/json"}, "Api-Version": {"1.41"}},
				ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(string(body))),
			}
			if err := resp.Write(c); err != nil {
				return
			}
			continue
		case Drop:
			return
		case Hang:
			_, _ = io.Copy(io.Discard, req.Body)
			p.hold(c, br)
			return
		}
		// Pass or Stall: forward.
		if up == nil {
			up, err = net.Dial(p.network, p.address)
			if err != nil {
				writeError(c, req, http.StatusBadGateway, "faultproxy: dial daemon: "+err.Error())
				return
			}
			upbr = bufio.NewReader(up)
		}
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(upbr, req)
		if err != nil {
			return
		}
		hijack := resp.StatusCode == http.StatusSwitchingProtocols ||
			(req.Header.Get("Upgrade") != "" && resp.StatusCode == http.StatusOK &&
				strings.Contains(resp.Header.Get("Content-Type"), "vnd.docker"))
		if hijack {
			if _, err := fmt.Fprintf(c, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.Status); err != nil {
				return
			}
			if err := resp.Header.Write(c); err != nil {
				return
			}
			if _, err := io.WriteString(c, "\r\n"); err != nil {
				return
			}
			p.relay(c, br, up, upbr, act == Stall)
			return
		}
		if act == Stall {
			resp.Body.Close()
			p.hold(c, br)
			return
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

type closeWriter interface{ CloseWrite() error }

// relay copies a hijacked stream both ways with half-closes; with stall the
// daemon's output is withheld until the client or the proxy closes.
func (p *Proxy) relay(c net.Conn, br *bufio.Reader, up net.Conn, upbr *bufio.Reader, stall bool) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, br)
		if cw, ok := up.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	if stall {
		// Hold the stream open (a half-closed client cannot be told apart
		// from a gone one) until the proxy closes.
		<-p.closed
		return
	}
	go func() {
		_, _ = io.Copy(c, upbr)
		if cw, ok := c.(closeWriter); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	for i := 0; i < 2; i++ {
		select {
		case <-done:
		case <-p.closed:
			return
		}
	}
}

func writeError(c net.Conn, req *http.Request, status int, msg string) {
	body, _ := json.Marshal(map[string]string{"message": msg})
	resp := &http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: true,
		Header:        http.Header{"Content-Type": {"application/json"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(string(body))),
	}
	_ = resp.Write(c)
}
