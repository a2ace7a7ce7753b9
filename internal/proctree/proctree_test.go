package proctree

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, env []string, shell string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", shell)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// startForked starts shell (which backgrounds its children with &) and
// returns once the shell has forked them: it says so on stdout after the
// forks, so their processes exist.
func startForked(t *testing.T, shell string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", shell+" echo forked; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "forked\n" {
		t.Fatalf("the shell did not fork its children: %q %v", line, err)
	}
	return cmd
}

func gone(cmd *exec.Cmd) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func TestReadStatAndDescendants(t *testing.T) {
	st, err := ReadStat("", os.Getpid())
	if err != nil || st.PID != os.Getpid() || st.PPID != os.Getppid() || st.Start == 0 {
		t.Fatalf("ReadStat(self) = %+v, %v", st, err)
	}
	cmd := startForked(t, "sleep 60 & sleep 60 &")
	d := Descendants(cmd.Process.Pid)
	if len(d) != 2 {
		t.Fatalf("descendants of the shell: %v, want its two sleeps", d)
	}
}

// A group is killed only in the members that carry the marker, and not at
// all when its leader's start time says the PID was reused.
func TestKillGroupIfMarked(t *testing.T) {
	marked := start(t, []string{"STEWARD_RUN_ID=r1"}, "sleep 60")
	st, err := ReadStat("", marked.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := KillGroupIfMarked(marked.Process.Pid, st.Start+1, "STEWARD_RUN_ID=r1"); err == nil {
		t.Fatal("a group whose leader started at another tick was killed")
	}
	stranger := start(t, []string{"STEWARD_RUN_ID=other"}, "sleep 60")
	if n, err := KillGroupIfMarked(stranger.Process.Pid, 0, "STEWARD_RUN_ID=r1"); n != 0 || err == nil {
		t.Fatalf("a stranger's group: killed %d, err %v", n, err)
	}
	if n, err := KillGroupIfMarked(marked.Process.Pid, st.Start, "STEWARD_RUN_ID=r1"); n < 1 || err != nil {
		t.Fatalf("the run's group: killed %d, err %v", n, err)
	}
	if !gone(marked) {
		t.Fatal("the run's group still runs")
	}
	if err := stranger.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatal("the stranger was killed")
	}
}

// KillDescendants reaches a grandchild that left its process group.
func TestKillDescendantsReachesEscapedGrandchild(t *testing.T) {
	cmd := startForked(t, "setsid sleep 60 &")
	d := Descendants(cmd.Process.Pid)
	if len(d) != 1 {
		t.Fatalf("descendants: %v", d)
	}
	if n := KillDescendants(cmd.Process.Pid); n < 1 {
		t.Fatalf("killed %d", n)
	}
	if !gone(cmd) { // the shell's wait returns once its child is dead
		t.Fatal("the escaped grandchild still runs")
	}
}
