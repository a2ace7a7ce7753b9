package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/steward-evals/steward/internal/sandbox"
)

// ScorerDir is where Grader puts the scorer's files in the grading container.
const ScorerDir = BinDir + "/scorer"

// runState is where a sandbox's container is in its life.
type runState int

const (
	running runState = iota
	frozen           // settled: paused until Grader or Reset quiesces it
	stopped          // killed as a whole: not reused
)

// Settle freezes every process of the container at once (the cgroup
// freezer, applied from outside: nothing in the sandbox can resist or notice
// it), so that the answer and the workdir are read while nothing changes
// them. Grader and Reset then end every process (quiesce); Close removes it
// all. A settled container runs no command until Reset.
func (s *Sandbox) Settle(ctx context.Context) error {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state != running {
		return nil
	}
	if err := s.p.cli.ContainerPause(ctx, s.id); err != nil && !cerrdefs.IsConflict(err) {
		// No freezer (rootless Docker on cgroup v1): kill from inside and
		// check from outside instead, keeping the files (no stop).
		if ctx.Err() != nil {
			return sandbox.InfraError(fmt.Errorf("freeze sandbox %s: %w", s.name, err))
		}
		if kerr := s.killInside(ctx); kerr != nil {
			return sandbox.InfraError(fmt.Errorf("freeze sandbox %s: %v; then: %w", s.name, err, kerr))
		}
		return nil
	}
	ins, err := s.p.cli.ContainerInspect(ctx, s.id)
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("freeze sandbox %s: %w", s.name, err))
	}
	if ins.State != nil && ins.State.Running && !ins.State.Paused {
		return sandbox.InfraError(fmt.Errorf("freeze sandbox %s: still running after pause", s.name))
	}
	s.mu.Lock()
	s.state = frozen
	s.mu.Unlock()
	return nil
}

// quiesce ends every process in the container but its init and idle shell
// (Steward's own), keeping the container and its files (the task's setup
// stays for the next attempt of a reused sandbox). It kills from inside
// (killAllScript) and checks from outside, with the daemon's process list,
// which nothing in the container can fake. When anything else is left (the
// agent replaced the shell that kills, or keeps forking) the container is
// stopped, which kills everything: the kernel ends a PID namespace with its
// init.
func (s *Sandbox) quiesce(ctx context.Context) error {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state == stopped {
		return nil
	}
	if state == frozen {
		if err := s.p.cli.ContainerUnpause(ctx, s.id); err != nil && !cerrdefs.IsConflict(err) {
			return sandbox.InfraError(fmt.Errorf("unfreeze sandbox %s: %w", s.name, err))
		}
		s.mu.Lock()
		s.state = running
		s.mu.Unlock()
	}
	if s.killInside(ctx) == nil {
		return nil
	}
	return s.stop(ctx)
}

// Resume implements sandbox.Resumer: every process left in the settled
// sandbox ends (quiesce) and commands run in it again, its files kept (the
// agent's writable layer and its tmpfs workdir). When something survived
// the kill the container had to be stopped, which empties its tmpfs paths:
// that is refused rather than run a verifier on what is left.
func (s *Sandbox) Resume(ctx context.Context) error {
	if err := s.quiesce(ctx); err != nil {
		return fmt.Errorf("resume sandbox: %w", err)
	}
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state == stopped {
		return fmt.Errorf("resume sandbox %s: a process the agent left survived the kill, so the sandbox was stopped and what it held in its tmpfs paths is gone: nothing to verify in it", s.name)
	}
	return nil
}

var _ sandbox.Resumer = (*Sandbox)(nil)

