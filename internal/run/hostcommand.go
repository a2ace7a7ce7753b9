package run

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
)

// hostCommand runs a task-level host hook in the eval set dir.
func (l *launch) hostCommand(ctx context.Context, shell string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", shell)
	cmd.Dir = l.es.Dir
	cmd.Env = append(os.Environ(), "STEWARD_RUN_ID="+l.runID, "STEWARD_EVALSET="+l.es.File)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}
