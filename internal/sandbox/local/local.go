// Package local is the `local` sandbox provider: each sandbox is a temporary
// workdir on the host and its commands are host processes in their own
// process group. It is exclusive by default (C3): tasks run one sandbox at a
// time unless they declare `exclusive: false`.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steward-evals/steward/internal/proctree"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Options configure the provider.
type Options struct {
	// BaseDir holds the sandboxes' workdirs (default os.TempDir()).
	BaseDir string
	// PATH for sandbox commands (default the host's PATH).
	Path string
	// pgidDir, when set, holds a file per running command's process group (see ForRun).
	pgidDir string
}

// Provider makes local sandboxes.
type Provider struct {
	opts Options
	seq  atomic.Int64
	// Set by ForRun: the run's directory, id (the marker every command
	// carries) and the content of the directory's lock file.
	runDir, runID string
	lock, owner   string
	boxes         boxes
}

// New returns a local provider.
func New(opts Options) *Provider {
	if opts.BaseDir == "" {
		opts.BaseDir = os.TempDir()
	}
	if opts.Path == "" {
		opts.Path = "/usr/local/bin:/usr/bin:/bin"
	}
	return &Provider{opts: opts}
}

// Name is "local".
func (p *Provider) Name() string { return "local" }

// Capacity: one sandbox at a time for exclusive tasks (a correctness limit,
// enforced by the scheduler's exclusivity gate, which --max-concurrency
// cannot lift); tasks that declare exclusive: false are not bounded by the provider.
func (p *Provider) Capacity(ctx context.Context, specs []sandbox.Spec) (sandbox.Capacity, error) {
	return sandbox.Capacity{Limit: 1, Source: "local default", Exclusive: true}, nil
}

// Prepare has nothing to build.
func (p *Provider) Prepare(ctx context.Context, specs []*sandbox.Spec) error { return nil }

// Gateway: sandboxes are host processes and dial loopback.
func (p *Provider) Gateway(ctx context.Context) (sandbox.GatewayAddr, error) {
	return sandbox.GatewayAddr{Listen: "127.0.0.1:0", Host: "127.0.0.1"}, nil
}

// Finalize removes the sandboxes this provider made that are still there
// (attempts cut short) and, when no other process of the run has sandboxes
// left, the run's directory.
func (p *Provider) Finalize(ctx context.Context) error {
	var errs []error
	for _, b := range p.boxes.all() {
		if err := b.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	p.removeRunDirIfEmpty()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("finalize local provider: %w", err)
	}
	return nil
}

// Create makes a workdir.
func (p *Provider) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := p.ensureRunDir(); err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("create local sandbox: %w", err))
	}
	if err := becomeSubreaper(); err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("create local sandbox: %w", err))
	}
	dir, err := os.MkdirTemp(p.opts.BaseDir, "steward-"+safe(spec.Task)+"-")
	if err != nil {
		return nil, sandbox.InfraError(fmt.Errorf("create local sandbox: %w", err))
	}
	work := filepath.Join(dir, "work")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{work, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, sandbox.InfraError(fmt.Errorf("create local sandbox: %w", err))
		}
	}
	b := &box{id: fmt.Sprintf("local-%d", p.seq.Add(1)), root: dir, work: work, tmp: tmp, spec: spec, path: p.opts.Path, pgids: p.opts.pgidDir, p: p}
	p.boxes.add(b)
	return b, nil
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

type box struct {
	id, root, work, tmp, path string
	pgids                     string
	spec                      sandbox.Spec
	p                         *Provider

	mu sync.Mutex
	// sessions are the session ids of the commands this sandbox ran since it last settled.
	sessions []int
}

func (b *box) ID() string      { return b.id }
func (b *box) Workdir() string { return b.work }

// StewardDir implements sandbox.Sandbox: a directory beside the workdir
// under the sandbox's own (CopyIn makes it), for the host user.
func (b *box) StewardDir() string { return filepath.Join(b.root, "steward") }

