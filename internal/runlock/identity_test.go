package runlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHereNamesBootAndNamespaces(t *testing.T) {
	id := Here()
	if id.BootID == "" || !strings.HasPrefix(id.MntNS, "mnt:[") || !strings.HasPrefix(id.PIDNS, "pid:[") || id.PID != os.Getpid() || id.Start == 0 {
		t.Fatalf("identity %+v", id)
	}
	if got := ParseIdentity(id.Encode()); got != id {
		t.Fatalf("round trip %+v != %+v", got, id)
	}
}

func TestJudge(t *testing.T) {
	here := Here()
	dir := t.TempDir()
	held := filepath.Join(dir, "held.lock")
	l, err := Acquire(held)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	stale := filepath.Join(dir, "stale.lock")
	os.WriteFile(stale, []byte("{}\n"), 0o644)
	missing := filepath.Join(dir, "missing.lock")
	otherNS, otherBoot := here, here
	otherNS.MntNS = "mnt:[1]"
	otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
	for _, c := range []struct {
		name    string
		lock    string
		owner   Identity
		dead    bool
		unknown string
	}{
		{"held here", held, here, false, ""},
		{"unlocked here", stale, here, true, ""},
		{"missing here", missing, here, true, ""},
		{"another mount namespace, missing here", missing, otherNS, false, "mount namespace"},
		{"another mount namespace, unlocked here", stale, otherNS, false, "mount namespace"},
		{"another boot", stale, otherBoot, false, "boot id"},
		{"owner unknown, missing here", missing, Identity{}, false, "not in this mount namespace"},
		{"owner unknown, unlocked here", stale, Identity{}, true, ""},
		{"no lock", "", here, false, "no lock"},
	} {
		dead, err := Judge(c.lock, c.owner, here)
		if c.unknown != "" {
			if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), c.unknown) || dead {
				t.Errorf("%s: dead %v err %v, want unknown (%s)", c.name, dead, err, c.unknown)
			}
			continue
		}
		if err != nil || dead != c.dead {
			t.Errorf("%s: dead %v err %v, want dead %v", c.name, dead, err, c.dead)
		}
	}
	if err := RemoveStale(held); !errors.Is(err, ErrHeld) {
		t.Fatalf("RemoveStale of a held lock: %v", err)
	}
	if err := RemoveStale(stale); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("stale lock not removed")
	}
}
