package local

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steward-evals/steward/internal/sandbox"
)

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	p := New(Options{BaseDir: t.TempDir()})
	t.Setenv("OPENAI_API_KEY", "sk-real-secret")
	b, err := p.Create(ctx, sandbox.Spec{Task: "t", Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if err := b.CopyIn(ctx, []sandbox.File{{Path: "in/x.txt", Data: []byte("hello")}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `cat in/x.txt; echo " $A $B"; env > env.txt; echo err >&2; exit 3`, Env: map[string]string{"B": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello 1 2\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 {
		t.Fatalf("res %+v", res)
	}
	env, err := b.CopyOut(ctx, "env.txt")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "sk-real-secret") {
		t.Fatal("host API key leaked into the sandbox environment")
	}
	if err := b.CopyIn(ctx, []sandbox.File{{Path: "../../../etc/x", Data: nil}}); err == nil {
		t.Fatal("escape allowed")
	}
	if err := b.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CopyOut(ctx, "env.txt"); err == nil {
		t.Fatal("reset left files")
	}
	root := b.(*box).root
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatal("close left the workdir")
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	ctx := context.Background()
	p := New(Options{BaseDir: t.TempDir()})
	b, _ := p.Create(ctx, sandbox.Spec{Task: "t"})
	defer b.Close(ctx)
	// A child that would outlive a naive kill holds the write end of a FIFO:
	// the read end sees end-of-file only once every holder is dead.
	held := filepath.Join(t.TempDir(), "held")
	if err := syscall.Mkfifo(held, 0o600); err != nil {
		t.Fatal(err)
	}
	// The timeout fires only after the child said it holds the FIFO: the
	// open waits for its writer, the read for its first line.
	var f *os.File
	testHookStarted = func(context.Context, int) {
		var err error
		if f, err = os.Open(held); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 3)
		if _, err := io.ReadFull(f, line); err != nil || string(line) != "up\n" {
			t.Errorf("child's first line %q: %v", line, err)
		}
	}
	defer func() { testHookStarted = nil }()
	res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `(echo up; sleep 30) >` + held + ` 2>&1 & sleep 30`, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("not timed out: %+v", res)
	}
	// Exec has returned: one read that does not wait tells whether a writer lives.
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		if rerr = syscall.SetNonblock(int(fd), true); rerr == nil {
			n, rerr = syscall.Read(int(fd), make([]byte, 16))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 || rerr != nil {
		t.Fatalf("a child of the timed-out command survived (read %d bytes, %v)", n, rerr)
	}
}

func TestOutputCap(t *testing.T) {
	ctx := context.Background()
	b, _ := New(Options{BaseDir: t.TempDir()}).Create(ctx, sandbox.Spec{Task: "t"})
	defer b.Close(ctx)
	res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `yes | head -c 5000`, MaxOutput: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 100 || !res.Truncated {
		t.Fatalf("len %d truncated %v", len(res.Stdout), res.Truncated)
	}
}

// A command that ended within its timeout but was noticed only after it
// (the worker was stopped or starved) did not time out: its own clock says so.
func TestExecNoticedLateIsNotATimeout(t *testing.T) {
	testHookStarted = func(ctx context.Context, _ int) { <-ctx.Done() }
	defer func() { testHookStarted = nil }()
	p := New(Options{BaseDir: t.TempDir()})
	sb, err := p.Create(context.Background(), sandbox.Spec{Task: "late"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Exec(context.Background(), sandbox.ExecSpec{Shell: "echo done", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.ExitCode != 0 || string(res.Stdout) != "done\n" {
		t.Fatalf("a command that ended in time, noticed late: %+v", res)
	}
}

// A worker stopped (SIGSTOP) while its command ends resumes with both the
// deadline passed and the command's exit not yet reaped: which its select
// sees first is a race. The command ended long before its deadline, so it
// did not time out. The race is made certain: the waiting goroutine is held
// until the deadline has been judged, and the deadline is judged only once
// the kernel has the command's exit.
func TestExecEndedBeforeAFrozenDeadlineIsNotATimeout(t *testing.T) {
	decided := make(chan struct{})
	testHookReap = func() { <-decided }
	testHookDecided = func() { close(decided) }
	testHookStarted = func(ctx context.Context, pid int) {
		// The command has exited (a zombie, not reaped: WNOWAIT) ...
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
			t.Errorf("waitid: %v", err)
		}
		// ... and then the deadline passes.
		<-ctx.Done()
	}
	defer func() { testHookStarted, testHookReap, testHookDecided = nil, nil, nil }()
	p := New(Options{BaseDir: t.TempDir()})
	sb, err := p.Create(context.Background(), sandbox.Spec{Task: "frozen"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	for _, tc := range []struct {
		shell string
		code  int
	}{{"echo done", 0}, {"echo done; exit 3", 3}} {
		res, err := sb.Exec(context.Background(), sandbox.ExecSpec{Shell: tc.shell, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.TimedOut || res.ExitCode != tc.code || string(res.Stdout) != "done\n" {
			t.Fatalf("%q: a command that ended before its deadline, noticed after it: %+v", tc.shell, res)
		}
		decided = make(chan struct{})
	}
}

// When a command ends, nothing it started runs on: not a process that left
// its group for a session of its own (setsid), not a daemon that double
// forked away from its parent, not a job in the command's session.
func TestSettleKillsEscapedProcesses(t *testing.T) {
	ctx := context.Background()
	b, err := New(Options{BaseDir: t.TempDir()}).Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	res, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `
setsid sh -c 'echo $$ > p1; exec sleep 1000' >/dev/null 2>&1 </dev/null &
sh -c 'setsid sh -c "echo \$\$ > p2; exec sleep 1001" >/dev/null 2>&1 </dev/null & exit'
(set -m; sh -c 'echo $$ > p3; exec sleep 1002' >/dev/null 2>&1 </dev/null &)
while [ ! -s p1 ] || [ ! -s p2 ] || [ ! -s p3 ]; do sleep 0.01; done; echo ok`, Timeout: time.Minute})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("exec: %v %+v", err, res)
	}
	for _, f := range []string{"p1", "p2", "p3"} {
		data, err := b.CopyOut(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		pid := strings.TrimSpace(string(data))
		if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
			_ = exec.Command("kill", "-9", pid).Run()
			t.Errorf("process %s (%s) outlived its command: %s", pid, f, st)
		}
	}
	if err := b.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// A scorer runs in the box's grader: it sees the agent's workdir and its own
// files, carries the run's marker (so a sweep can find it) and closes cleanly.
func TestGraderExecCarriesRunMarker(t *testing.T) {
	ctx := context.Background()
	p, _, err := ForRun(t.TempDir(), "run-grader", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `echo answer > out.txt`}); err != nil {
		t.Fatal(err)
	}
	g, dir, err := b.Grader(ctx, []sandbox.File{{Path: "check.sh", Data: []byte("cat out.txt\n")}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Exec(ctx, sandbox.ExecSpec{Shell: `sh "$D/check.sh"; echo "$STEWARD_RUN_ID"; setsid sh -c 'echo $$ > "$D/../left"; exec sleep 300' >/dev/null 2>&1 & while [ ! -s "$D/../left" ]; do sleep 0.01; done`, Env: map[string]string{"D": dir}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "answer\nrun-grader\n" {
		t.Fatalf("grader output %q", res.Stdout)
	}
	pid, err := os.ReadFile(filepath.Join(dir, "..", "left"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// What the scorer left (it holds the targets in its environment) is gone
	// with its box: never seen by the next attempt of a reused sandbox.
	if st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat"); err == nil {
		if f := strings.Fields(string(st)); len(f) > 2 && f[2] != "Z" {
			t.Fatalf("the scorer's background process %s outlives its box: %s", strings.TrimSpace(string(pid)), st)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the grader's directory outlives Close: %v", err)
	}
}

// Before a scorer runs in a local sandbox's workdir, the links that lead
// out of it are gone (a scorer that reads one would read its own
// environment or files), while links inside it and a venv's link to the
// system's interpreter stay.
func TestGraderRemovesEscapingLinks(t *testing.T) {
	ctx := context.Background()
	p := New(Options{BaseDir: t.TempDir()})
	b, err := p.Create(ctx, sandbox.Spec{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := b.Exec(ctx, sandbox.ExecSpec{Shell: `mkdir -p out venv/bin && echo 42 > out/result &&
ln -s ../out/result out/r && ln -s missing dangling && ln -s /usr/bin/env venv/bin/python &&
ln -s /proc/self/environ env && ln -s .. up && ln -s "$PWD/out/result" abs && ln -s /usr/../proc/self/environ usrdots && ln -s /etc/passwd etc`}); err != nil {
		t.Fatal(err)
	}
	g, _, err := b.Grader(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	work := b.(*box).work
	for name, want := range map[string]bool{"out/r": true, "dangling": true, "venv/bin/python": true,
		"env": false, "up": false, "abs": false, "usrdots": false, "etc": false} {
		_, err := os.Lstat(work + "/" + name)
		if got := err == nil; got != want {
			t.Errorf("%s: present %v, want %v", name, got, want)
		}
	}
}
