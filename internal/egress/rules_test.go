package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	good := map[string]string{
		"pypi.org":            "pypi.org",
		"PyPI.Org.":           "pypi.org",
		"*.pythonhosted.org":  "*.pythonhosted.org",
		"a-b.c0.example":      "a-b.c0.example",
		"xn--bcher-kva.test":  "xn--bcher-kva.test",
		"0x7f.example.com":    "0x7f.example.com", // a name: example and com are no numbers
		"deb.debian.org":      "deb.debian.org",
		"*.Files.Example.ORG": "*.files.example.org",
	}
	for in, want := range good {
		p, err := ParseHost(in)
		if err != nil {
			t.Errorf("ParseHost(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("ParseHost(%q) = %s, want %s", in, p, want)
		}
	}
	bad := map[string]string{
		"":                               "empty",
		"localhost":                      "single-label",
		"pypi":                           "single-label",
		"*.org":                          "wildcard over a single label",
		"*":                              "wildcard is allowed only",
		"a.*.org":                        "wildcard is allowed only",
		"*.*.org":                        "wildcard is allowed only",
		"**.org":                         "wildcard is allowed only",
		"https://pypi.org":               "host name alone",
		"pypi.org:443":                   "host name alone",
		"pypi.org/simple":                "host name alone",
		"user@pypi.org":                  "host name alone",
		"[::1]":                          "host name alone",
		"::1":                            "host name alone",
		"127.0.0.1":                      "IP address",
		"169.254.169.254":                "IP address",
		"2130706433":                     "IP address",
		"0x7f000001":                     "IP address",
		"017700000001":                   "IP address",
		"0x7f.1":                         "IP address",
		"127.1":                          "IP address",
		"0177.0.0.1":                     "IP address",
		"0x7f.0x0.0x0.0x1":               "IP address",
		"1.2.3.4.5":                      "IP address", // last label numeric
		"example.123":                    "IP address",
		"-a.example.org":                 "hyphen",
		"a-.example.org":                 "hyphen",
		"a..example.org":                 "label is empty",
		"exa_mple.org":                   "character",
		"bücher.de":                      "xn--",
		strings.Repeat("a", 64) + ".org": "63",
	}
	for in, want := range bad {
		_, err := ParseHost(in)
		if err == nil {
			t.Errorf("ParseHost(%q) accepted", in)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHost(%q) = %v, want it to say %q", in, err, want)
		}
	}
}

