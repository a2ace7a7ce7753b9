// Package egress is Steward's egress proxy: the HTTP proxy that a sandbox
// with a network allowlist (a Harbor task's network_mode = "allowlist",
// allowed_hosts) reaches the outside world through, and the rule it
// applies. Everything a sandbox sends it is hostile.
//
// The rule (docs/security.md, "Network allowlists"):
//   - a destination is a host name, never an IP literal in any spelling
//     (127.0.0.1, 2130706433, 0x7f.1, 127.1, [::1]);
//   - the name matches an allowed host: exactly, or under a wildcard
//     "*.example.org", which matches any name below example.org but not
//     example.org itself;
//   - the port is 80 or 443;
//   - the proxy resolves the name itself and dials only the addresses it
//     checked (no second lookup a rebinding name could answer differently),
//     and only global unicast addresses: loopback, link-local (the cloud
//     metadata service at 169.254.169.254 among them), unspecified,
//     multicast and addresses that embed an IPv4 address (NAT64, 6to4,
//     Teredo, IPv4-compatible) are refused always; private, shared (CGNAT)
//     and reserved ranges unless the operator opens a prefix of them
//     (AddrPolicy.Allow); the machine's own addresses (AddrPolicy.Deny)
//     always.
//
// It imports nothing of Steward's: the docker provider runs it in a
// container of its own per sandbox (`steward __egress`).
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern is one allowed host: an exact name, or a wildcard "*.suffix"
// that matches every name below suffix (not suffix itself).
type Pattern struct {
	name string // lower case, no trailing dot; the suffix of a wildcard
	wild bool
}

// String is the pattern as written in allowed_hosts (normalized).
func (p Pattern) String() string {
	if p.wild {
		return "*." + p.name
	}
	return p.name
}

// Match says whether host (normalized by NormalizeHost) is allowed by p.
func (p Pattern) Match(host string) bool {
	if p.wild {
		return len(host) > len(p.name)+1 && strings.HasSuffix(host, "."+p.name)
	}
	return host == p.name
}

// Matches says whether any of ps allows host.
func Matches(ps []Pattern, host string) bool {
	for _, p := range ps {
		if p.Match(host) {
			return true
		}
	}
	return false
}

// ParseHost reads one allowed_hosts entry: a host name of at least two
// labels ("pypi.org", "files.pythonhosted.org") or a wildcard over one
// ("*.pythonhosted.org"). Refused: IP literals in any spelling, ports,
// schemes, paths, single labels ("localhost"), a wildcard over a single
// label ("*.org") or anywhere but the first label, names that are not
// ASCII (write IDNs in their xn-- form).
func ParseHost(s string) (Pattern, error) {
	raw := s
	if strings.ContainsAny(s, "/:@?#[] \t") {
		return Pattern{}, fmt.Errorf("%q: an allowed host is a host name alone (no scheme, port, path or address)", raw)
	}
	wild := false
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		wild, s = true, rest
	}
	if strings.Contains(s, "*") {
		return Pattern{}, fmt.Errorf("%q: a wildcard is allowed only as the whole first label (*.example.org)", raw)
	}
	name, err := NormalizeHost(s)
	if err != nil {
		return Pattern{}, fmt.Errorf("%q: %w", raw, err)
	}
	if !strings.Contains(name, ".") {
		if wild {
			return Pattern{}, fmt.Errorf("%q: a wildcard over a single label allows too much: name the domain (*.example.org)", raw)
		}
		return Pattern{}, fmt.Errorf("%q: a single-label name is resolved through search domains and local names: give the full name (at least two labels)", raw)
	}
	return Pattern{name: name, wild: wild}, nil
}

// ErrIPLiteral is why a destination or an allowed host that is an IP
// address, in any spelling a resolver might accept, is refused.
var ErrIPLiteral = errors.New("an IP address, not a host name: allowlists name hosts")

