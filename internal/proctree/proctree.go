// Package proctree reads and stops host process trees through /proc (Linux):
// who descends from whom, when a process started, whether it carries a
// run's marker in its environment. Workers use it to leave no agent process
// behind, sweepers to kill only what still belongs to a dead run.
package proctree

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stat is what Steward needs of /proc/PID/stat.
type Stat struct {
	PID, PPID, PGID int
	// Start is the process's start time in clock ticks since boot (field 22):
	// with the boot id it names one process for good, whatever PIDs wrap to.
	Start uint64
	State byte
}

// ReadStat parses /proc/PID/stat (under root, "" = /proc).
func ReadStat(root string, pid int) (Stat, error) {
	if root == "" {
		root = "/proc"
	}
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return Stat{}, fmt.Errorf("read process %d: malformed stat", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("read process %d: malformed stat", pid)
	}
	st := Stat{PID: pid, State: f[0][0]}
	st.PPID, _ = strconv.Atoi(f[1])
	st.PGID, _ = strconv.Atoi(f[2])
	st.Start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("read process %d: start time: %w", pid, err)
	}
	return st, nil
}

// All lists every process this process can see.
func All(root string) []Stat {
	if root == "" {
		root = "/proc"
	}
	ents, _ := os.ReadDir(root)
	var out []Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(root, pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// Descendants are the processes below pid (children, their children, …).
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, st := range All("") {
		children[st.PPID] = append(children[st.PPID], st.PID)
	}
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// KillDescendants SIGKILLs every process below pid until none is left that
// is not already dead (a process may fork while its siblings die, so it
// looks again a few times). It returns how many it signalled.
func KillDescendants(pid int) int {
	n := 0
	for round := 0; round < 20; round++ {
		live := 0
		for _, c := range Descendants(pid) {
			if st, err := ReadStat("", c); err != nil || st.State == 'Z' || st.State == 'X' {
				continue // a zombie waits for its parent, it runs nothing
			}
			live++
			if syscall.Kill(c, syscall.SIGKILL) == nil {
				n++
			}
		}
		if live == 0 {
			break
		}
	}
	return n
}

// BecomeSubreaper makes this process the one orphaned descendants are
// reparented to (PR_SET_CHILD_SUBREAPER), so an agent's grandchildren that
// leave their process group (setsid, double fork) stay below it and can be
// found by KillDescendants.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// HasEnv reports whether process pid's environment holds the entry kv
// ("NAME=value"). A process that cannot be read (gone, another user) has not.
func HasEnv(pid int, kv string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	return bytes.Contains(append([]byte{0}, b...), []byte("\x00"+kv+"\x00"))
}

// Group lists the live members of process group pgid.
func Group(pgid int) []Stat {
	var out []Stat
	for _, st := range All("") {
		if st.PGID == pgid && st.State != 'Z' && st.State != 'X' {
			out = append(out, st)
		}
	}
	return out
}

// KillGroupIfMarked SIGKILLs the members of process group pgid that still
// belong to a run: each must carry marker ("STEWARD_RUN_ID=…") in its
// environment, and when start is not 0 the group leader, if alive, must
// have started at that tick. A PID reused by a stranger is never signalled.
// It returns how many processes it killed and, when it refused, why.
func KillGroupIfMarked(pgid int, start uint64, marker string) (int, error) {
	if pgid <= 1 {
		return 0, errors.New("not a process group")
	}
	if start != 0 {
		if st, err := ReadStat("", pgid); err == nil && st.Start != start {
			return 0, fmt.Errorf("process %d started at tick %d, the run's at %d: the PID was reused", pgid, st.Start, start)
		}
	}
	killed := 0
	var refused []int
	for _, st := range Group(pgid) {
		if !HasEnv(st.PID, marker) {
			refused = append(refused, st.PID)
			continue
		}
		if syscall.Kill(st.PID, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if len(refused) > 0 {
		return killed, fmt.Errorf("processes %v of group %d do not carry %s", refused, pgid, marker)
	}
	return killed, nil
}