// within resolves a sandbox path and refuses escapes from the sandbox root.
func (b *box) within(p string) (string, error) {
	var full string
	if filepath.IsAbs(p) {
		full = filepath.Clean(p)
	} else {
		full = filepath.Join(b.work, p)
	}
	if full != b.root && !strings.HasPrefix(full, b.root+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is outside the sandbox", p)
	}
	return full, nil
}

func (b *box) CopyIn(ctx context.Context, files []sandbox.File) error {
	for _, f := range files {
		full, err := b.within(f.Path)
		if err != nil {
			return fmt.Errorf("copy in: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("copy in %s: %w", f.Path, err)
		}
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(full, f.Data, mode); err != nil {
			return fmt.Errorf("copy in %s: %w", f.Path, err)
		}
	}
	return nil
}

// MaxCopyOut bounds what CopyOut reads from one file.
const MaxCopyOut = 64 << 20

// CopyOut reads one regular file. The sandbox's commands run as the host
// user, so what they leave is untrusted: a symlink is refused (whatever it
// points at), and no path, through a symlinked directory or otherwise, may
// lead outside the sandbox's directory (os.Root).
func (b *box) CopyOut(ctx context.Context, p string) ([]byte, error) {
	full, err := b.within(p)
	if err != nil {
		return nil, fmt.Errorf("copy out: %w", err)
	}
	rel, err := filepath.Rel(b.root, full)
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	root, err := os.OpenRoot(b.root)
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	defer root.Close()
	st, err := root.Lstat(rel)
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("copy out %s: not a regular file (%s)", p, st.Mode().Type())
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxCopyOut+1))
	if err != nil {
		return nil, fmt.Errorf("copy out %s: %w", p, err)
	}
	if len(data) > MaxCopyOut {
		return nil, fmt.Errorf("copy out %s: more than the %d-byte limit", p, MaxCopyOut)
	}
	return data, nil
}

// capWriter keeps the first max bytes.
type capWriter struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if room < len(p) {
		w.truncated = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}

