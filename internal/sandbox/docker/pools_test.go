package docker

import (
	"encoding/json"
	"github.com/steward-evals/steward/internal/sandbox"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestFreeNetworks(t *testing.T) {
	tests := []struct {
		name  string
		pools []AddressPool
		used  []netip.Prefix
		want  int
	}{
		{"built-in, nothing used", BuiltinPools, nil, 31},
		{"built-in, default bridge", BuiltinPools, prefixes("172.17.0.0/16"), 30},
		{"built-in, bridge + two user nets", BuiltinPools, prefixes("172.17.0.0/16", "172.18.0.0/16", "192.168.0.0/20"), 28},
		{"built-in, a small subnet blocks a whole /16", BuiltinPools, prefixes("172.20.5.0/24"), 30},
		{"built-in, a /12 blocks all of 172", BuiltinPools, prefixes("172.16.0.0/12"), 16},
		{"built-in, IPv6 ignored", BuiltinPools, prefixes("fd00::/64"), 31},
		{"finer, nothing used", FinerPools, nil, 512},
		{"finer, default bridge", FinerPools, prefixes("172.17.0.0/16"), 496},
		{"finer, bridge and a /20 and a /24", FinerPools, prefixes("172.17.0.0/16", "172.30.16.0/20", "192.168.5.0/24"), 494},
		{"overlapping pools are not counted twice", []AddressPool{{"10.0.0.0/16", 24}, {"10.0.0.0/16", 24}}, nil, 256},
		{"a later pool's coarser subnet overlapping taken ones is skipped",
			[]AddressPool{{"10.0.0.0/24", 26}, {"10.0.0.0/16", 20}}, nil, 4 + 15},
		{"a later pool's finer subnets inside an earlier one are skipped",
			[]AddressPool{{"10.0.0.0/20", 20}, {"10.0.0.0/16", 24}}, nil, 1 + 240},
		{"whole pool used", []AddressPool{{"10.1.0.0/16", 24}}, prefixes("10.0.0.0/8"), 0},
		{"size equals base", []AddressPool{{"10.1.0.0/16", 16}}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FreeNetworks(tc.pools, tc.used)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
	for _, bad := range [][]AddressPool{{{"nonsense", 24}}, {{"10.0.0.0/16", 8}}, {{"10.0.0.0/16", 33}}, {{"fd00::/48", 64}}} {
		if _, err := FreeNetworks(bad, nil); err == nil {
			t.Errorf("pools %v accepted", bad)
		}
	}
}

func TestBigPoolIsFast(t *testing.T) {
	// 10.0.0.0/8 in /24s is 65 536 networks; the count must not be quadratic.
	got, err := FreeNetworks([]AddressPool{{"10.0.0.0/8", 24}, {"10.0.0.0/8", 24}}, prefixes("10.3.0.0/16"))
	if err != nil || got != 65536-256 {
		t.Fatalf("got %d %v", got, err)
	}
}

func TestComputeCapacity(t *testing.T) {
	tests := []struct {
		cpus     int
		mem, per int64
		free     int
		limit    int
		source   string
	}{
		{4, 64 << 30, 2 << 30, -1, 8, "docker default: 2 × 4 CPUs"},
		{4, 64 << 30, 2 << 30, 100, 8, "docker default: 2 × 4 CPUs"},
		{2, 23.5 * (1 << 30), 8 << 30, -1, 2, "docker default: memory 23.5 GiB ÷ 8 GiB"},
		{2, 16 << 30, 4 << 30, -1, 4, "docker default: 2 × 2 CPUs"}, // a tie goes to CPUs
		{16, 23.5 * (1 << 30), 2 << 30, -1, 11, "docker default: memory 23.5 GiB ÷ 2 GiB"},
		{16, 64 << 30, 1 << 30, 29, 29, "docker default: 29 free networks in address pools"},
		{16, 1 << 30, 2 << 30, -1, 1, "docker default: memory 1 GiB ÷ 2 GiB"},
		{16, 64 << 30, 1 << 30, 0, 1, "docker default: 0 free networks in address pools"},
		{64, 23.5 * (1 << 30), 512 << 20, -1, 47, "docker default: memory 23.5 GiB ÷ 512 MiB"},
	}
	for _, tc := range tests {
		c := ComputeCapacity(tc.cpus, tc.mem, tc.per, tc.free)
		if c.Limit != tc.limit || c.Source != tc.source || c.Exclusive {
			t.Errorf("ComputeCapacity(%d,%d,%d,%d) = %+v, want %d %q", tc.cpus, tc.mem, tc.per, tc.free, c, tc.limit, tc.source)
		}
	}
}

func TestNetworksWanted(t *testing.T) {
	s := func(n string) specT { return specT{Network: n} }
	if got := NetworksWanted(toSpecs(s(""), s("gateway")), 8); got != 1 {
		t.Errorf("gateway only: %d", got)
	}
	if got := NetworksWanted(toSpecs(s("bridge"), s("")), 8); got != 2 {
		t.Errorf("with bridge: %d", got)
	}
	if got := NetworksWanted(toSpecs(s("isolated"), s("bridge")), 8); got != 10 {
		t.Errorf("isolated: %d", got)
	}
}

func TestReadDaemonPools(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "daemon.json")
	if _, ok, err := ReadDaemonPools(p); ok || err != nil {
		t.Fatalf("missing file: ok=%v err=%v", ok, err)
	}
	os.WriteFile(p, []byte(`{"mtu": 1400}`), 0o644)
	if _, ok, err := ReadDaemonPools(p); ok || err != nil {
		t.Fatalf("no pools: ok=%v err=%v", ok, err)
	}
	os.WriteFile(p, []byte(`{"default-address-pools":[{"base":"10.10.0.0/16","size":24}]}`), 0o644)
	pools, ok, err := ReadDaemonPools(p)
	if !ok || err != nil || len(pools) != 1 || pools[0] != (AddressPool{"10.10.0.0/16", 24}) {
		t.Fatalf("pools %v ok=%v err=%v", pools, ok, err)
	}
	os.WriteFile(p, []byte(`{not json`), 0o644)
	if _, _, err := ReadDaemonPools(p); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestWriteDaemonJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "docker", "daemon.json")
	// No file yet: it is created, no backup.
	backup, err := WriteDaemonJSON(p)
	if err != nil || backup != "" {
		t.Fatalf("new file: backup %q err %v", backup, err)
	}
	pools, ok, err := ReadDaemonPools(p)
	if !ok || err != nil || len(pools) != 2 || pools[0] != FinerPools[0] || pools[1] != FinerPools[1] {
		t.Fatalf("written pools %v", pools)
	}
	// An existing file: other keys kept, old pools replaced, backup byte-exact.
	orig := []byte(`{"mtu": 1400, "log-opts": {"max-size": "10m"}, "default-address-pools": [{"base":"10.0.0.0/8","size":24}]}`)
	os.WriteFile(p, orig, 0o600)
	os.Chmod(p, 0o600)
	backup, err = WriteDaemonJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backup); string(b) != string(orig) {
		t.Fatalf("backup %s holds %q", backup, b)
	}
	var got map[string]any
	data, _ := os.ReadFile(p)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got["mtu"] != 1400.0 || got["log-opts"].(map[string]any)["max-size"] != "10m" {
		t.Fatalf("other keys lost: %s", data)
	}
	if n, _ := TotalNetworks(mustPools(t, p)); n != 512 {
		t.Fatalf("written pools carve %d networks", n)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	// A second write keeps the first backup and makes another.
	backup2, err := WriteDaemonJSON(p)
	if err != nil || backup2 == backup {
		t.Fatalf("second backup %q (first %q) err %v", backup2, backup, err)
	}
	// A file that is not a JSON object is refused and left as it was.
	os.WriteFile(p, []byte(`[1,2]`), 0o644)
	if _, err := WriteDaemonJSON(p); err == nil {
		t.Fatal("non-object daemon.json overwritten")
	}
	if b, _ := os.ReadFile(p); string(b) != `[1,2]` {
		t.Fatalf("file changed to %q", b)
	}
}

func mustPools(t *testing.T, p string) []AddressPool {
	pools, ok, err := ReadDaemonPools(p)
	if !ok || err != nil {
		t.Fatalf("read pools: %v", err)
	}
	return pools
}

func TestPoolReport(t *testing.T) {
	r, err := BuildPoolReport(BuiltinPools, "Docker's built-in pools", prefixes("172.17.0.0/16"), 40, "/etc/docker/daemon.json", "linux")
	if err != nil {
		t.Fatal(err)
	}
	if r.Total != 31 || r.Free != 30 || r.Enough || r.SuggestedFree != 496 {
		t.Fatalf("%+v", r)
	}
	var b strings.Builder
	if err := RenderPoolReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"31 networks in all, 1 in use by existing networks, 30 free",
		"wants 40 Docker networks but the daemon's address pools can give only 30 more",
		"gives 496 free networks",
		`{"base": "172.17.0.0/12", "size": 20}`,
		`{"base": "192.168.0.0/16", "size": 24}`,
		"/etc/docker/daemon.json",
		"sudo systemctl restart docker",
		"never restarts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	r2, _ := BuildPoolReport(BuiltinPools, "x", nil, 5, "/p", "darwin")
	b.Reset()
	RenderPoolReport(&b, r2)
	if !r2.Enough || strings.Contains(b.String(), "restart") {
		t.Errorf("enough pools still advise: %s", b.String())
	}
	if !strings.Contains(RestartCommand("darwin"), "Docker Desktop") {
		t.Error("darwin restart command")
	}
}

type specT = sandbox.Spec

func toSpecs(s ...specT) []specT { return s }
