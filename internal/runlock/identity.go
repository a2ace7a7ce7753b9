package runlock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/proctree"
)

// Identity says where a run runs: which machine boot, which mount and pid
// namespaces, which container, which host, user and process. A lock path
// means something only in the mount namespace that made it, so liveness is
// judged from a lock only where the identities agree (see Judge).
type Identity struct {
	Host      string `json:"host,omitempty"`
	User      string `json:"user,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Start     uint64 `json:"start,omitempty"` // the process's start tick (/proc/PID/stat field 22)
	BootID    string `json:"boot_id,omitempty"`
	MntNS     string `json:"mnt_ns,omitempty"`
	PIDNS     string `json:"pid_ns,omitempty"`
	Container string `json:"container,omitempty"`
}

// Here is this process's identity.
func Here() Identity {
	id := Identity{PID: os.Getpid()}
	id.Host, _ = os.Hostname()
	if u, err := user.Current(); err == nil {
		id.User = u.Username
	} else {
		id.User = strconv.Itoa(os.Getuid())
	}
	if st, err := proctree.ReadStat("", id.PID); err == nil {
		id.Start = st.Start
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		id.BootID = strings.TrimSpace(string(b))
	}
	id.MntNS, _ = os.Readlink("/proc/self/ns/mnt")
	id.PIDNS, _ = os.Readlink("/proc/self/ns/pid")
	id.Container = containerID()
	return id
}

var containerRe = regexp.MustCompile(`(?:docker[-/]|/containers/|containerd/|crio-|libpod-)([0-9a-f]{64})`)

// containerID is the id of the container this process runs in, when its
// cgroup names one or Docker bind-mounted its /etc/hostname from the
// container's directory ("" otherwise). Other mounts are not looked at: on a
// Docker host the mount table lists every running container's mounts.
func containerID() string {
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if m := containerRe.FindStringSubmatch(string(b)); m != nil {
			return m[1]
		}
	}
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && f[4] == "/etc/hostname" {
			if m := containerRe.FindStringSubmatch(f[3]); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// Encode is the identity as one line of JSON (a label value, a file).
func (id Identity) Encode() string {
	b, _ := json.Marshal(id)
	return string(b)
}

// ParseIdentity reads Encode's output; "" or garbage is the zero identity
// (an owner whose whereabouts are unknown).
func ParseIdentity(s string) Identity {
	var id Identity
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		return Identity{}
	}
	return id
}

// Where is a short human description: user@host pid N.
func (id Identity) Where() string {
	s := id.Host
	if id.User != "" {
		s = id.User + "@" + s
	}
	if id.PID != 0 {
		s += fmt.Sprintf(" pid %d", id.PID)
	}
	if id.Container != "" {
		s += " in container " + short(id.Container)
	}
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// ErrUnknown is wrapped by Judge when a run can be proven neither alive nor dead.
var ErrUnknown = errors.New("cannot prove the run dead")

// Judge decides, from here, whether the run that holds (or held) the lock at
// lockPath and has identity owner is dead. A run is dead only when it
// provably is: its lock lives in this boot and this mount namespace and is
// not held (or is gone: only its owner or a sweeper removes it). A lock
// that exists but cannot be opened here (EACCES) is unknown, never dead. A run of
// another boot, another mount namespace, or of unknown whereabouts whose lock
// file is missing here cannot be judged: Judge returns an error wrapping
// ErrUnknown that says why, and the caller leaves the run alone.
func Judge(lockPath string, owner, here Identity) (dead bool, err error) {
	if lockPath == "" {
		return false, fmt.Errorf("%w: it names no lock", ErrUnknown)
	}
	if owner.BootID == "" || owner.MntNS == "" {
		// An owner recorded before identities were: its lock path is
		// trusted only when the file is here and unlocked.
		if _, err := os.Stat(lockPath); err != nil {
			return false, fmt.Errorf("%w: its lock %s is not in this mount namespace and its owner's whereabouts were not recorded", ErrUnknown, lockPath)
		}
		return judgeLock(lockPath)
	}
	if owner.BootID != here.BootID {
		return false, fmt.Errorf("%w: it ran under boot id %s (another machine, or before a reboot), this is %s", ErrUnknown, short(owner.BootID), short(here.BootID))
	}
	if owner.MntNS != here.MntNS {
		where := "another mount namespace"
		if owner.Container != "" && owner.Container != here.Container {
			where = "container " + short(owner.Container)
		}
		return false, fmt.Errorf("%w: it runs in %s (%s, this process is in %s), where its lock %s may exist although it does not here", ErrUnknown, where, owner.MntNS, here.MntNS, lockPath)
	}
	return judgeLock(lockPath)
}

// judgeLock: a lock that is missing or not held is a dead run's; one this
// process cannot open or probe (another user's 0700 directory) proves
// nothing, and its run is unknown.
func judgeLock(lockPath string) (dead bool, err error) {
	held, err := probe(lockPath)
	if err != nil {
		return false, fmt.Errorf("%w: its lock %s cannot be read from here (%v): it may be another user's live run", ErrUnknown, lockPath, err)
	}
	return !held, nil
}

// RemoveStale removes the lock file of a dead run: it takes the lock itself
// first, so a lock some process still holds is never removed.
func RemoveStale(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove stale lock: %w", err)
	}
	defer f.Close()
	if err := flockNB(f); err != nil {
		return fmt.Errorf("remove stale lock %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale lock: %w", err)
	}
	return nil
}

// Liveness judges runs from this process (Here): what a sandbox provider is
// given to sweep with (sandbox/docker.Liveness), so providers know nothing
// of locks.
type Liveness struct{}

// Owner is this process's identity, encoded.
func (Liveness) Owner() string { return Here().Encode() }

// Judge is Judge from here, on an owner as Owner encoded it.
func (Liveness) Judge(lockPath, owner string) (bool, error) {
	return Judge(lockPath, ParseIdentity(owner), Here())
}