// NormalizeHost lower-cases a host name, drops one trailing dot and checks
// that it is a DNS host name (letters, digits and hyphens, labels of 1–63
// characters, 253 in all) and no IP literal: not an IPv6 or IPv4 address,
// not an inet_aton spelling (2130706433, 0x7f.1, 127.1, 0177.0.0.1), and
// its last label not numeric (no top-level domain is).
func NormalizeHost(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty host name")
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return "", ErrIPLiteral
	}
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	if h == "" || len(h) > 253 {
		return "", errors.New("not a host name (1 to 253 characters)")
	}
	labels := strings.Split(h, ".")
	numeric := true
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", errors.New("not a host name (a label is empty or longer than 63 characters)")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("not a host name (character %q; write internationalized names in their xn-- form)", c)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("not a host name (a label starts or ends with a hyphen)")
		}
		if !inetAtonPart(l) {
			numeric = false
		}
	}
	if numeric && len(labels) <= 4 {
		return "", ErrIPLiteral
	}
	if last := labels[len(labels)-1]; allDigits(last) {
		return "", ErrIPLiteral
	}
	return h, nil
}

// inetAtonPart: a part of an IPv4 address as inet_aton reads it: decimal,
// octal (leading 0) or hexadecimal (0x).
func inetAtonPart(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		if h == "" {
			return true // "0x" is 0 to inet_aton
		}
		_, err := strconv.ParseUint(h, 16, 64)
		return err == nil || errors.Is(err, strconv.ErrRange)
	}
	return allDigits(l)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AddrPolicy decides which resolved addresses the proxy may dial.
type AddrPolicy struct {
	// Allow opens prefixes of the private, shared and reserved ranges (a
	// package mirror on the runner's network). It never opens loopback,
	// link-local, unspecified, multicast, IPv4-embedding or metadata
	// addresses.
	Allow []netip.Prefix
	// Deny refuses addresses even when global: the machine's own.
	Deny []netip.Prefix
}

// never are refused whatever Allow says.
var never = prefixes(
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32",
	"100.100.100.200/32", // Alibaba Cloud's metadata service (inside 100.64/10)
	"::/96",              // unspecified, loopback and IPv4-compatible
	"fe80::/10", "ff00::/8",
	"64:ff9b::/96", "64:ff9b:1::/48", // NAT64: an IPv4 address inside
	"2002::/16",       // 6to4: an IPv4 address inside
	"2001::/32",       // Teredo: an IPv4 address inside
	"fd00:ec2::/32",   // AWS's IPv6 metadata service (inside fc00::/7)
	"::ffff:0:0/96",   // IPv4-mapped (Unmap handles them; belt and braces)
	"::ffff:0:0:0/96", // IPv4-translated
)

// special are refused unless Allow opens them: private, shared,
// documentation, benchmarking and reserved ranges.
var special = prefixes(
	"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
	"192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
	"fc00::/7", "2001:db8::/32", "100::/64", "2001:2::/48", "2001:10::/28", "2001:20::/28",
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func within(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check says why a may not be dialled (nil: it may).
func (p AddrPolicy) Check(a netip.Addr) error {
	if !a.IsValid() {
		return errors.New("no address")
	}
	a = a.Unmap().WithZone("")
	switch {
	case a.IsLoopback():
		return fmt.Errorf("%s is a loopback address", a)
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return fmt.Errorf("%s is a link-local address (the cloud metadata service lives there)", a)
	case a.IsUnspecified() || a.IsMulticast() || within(never, a):
		return fmt.Errorf("%s is not a unicast address the proxy dials", a)
	case within(p.Deny, a):
		return fmt.Errorf("%s is this machine's own address", a)
	case !a.IsGlobalUnicast() || a.IsPrivate() || within(special, a):
		if within(p.Allow, a) {
			return nil
		}
		return fmt.Errorf("%s is a private or reserved address (not opened by the operator)", a)
	}
	return nil
}

// DefaultPorts are the ports a destination may have.
var DefaultPorts = []int{80, 443}
