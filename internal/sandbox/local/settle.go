package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/steward-evals/steward/internal/sandbox"
)

// Every command of a local sandbox starts a session of its own (setsid), so
// that everything it forks stays findable by session id even after it left
// its process group. A process that starts yet another session (setsid, a
// daemon's double fork) and outlives its parent is re-parented to the process
// running the sandboxes, which is made a child subreaper for that purpose:
// Settle finds such orphans among its own children and kills them with all
// their descendants. Nothing a sandbox starts can leave that tree (short of a
// service outside it, such as the Docker daemon or cron: see docs/security.md).

var (
	subreaperOnce sync.Once
	subreaperErr  error

	// liveMu guards live: the session ids of commands running now (their
	// own process, reaped by os/exec, never by Settle).
	liveMu sync.Mutex
	live   = map[int]bool{}
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

func becomeSubreaper() error {
	subreaperOnce.Do(func() {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
			subreaperErr = fmt.Errorf("become a child subreaper: %w", e)
		}
	})
	return subreaperErr
}

// proc is one line of the process table.
type proc struct {
	pid, ppid, sid int
	zombie         bool
}

// procTable reads /proc. Processes that vanish while it reads are skipped.
func procTable() (map[int]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read the process table: %w", err)
	}
	out := make(map[int]proc, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session …; comm may hold spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		sid, _ := strconv.Atoi(f[3])
		out[pid] = proc{pid: pid, ppid: ppid, sid: sid, zombie: f[0] == "Z" || f[0] == "X"}
	}
	return out, nil
}

// victims lists the live processes to end: members of the given sessions,
// and every orphan re-parented to this process (a child in a session that is
// neither ours nor a running command's) with all its descendants.
func victims(tab map[int]proc, sessions map[int]bool) (kill []int, reap []int) {
	self := os.Getpid()
	own := tab[self].sid
	liveMu.Lock()
	running := make(map[int]bool, len(live))
	for k := range live {
		running[k] = true
	}
	liveMu.Unlock()
	children := map[int][]int{}
	for _, p := range tab {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	mark := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if mark[pid] || pid == self || running[pid] {
			return
		}
		mark[pid] = true
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, p := range tab {
		if sessions[p.sid] && !running[p.sid] {
			walk(p.pid)
		}
		if p.ppid == self && p.sid != own && !running[p.pid] && !running[p.sid] {
			walk(p.pid)
		}
	}
	for pid := range mark {
		p := tab[pid]
		if p.ppid == self {
			reap = append(reap, pid)
		}
		if !p.zombie {
			kill = append(kill, pid)
		}
	}
	sort.Ints(kill)
	return kill, reap
}

// settle kills what the sessions left and every escaped orphan, until a
// fresh look at the process table finds none (a forking loop needs a few
// rounds: what it forked before it died is found next time).
func settle(ctx context.Context, sessions map[int]bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for round := 0; ; round++ {
		tab, err := procTable()
		if err != nil {
			return err
		}
		kill, reap := victims(tab, sessions)
		for _, pid := range kill {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range reap {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		if len(kill) == 0 && len(reap) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return sandbox.InfraError(fmt.Errorf("processes %v are still running after SIGKILL", kill))
		}
		// Killed processes take a moment to exit before they can be reaped.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(min(round+1, 10)) * 5 * time.Millisecond):
		}
	}
}

// Settle implements sandbox.Sandbox: nothing any command of this sandbox
// started runs on.
func (b *box) Settle(ctx context.Context) error {
	b.mu.Lock()
	sessions := make(map[int]bool, len(b.sessions))
	for _, s := range b.sessions {
		sessions[s] = true
	}
	b.mu.Unlock()
	if err := settle(ctx, sessions); err != nil {
		return fmt.Errorf("settle %s: %w", b.id, err)
	}
	b.mu.Lock()
	b.sessions = b.sessions[:0]
	b.mu.Unlock()
	return nil
}

// Grader implements sandbox.Sandbox: the scorer runs in the agent's workdir
// (its processes are gone) with its files in a new directory, created only
// now, outside the sandbox.
func (b *box) Grader(ctx context.Context, files []sandbox.File) (sandbox.Sandbox, string, error) {
	dir, err := os.MkdirTemp(filepath.Dir(b.root), "steward-scorer-")
	if err != nil {
		return nil, "", sandbox.InfraError(fmt.Errorf("create the scorer's directory: %w", err))
	}
	g := &box{id: b.id + "-scorer", root: dir, work: b.work, tmp: filepath.Join(dir, "tmp"), spec: b.spec, path: b.path, pgids: b.pgids, p: b.p}
	scorerDir := filepath.Join(dir, "scorer")
	var errs []error
	for _, d := range []string{g.tmp, scorerDir} {
		errs = append(errs, os.Mkdir(d, 0o755))
	}
	for _, f := range files {
		p := f.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(scorerDir, p)
		}
		full, err := g.within(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		errs = append(errs, os.MkdirAll(filepath.Dir(full), 0o755), os.WriteFile(full, f.Data, mode))
	}
	if err := errors.Join(errs...); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("copy the scorer's files: %w", err)
	}
	return g, scorerDir, nil
}