// killInside kills every process but init and the idle shell from inside,
// and checks the daemon's process list until none is left (a few rounds).
// A sandbox at its PID limit may not start the kill at all: runc's exec
// needs a thread the full pids cgroup refuses (on some kernels every time),
// so after a round that left processes the limit is raised by killSlots
// for the rounds that follow and set back after them.
func (s *Sandbox) killInside(ctx context.Context) error {
	left := 0
	_, _, pids := limitsOr(s.spec.CPUs, s.spec.Memory, s.spec.PIDs)
	raised := false
	for try := 0; try < 3; try++ {
		_, _ = s.run(ctx, quiesceScript)
		n, err := s.strays(ctx)
		if err == nil && n == 0 {
			if raised {
				// Back to its limit; a sandbox that cannot be is not kept.
				return s.setPIDs(context.WithoutCancel(ctx), pids)
			}
			return nil
		}
		left = n
		if ctx.Err() != nil {
			break
		}
		if !raised {
			raised = s.setPIDs(ctx, pids+killSlots) == nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
	if raised {
		_ = s.setPIDs(context.WithoutCancel(ctx), pids) // it is stopped next
	}
	return fmt.Errorf("%d processes left in sandbox %s after the kill", left, s.name)
}

// killSlots is how many processes above its PID limit a sandbox is given
// while the kill runs in it (the kill's shell, its ps and its kills).
const killSlots = 8

// setPIDs sets the sandbox's PID limit.
func (s *Sandbox) setPIDs(ctx context.Context, n int64) error {
	_, err := s.p.cli.ContainerUpdate(ctx, s.id, container.UpdateConfig{Resources: container.Resources{PidsLimit: &n}})
	return err
}

// quiesceScript is what quiesce runs inside; tests replace it to play an
// agent that replaced the shell it runs in.
var quiesceScript = killAllScript

// strays counts the container's processes other than its init and the idle
// shell (init's oldest child), from the daemon's view (ps on the host).
func (s *Sandbox) strays(ctx context.Context) (int, error) {
	ins, err := s.p.cli.ContainerInspect(ctx, s.id)
	if err != nil || ins.State == nil || !ins.State.Running {
		return 0, fmt.Errorf("inspect sandbox %s: %v", s.name, err)
	}
	top, err := s.p.cli.ContainerTop(ctx, s.id, []string{"-eo", "pid,ppid"})
	if err != nil {
		return 0, err
	}
	initPID := strconv.Itoa(ins.State.Pid)
	pidCol, ppidCol := -1, -1
	for i, t := range top.Titles {
		switch strings.ToUpper(t) {
		case "PID":
			pidCol = i
		case "PPID":
			ppidCol = i
		}
	}
	if pidCol < 0 || ppidCol < 0 {
		return 0, fmt.Errorf("unexpected process list titles %v", top.Titles)
	}
	children := 0
	others := 0
	for _, p := range top.Processes {
		if len(p) <= pidCol || len(p) <= ppidCol {
			continue
		}
		switch {
		case p[pidCol] == initPID:
		case p[ppidCol] == initPID && children == 0:
			children++ // the idle shell; a second child of init is a stray
		default:
			others++
		}
	}
	return others, nil
}

// stop kills the container's init, which ends its PID namespace: the kernel
// kills every process in it, whatever the agent did (a background job,
// setsid, a replaced /bin/sh, a process that ignores signals). A frozen
// container is killed as it is. Files on its writable layer stay; tmpfs
// mounts (disk.go) are emptied.
func (s *Sandbox) stop(ctx context.Context) error {
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	if state == stopped {
		return nil
	}
	// Register the wait before the kill so that the stop cannot be missed.
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	okc, errc := s.p.cli.ContainerWait(waitCtx, s.id, container.WaitConditionNotRunning)
	if err := s.p.cli.ContainerKill(ctx, s.id, "KILL"); err != nil && !cerrdefs.IsConflict(err) {
		return sandbox.InfraError(fmt.Errorf("stop sandbox %s: %w", s.name, err))
	}
	select {
	case <-okc:
	case err := <-errc:
		return sandbox.InfraError(fmt.Errorf("stop sandbox %s: %w", s.name, err))
	case <-ctx.Done():
		return sandbox.InfraError(fmt.Errorf("stop sandbox %s: %w", s.name, ctx.Err()))
	}
	ins, err := s.p.cli.ContainerInspect(ctx, s.id)
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("stop sandbox %s: %w", s.name, err))
	}
	if ins.State != nil && (ins.State.Running || ins.State.Paused || ins.State.Restarting) {
		return sandbox.InfraError(fmt.Errorf("stop sandbox %s: still %s after SIGKILL", s.name, ins.State.Status))
	}
	s.mu.Lock()
	s.state = stopped
	s.mu.Unlock()
	return nil
}