func TestNormalizeHostRefusesEveryIPSpelling(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "2130706433", "0x7f.1", "127.1", "0177.1", "0x7F.0.0.1", "0x", "0.0.0.0", "::ffff:127.0.0.1", "[::1]", "fe80::1%eth0", "4294967295", "8.8.8.8"} {
		if _, err := NormalizeHost(s); !errors.Is(err, ErrIPLiteral) {
			t.Errorf("NormalizeHost(%q) = %v, want ErrIPLiteral", s, err)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	exact, _ := ParseHost("pypi.org")
	wild, _ := ParseHost("*.pythonhosted.org")
	cases := []struct {
		p    Pattern
		host string
		want bool
	}{
		{exact, "pypi.org", true},
		{exact, "www.pypi.org", false},
		{exact, "pypi.org.evil.test", false},
		{exact, "evilpypi.org", false},
		{wild, "files.pythonhosted.org", true},
		{wild, "a.b.pythonhosted.org", true},
		{wild, "pythonhosted.org", false}, // the apex is not below itself
		{wild, "evilpythonhosted.org", false},
		{wild, "pythonhosted.org.evil.test", false},
	}
	for _, c := range cases {
		if got := c.p.Match(c.host); got != c.want {
			t.Errorf("%s.Match(%q) = %v, want %v", c.p, c.host, got, c.want)
		}
	}
}

func TestAddrPolicy(t *testing.T) {
	open := AddrPolicy{
		Allow: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fd00:ec2::/32"), netip.MustParsePrefix("100.64.0.0/10")},
		Deny:  []netip.Prefix{netip.MustParsePrefix("93.184.0.1/32")},
	}
	cases := []struct {
		addr string
		pol  AddrPolicy
		ok   bool
		why  string
	}{
		{"93.184.215.14", AddrPolicy{}, true, ""},
		{"2606:4700::1111", AddrPolicy{}, true, ""},
		{"127.0.0.1", AddrPolicy{}, false, "loopback"},
		{"127.0.0.1", open, false, "loopback"}, // Allow never opens loopback
		{"::1", open, false, "loopback"},
		{"::ffff:127.0.0.1", open, false, "loopback"}, // IPv4-mapped
		{"169.254.169.254", AddrPolicy{}, false, "link-local"},
		{"169.254.169.254", open, false, "link-local"}, // nor the metadata service
		{"fe80::1", open, false, "link-local"},
		{"fd00:ec2::254", open, false, "not a unicast address the proxy dials"}, // AWS IPv6 metadata
		{"100.100.100.200", open, false, "not a unicast address the proxy dials"},
		{"0.0.0.0", open, false, "not a unicast"},
		{"::", open, false, "not a unicast"},
		{"224.0.0.1", open, false, "link-local"},
		{"239.1.2.3", open, false, "not a unicast"},
		{"255.255.255.255", open, false, "not a unicast"},
		{"64:ff9b::7f00:1", open, false, "not a unicast"},  // NAT64 of 127.0.0.1
		{"2002:7f00:1::1", open, false, "not a unicast"},   // 6to4 of 127.0.0.1
		{"2001:0:7f00:1::1", open, false, "not a unicast"}, // Teredo
		{"::127.0.0.1", open, false, "not a unicast"},      // IPv4-compatible
		{"10.0.0.1", AddrPolicy{}, false, "private"},
		{"172.17.0.1", AddrPolicy{}, false, "private"}, // Docker's bridge: the host
		{"192.168.1.1", AddrPolicy{}, false, "private"},
		{"100.64.0.1", AddrPolicy{}, false, "private"},
		{"198.18.0.1", AddrPolicy{}, false, "private"},
		{"240.0.0.1", AddrPolicy{}, false, "private"},
		{"fd12::1", AddrPolicy{}, false, "private"},
		{"10.9.1.2", open, true, ""},          // opened by the operator
		{"10.10.1.2", open, false, "private"}, // not that prefix
		{"100.64.0.1", open, true, ""},
		{"93.184.0.1", open, false, "machine's own"}, // denied although global
	}
	for _, c := range cases {
		err := c.pol.Check(netip.MustParseAddr(c.addr))
		if c.ok {
			if err != nil {
				t.Errorf("Check(%s) = %v, want allowed", c.addr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Check(%s) = %v, want refused (%s)", c.addr, err, c.why)
		}
	}
}

func TestSpecRoundTrip(t *testing.T) {
	s := Spec{Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Allow: []string{"10.1.0.0/16", "10.2.3.4"}, Deny: []string{"203.0.113.9"}}
	c, err := s.Config()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hosts) != 2 || c.Addrs.Allow[1] != netip.MustParsePrefix("10.2.3.4/32") || c.Addrs.Deny[0] != netip.MustParsePrefix("203.0.113.9/32") {
		t.Fatalf("config %+v", c)
	}
	if _, err := (Spec{Hosts: []string{"127.0.0.1"}}).Config(); err == nil {
		t.Fatal("an IP literal host was accepted")
	}
	if _, err := (Spec{Hosts: []string{"a.test"}, Allow: []string{"nonsense"}}).Config(); err == nil {
		t.Fatal("a bad prefix was accepted")
	}
}

// TestRunProbe: a probe prints this network namespace's addresses, as the
// docker provider reads them, and serves nothing.
func TestRunProbe(t *testing.T) {
	var out strings.Builder
	if err := Run(context.Background(), "127.0.0.1:0", Spec{Probe: true}.Encode(), &out); err != nil {
		t.Fatal(err)
	}
	want, err := ProbeAddrs()
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(out.String())
	rest, ok := strings.CutPrefix(line, HostAddrsPrefix)
	if !ok || strings.Join(strings.Fields(rest), " ") != strings.Join(want, " ") {
		t.Fatalf("probe printed %q, want %q", line, want)
	}
	for _, a := range want {
		p := netip.MustParsePrefix(a)
		if !p.IsSingleIP() || p.Addr().IsLoopback() {
			t.Fatalf("probe address %s", a)
		}
	}
}
