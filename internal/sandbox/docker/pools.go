package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AddressPool is one entry of the daemon's default-address-pools: Base is
// carved into subnets of prefix length Size.
type AddressPool struct {
	Base string `json:"base"`
	Size int    `json:"size"`
}

// BuiltinPools are the local-scope pools Docker uses when daemon.json sets no
// default-address-pools (libnetwork ipamutils): 172.17..172.31 as /16s and
// 192.168.0.0/16 as /20s, 31 networks in all.
var BuiltinPools = []AddressPool{
	{"172.17.0.0/16", 16}, {"172.18.0.0/16", 16}, {"172.19.0.0/16", 16},
	{"172.20.0.0/14", 16}, {"172.24.0.0/14", 16}, {"172.28.0.0/14", 16},
	{"192.168.0.0/16", 20},
}

// FinerPools carve the same ranges finer: 256 /20s in 172.16.0.0/12 and 256
// /24s in 192.168.0.0/16, 512 networks in all (D1).
var FinerPools = []AddressPool{
	{"172.17.0.0/12", 20},
	{"192.168.0.0/16", 24},
}

// DefaultDaemonJSONPath is where the Docker daemon reads its configuration on Linux.
const DefaultDaemonJSONPath = "/etc/docker/daemon.json"

type span struct{ lo, hi uint32 } // inclusive

func prefixSpan(p netip.Prefix) span {
	p = p.Masked()
	a := p.Addr().As4()
	lo := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	var hi uint32
	if p.Bits() == 0 {
		hi = ^uint32(0)
	} else {
		hi = lo | (^uint32(0) >> p.Bits())
	}
	return span{lo, hi}
}

func (s span) overlaps(o span) bool { return s.lo <= o.hi && o.lo <= s.hi }

// FreeNetworks counts how many more networks a daemon with these pools can
// allocate when the given subnets are already in use. It follows libnetwork's
// allocator: subnets are offered pool by pool, in order, and a subnet is
// taken when it overlaps neither an existing network nor a subnet already
// handed out. IPv6 prefixes in used are ignored. Invalid pools are an error.
func FreeNetworks(pools []AddressPool, used []netip.Prefix) (int, error) {
	var usedSpans []span
	for _, u := range used {
		if u.Addr().Is4() {
			usedSpans = append(usedSpans, prefixSpan(u))
		}
	}
	var taken [][]span // per pool, ascending
	free := 0
	for _, p := range pools {
		base, err := netip.ParsePrefix(p.Base)
		if err != nil || !base.Addr().Is4() {
			return 0, fmt.Errorf("count free networks: bad pool base %q", p.Base)
		}
		if p.Size < base.Bits() || p.Size > 32 {
			return 0, fmt.Errorf("count free networks: pool %s: size %d out of range", p.Base, p.Size)
		}
		bs := prefixSpan(base)
		step := uint64(1) << (32 - p.Size)
		var mine []span
		for lo := uint64(bs.lo); lo <= uint64(bs.hi); lo += step {
			s := span{uint32(lo), uint32(lo + step - 1)}
			if overlapsAny(s, usedSpans) || overlapsTaken(s, taken) {
				continue
			}
			mine = append(mine, s)
			free++
		}
		taken = append(taken, mine)
	}
	return free, nil
}

func overlapsAny(s span, list []span) bool {
	for _, o := range list {
		if s.overlaps(o) {
			return true
		}
	}
	return false
}

func overlapsTaken(s span, taken [][]span) bool {
	for _, list := range taken {
		// list is sorted and disjoint: find the first span ending at or after s.lo.
		i := sort.Search(len(list), func(i int) bool { return list[i].hi >= s.lo })
		if i < len(list) && list[i].lo <= s.hi {
			return true
		}
	}
	return false
}

// TotalNetworks is how many networks the pools carve when nothing is in use.
func TotalNetworks(pools []AddressPool) (int, error) { return FreeNetworks(pools, nil) }