// Grader makes the scorer's sandbox: a fresh container of the same image and
// limits, with this (settled) sandbox's workdir copied in through the archive
// API and the scorer's files under ScorerDir. Nothing the agent changed
// outside its workdir (its /bin/sh, a scorer script it rewrote elsewhere, a
// process it left) exists there.
func (s *Sandbox) Grader(ctx context.Context, files []sandbox.File) (sandbox.Sandbox, string, error) {
	if err := s.Settle(ctx); err != nil {
		return nil, "", err
	}
	gsb, err := s.p.create(ctx, s.spec, false)
	if err != nil {
		return nil, "", fmt.Errorf("create the scorer's sandbox: %w", err)
	}
	g := gsb.(*Sandbox)
	fail := func(err error) (sandbox.Sandbox, string, error) {
		_ = g.Close(ctx)
		return nil, "", err
	}
	if err := s.copyWorkdir(ctx, g); err != nil {
		return fail(err)
	}
	// The copy is taken: now every process of the agent's sandbox ends
	// before the scorer starts.
	if err := s.quiesce(ctx); err != nil {
		return fail(err)
	}
	placed := make([]sandbox.File, len(files))
	for i, f := range files {
		placed[i] = f
		if !path.IsAbs(f.Path) {
			placed[i].Path = path.Join(ScorerDir, f.Path)
		}
	}
	if err := g.CopyIn(ctx, placed); err != nil {
		return fail(fmt.Errorf("copy the scorer's files: %w", err))
	}
	return g, ScorerDir, nil
}

// copyWorkdir streams this sandbox's workdir into g's, container to
// container, without holding it in memory.
func (s *Sandbox) copyWorkdir(ctx context.Context, g *Sandbox) error {
	rc, _, err := s.p.cli.CopyFromContainer(ctx, s.id, s.workdir+"/.")
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil // the agent removed its workdir: the scorer gets the image's
		}
		return sandbox.InfraError(fmt.Errorf("copy the workdir out of sandbox %s: %w", s.name, err))
	}
	defer rc.Close()
	// The archive holds the workdir's contents ("./…"); it lands in g's
	// workdir, without the links that lead out of it (confineLinks), and
	// never more of it than the disk quota lets a sandbox hold: a sparse
	// file's logical size counts (issue 23 item 3).
	pr, pw := io.Pipe()
	confined := make(chan error, 1)
	go func() {
		_, err := confineLinks(rc, pw, s.workdir, s.disk)
		pw.CloseWithError(err)
		confined <- err
	}()
	err = s.p.cli.CopyToContainer(ctx, g.id, g.workdir, pr, container.CopyToContainerOptions{})
	pr.Close()
	rc.Close() // the daemon stops streaming what is left
	cerr := <-confined
	if errors.Is(cerr, sandbox.ErrAgentWorkdir) {
		// What the agent left is why: its outcome, never a retry.
		return cerr
	}
	if err != nil {
		return sandbox.InfraError(fmt.Errorf("copy the workdir into the scorer's sandbox %s: %w", g.name, err))
	}
	if cerr != nil {
		return sandbox.InfraError(fmt.Errorf("copy the workdir into the scorer's sandbox %s: %w", g.name, cerr))
	}
	return nil
}