func (b *box) Exec(ctx context.Context, spec sandbox.ExecSpec) (sandbox.ExecResult, error) {
	max := spec.MaxOutput
	if max <= 0 {
		max = 1 << 20
	}
	outer := ctx
	if spec.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	cmd := exec.Command("/bin/sh", "-c", spec.Shell)
	cmd.Dir = b.work
	// A clean environment: nothing of the host's (no API keys) but what the task and Steward set.
	env := map[string]string{"PATH": b.path, "HOME": b.work, "TMPDIR": b.tmp, "LANG": "C.UTF-8"}
	for k, v := range b.spec.Env {
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	if b.p.runID != "" {
		// The marker a sweeper checks before it kills a process group.
		env["STEWARD_RUN_ID"] = b.p.runID
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, stderr := &capWriter{max: max}, &capWriter{max: max}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if spec.Stdin != nil {
		cmd.Stdin = bytes.NewReader(spec.Stdin)
	}
	// Setsid: a session (and process group) of its own, so a timeout kills the
	// whole group and Settle finds whatever left the group. Pdeathsig: if the
	// process that runs the sandbox (a worker) dies, the command dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	liveMu.Lock()
	err := cmd.Start()
	if err == nil {
		live[cmd.Process.Pid] = true
	}
	liveMu.Unlock()
	if err != nil {
		return sandbox.ExecResult{}, sandbox.InfraError(fmt.Errorf("exec in %s: %w", b.id, err))
	}
	b.mu.Lock()
	b.sessions = append(b.sessions, cmd.Process.Pid)
	b.mu.Unlock()
	if b.pgids != "" {
		// The group leader's start time makes the note name this group
		// only, whatever process later gets the same PID.
		var start []byte
		if st, err := proctree.ReadStat("", cmd.Process.Pid); err == nil {
			start = []byte(strconv.FormatUint(st.Start, 10))
		}
		mark := filepath.Join(b.pgids, fmt.Sprint(cmd.Process.Pid))
		_ = os.WriteFile(mark, start, 0o644)
		defer os.Remove(mark)
	}
	done := make(chan error, 1)
	go func() {
		if testHookReap != nil {
			testHookReap()
		}
		err := cmd.Wait()
		liveMu.Lock()
		delete(live, cmd.Process.Pid)
		liveMu.Unlock()
		done <- err
	}()
	if testHookStarted != nil {
		testHookStarted(ctx, cmd.Process.Pid)
	}
	exited, termed := false, false
	select {
	case err = <-done:
		exited = true
	case <-ctx.Done():
		if spec.Grace > 0 && outer.Err() == nil && !hasExited(cmd.Process.Pid) {
			// The deadline: SIGTERM to the group, Grace to finish, then SIGKILL.
			termed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			grace := time.NewTimer(spec.Grace)
			select {
			case err = <-done:
				grace.Stop()
				break
			case <-grace.C:
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				err = <-done
			case <-outer.Done():
				grace.Stop()
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				err = <-done
			}
			break
		}
		// The deadline passed on this process's clock, which stops when
		// the process is stopped (SIGSTOP) or starved: the waiting
		// goroutine may not have run yet although the command ended long
		// before. The kernel knows: a command that has already exited
		// ended by itself, it was only noticed late, which is not a
		// timeout.
		if hasExited(cmd.Process.Pid) {
			exited = true
		} else {
			// Kill the whole process group: an agent's children die with it.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if testHookDecided != nil {
			testHookDecided()
		}
		err = <-done
	}
	// Whatever the outcome, nothing of the group, the session or what escaped
	// them outlives the command.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = settle(context.WithoutCancel(ctx), map[int]bool{cmd.Process.Pid: true})
	res := sandbox.ExecResult{
		Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(),
		Truncated: stdout.truncated || stderr.truncated, Duration: time.Since(start),
	}
	if termed && outer.Err() == nil {
		// Stopped at its deadline (it ended within the grace or was killed
		// after it): a timeout, with whatever it printed.
		res.TimedOut = true
		res.ExitCode = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.ExitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.ExitCode = 128 + int(ws.Signal())
			}
		} else if err == nil {
			res.ExitCode = 0
		}
		return res, nil
	}
	if termed {
		res.ExitCode = -1
		return res, outer.Err() // the run was cancelled during the grace
	}
	if ctx.Err() != nil && !exited {
		res.ExitCode = -1
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && spec.Timeout > 0 {
			res.TimedOut = true
			return res, nil
		}
		return res, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return res, sandbox.InfraError(fmt.Errorf("exec in %s: %w", b.id, err))
	}
	return res, nil
}

func (b *box) Reset(ctx context.Context) error {
	if err := b.Settle(ctx); err != nil {
		return err
	}
	for _, d := range []string{b.work, b.tmp} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("reset %s: %w", b.id, err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				return fmt.Errorf("reset %s: %w", b.id, err)
			}
		}
	}
	return nil
}

func (b *box) Close(ctx context.Context) error {
	b.p.boxes.remove(b)
	if err := os.RemoveAll(b.root); err != nil {
		return fmt.Errorf("remove %s: %w", b.id, err)
	}
	return nil
}

var _ io.Writer = (*capWriter)(nil)

// hasExited asks the kernel, without reaping it, whether the child pid has
// exited (or was reaped already by the goroutine that waits for it).
func hasExited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return true // reaped: the waiting goroutine has it
	}
	// The kernel sets si_signo to SIGCHLD only when it found the child
	// exited; with nothing to report (WNOHANG) it leaves it zero.
	return err == nil && info.Signo == int32(unix.SIGCHLD)
}

// Test hooks, set only by tests (to simulate a worker that notices late,
// e.g. because it was stopped): testHookStarted runs once a command has
// started; testHookReap runs in the waiting goroutine before it waits;
// testHookDecided runs once a passed deadline has been judged (killed or
// found ended), before the command is reaped.
var (
	testHookStarted func(ctx context.Context, pid int)
	testHookReap    func()
	testHookDecided func()
)
