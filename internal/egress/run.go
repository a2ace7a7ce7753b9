package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Arg is the hidden subcommand that runs a proxy: `steward __egress
// LISTEN SPEC`, SPEC being Spec as JSON.
const Arg = "__egress"

// Spec is what a proxy container is started with.
type Spec struct {
	// Hosts are the allowed hosts (allowed_hosts, as ParseHost reads them).
	Hosts []string `json:"hosts"`
	// Allow and Deny are AddrPolicy's prefixes.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Probe asks for no proxy: print this network namespace's addresses
	// (HostAddrsPrefix, then ProbeAddrs's) and exit. The docker provider
	// runs it on the host's network when Steward itself runs in a
	// container, to learn the host's own addresses for Deny.
	Probe bool `json:"probe,omitempty"`
}

// HostAddrsPrefix starts the line a probe prints.
const HostAddrsPrefix = "egress host addresses:"

// ProbeAddrs are this network namespace's interface addresses that a
// proxy could dial (loopback and link-local are refused anyway), each as a
// single-address prefix, sorted.
func ProbeAddrs() ([]string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	var out []string
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ad := pfx.Addr().Unmap().WithZone("")
		if ad.IsLoopback() || ad.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, netip.PrefixFrom(ad, ad.BitLen()).String())
	}
	sort.Strings(out)
	return out, nil
}

// Encode is s as the SPEC argument.
func (s Spec) Encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Config reads s into a Config (the bounds at their defaults).
func (s Spec) Config() (Config, error) {
	var c Config
	for _, h := range s.Hosts {
		p, err := ParseHost(h)
		if err != nil {
			return Config{}, err
		}
		c.Hosts = append(c.Hosts, p)
	}
	for _, set := range []struct {
		in  []string
		out *[]netip.Prefix
	}{{s.Allow, &c.Addrs.Allow}, {s.Deny, &c.Addrs.Deny}} {
		for _, v := range set.in {
			p, err := ParsePrefix(v)
			if err != nil {
				return Config{}, err
			}
			*set.out = append(*set.out, p)
		}
	}
	return c, nil
}

// ParsePrefix reads a prefix ("10.1.0.0/16") or a single address.
func ParsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or a prefix (10.1.0.0/16)", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Run serves a proxy for spec (Spec as JSON) on listen until ctx ends. Its
// first line on log says where it listens.
func Run(ctx context.Context, listen, spec string, log io.Writer) error {
	var s Spec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("egress proxy: bad spec: %w", err)
	}
	if s.Probe {
		addrs, err := ProbeAddrs()
		if err != nil {
			return fmt.Errorf("egress probe: %w", err)
		}
		fmt.Fprintln(log, HostAddrsPrefix, strings.Join(addrs, " "))
		return nil
	}
	cfg, err := s.Config()
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if len(cfg.Hosts) == 0 {
		return fmt.Errorf("egress proxy: no allowed hosts")
	}
	cfg.Log = log
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("egress proxy listen %s: %w", listen, err)
	}
	fmt.Fprintf(log, "egress proxy on %s for %d allowed hosts\n", ln.Addr(), len(cfg.Hosts))
	return New(cfg).Serve(ctx, ln)
}