// ReadDaemonPools reads default-address-pools from a daemon.json. ok is false
// when the file cannot be read or sets no pools (the daemon then uses BuiltinPools).
func ReadDaemonPools(path string) (pools []AddressPool, ok bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, nil
	}
	var cfg struct {
		Pools []AddressPool `json:"default-address-pools"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if len(cfg.Pools) == 0 {
		return nil, false, nil
	}
	return cfg.Pools, true, nil
}

// DaemonJSONSnippet is the daemon.json fragment that sets pools.
func DaemonJSONSnippet(pools []AddressPool) string {
	var b strings.Builder
	b.WriteString("{\n  \"default-address-pools\": [\n")
	for i, p := range pools {
		fmt.Fprintf(&b, "    {\"base\": %q, \"size\": %d}", p.Base, p.Size)
		if i < len(pools)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// WriteDaemonJSON sets default-address-pools to FinerPools in the daemon.json
// at path, keeping every other key, after copying the existing file to a
// backup beside it. It returns the backup's path ("" when there was no file).
// It never restarts the daemon.
func WriteDaemonJSON(path string) (backup string, err error) {
	return writeDaemonJSON(path, FinerPools)
}

func writeDaemonJSON(path string, pools []AddressPool) (string, error) {
	cfg := map[string]json.RawMessage{}
	mode := os.FileMode(0o644)
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(bytes.TrimSpace(old)) > 0 {
			if err := json.Unmarshal(old, &cfg); err != nil {
				return "", fmt.Errorf("write daemon.json: existing %s is not a JSON object: %w", path, err)
			}
		}
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	case errors.Is(err, os.ErrNotExist):
		old = nil
	default:
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	raw, err := json.Marshal(pools)
	if err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	cfg["default-address-pools"] = raw
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	out = append(out, '\n')
	backup := ""
	if old != nil {
		backup = path + ".steward-backup"
		for i := 1; ; i++ {
			if _, err := os.Stat(backup); errors.Is(err, os.ErrNotExist) {
				break
			}
			backup = fmt.Sprintf("%s.steward-backup.%d", path, i)
		}
		if err := os.WriteFile(backup, old, mode); err != nil {
			return "", fmt.Errorf("write daemon.json backup: %w", err)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".daemon.json.steward-*")
	if err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("write daemon.json: %w", err)
	}
	return backup, nil
}

// RestartCommand is how a user restarts the daemon on goos (Steward never does).
func RestartCommand(goos string) string {
	switch goos {
	case "darwin", "windows":
		return "restart Docker Desktop (Docker menu → Restart); on Docker Desktop edit the pools under Settings → Docker Engine"
	default:
		return "sudo systemctl restart docker"
	}
}

// PoolReport is what the address-pool preflight found (D1).
type PoolReport struct {
	Pools         []AddressPool
	PoolsSource   string // "daemon.json (/etc/docker/daemon.json)", "daemon info" or "built-in"
	Used          []netip.Prefix
	Total         int // networks the pools carve
	Free          int // networks the daemon can still allocate
	Want          int
	Enough        bool
	Suggested     []AddressPool
	SuggestedFree int // free networks under Suggested with the same networks in use
	DaemonJSON    string
	Restart       string
}

// RenderPoolReport writes the preflight's figures and, when the run wants
// more networks than remain, what to do about it.
func RenderPoolReport(w io.Writer, r PoolReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "docker address pools (%s):", r.PoolsSource)
	for i, p := range r.Pools {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&b, "%s %s in /%ds", sep, p.Base, p.Size)
	}
	fmt.Fprintf(&b, "\n  %d networks in all, %d in use by existing networks, %d free\n", r.Total, len(r.Used), r.Free)
	if r.Want > 0 {
		fmt.Fprintf(&b, "  this run wants %d networks\n", r.Want)
	}
	if !r.Enough {
		fmt.Fprintf(&b, "\nThe run wants %d Docker networks but the daemon's address pools can give only %d more.\n", r.Want, r.Free)
		fmt.Fprintf(&b, "Carving the same ranges finer gives %d free networks. Set this in %s:\n\n", r.SuggestedFree, r.DaemonJSON)
		b.WriteString(DaemonJSONSnippet(r.Suggested))
		fmt.Fprintf(&b, "\n(other keys in the file are kept), then restart the daemon: %s\n", r.Restart)
		b.WriteString("Steward never restarts the daemon. Existing networks keep their subnets; remove unused ones with `docker network prune`.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
