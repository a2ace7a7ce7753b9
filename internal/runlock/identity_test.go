package runlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// TestJudgeUnopenableLockIsUnknown: a lock file this process cannot open
// (EACCES: another user's 0700 directory, played by the opener) is neither
// alive nor dead: Judge says unknown, whatever the owner, and Alive does
// not call it gone. A lock that is really missing is still dead.
func TestJudgeUnopenableLockIsUnknown(t *testing.T) {
	here := Here()
	p := filepath.Join(t.TempDir(), "run.lock")
	l, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	defer func(o func(string) (*os.File, error)) { openLock = o }(openLock)
	openLock = func(name string) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	for _, owner := range []Identity{here, {}} {
		dead, err := Judge(p, owner, here)
		if dead || !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("owner %+v: dead %v, err %v; want unknown (permission denied)", owner, dead, err)
		}
	}
	if !Alive(p) {
		t.Error("Alive calls a lock it cannot open gone")
	}
	openLock = func(name string) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOENT}
	}
	if dead, err := Judge(p, here, here); !dead || err != nil {
		t.Errorf("a missing lock: dead %v err %v, want dead", dead, err)
	}
}

// TestHelperJudge is run as a subprocess (as another user): it judges the
// lock RUNLOCK_HELPER_JUDGE names, owned by the identity in
// RUNLOCK_HELPER_OWNER, and prints the verdict.
func TestHelperJudge(t *testing.T) {
	p := os.Getenv("RUNLOCK_HELPER_JUDGE")
	if p == "" {
		t.Skip("helper process only")
	}
	dead, err := Judge(p, ParseIdentity(os.Getenv("RUNLOCK_HELPER_OWNER")), Here())
	fmt.Printf("dead=%v unknown=%v err=%v\n", dead, errors.Is(err, ErrUnknown), err)
	os.Exit(0)
}

// TestJudgeAnotherUsersLockIsUnknown is the real thing: a run's lock in its
// user's 0700 directory, judged by another user (uid 65534, a copy of this
// test binary), whose open gets EACCES from the kernel. Both a held lock
// (a live run) and one nobody holds are unknown to that user: it cannot
// tell them apart, so it must not call either dead. It needs root to start a
// process as another user.
func TestJudgeAnotherUsersLockIsUnknown(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the judge as another user (TestJudgeUnopenableLockIsUnknown covers the logic)")
	}
	private := t.TempDir() // 0700, root's
	held := filepath.Join(private, "held.lock")
	l, err := Acquire(held)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	unheld := filepath.Join(private, "unheld.lock")
	if err := os.WriteFile(unheld, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary the other user may execute.
	pub, err := os.MkdirTemp("", "runlock-judge-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(pub)
	if err := os.Chmod(pub, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(pub, "runlock.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{held, unheld} {
		cmd := exec.Command(bin, "-test.run=^TestHelperJudge$")
		cmd.Dir = pub
		cmd.Env = []string{"RUNLOCK_HELPER_JUDGE=" + p, "RUNLOCK_HELPER_OWNER=" + Here().Encode(), "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("judge as uid 65534: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "dead=false unknown=true") || !strings.Contains(string(out), "permission denied") {
			t.Errorf("%s judged by another user: %s", filepath.Base(p), out)
		}
	}
	if !Alive(held) {
		t.Fatal("the live run's lock is not alive for its own user")
	}
}
