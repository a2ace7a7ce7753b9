// Command steward runs agentic evaluations in CI. This file is the only one
// that touches the process: stdio, the environment, signals and the exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steward-evals/steward/internal/cli"
	"github.com/steward-evals/steward/internal/proctree"
)

func main() {
	// The first SIGINT/SIGTERM stops dispatching and lets running attempts
	// finish within the grace period; the second stops at once.
	soft, stopSoft := context.WithCancel(context.Background())
	hard, stopHard := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		stopSoft()
		<-sigs
		stopHard()
	}()
	if cli.IsWorker(os.Args[1:]) {
		worker(stopSoft)
	} else if cli.Supervises(os.Args[1:]) {
		// A worker that dies leaves its agents' escaped grandchildren to
		// the supervisor (not to init), which kills them when it ends.
		_ = proctree.BecomeSubreaper()
	}
	exe, _ := os.Executable()
	code := cli.Main(soft, os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		StderrTTY: isTTY(os.Stderr), StdinTTY: isTTY(os.Stdin), Hard: hard, Exe: exe,
	})
	stopHard()
	if cli.IsWorker(os.Args[1:]) || cli.Supervises(os.Args[1:]) {
		// Nothing an agent started outlives its worker or its run: orphans
		// that left their process group were reparented here (subreaper).
		proctree.KillDescendants(os.Getpid())
	}
	os.Exit(code)
}

// worker prepares a worker process (W1) to clean up after a supervisor that
// dies, however it dies: writes to the closed pipes fail with EPIPE instead
// of killing the worker with SIGPIPE; orphaned agent processes are
// reparented to the worker (child subreaper) so it can kill them; and when
// the supervisor is gone (the worker is reparented) the worker's context
// ends, which aborts its attempts and removes its sandboxes.
func worker(gone func()) {
	signal.Ignore(syscall.SIGPIPE)
	_ = proctree.BecomeSubreaper()
	parent := os.Getppid()
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				gone()
				return
			}
		}
	}()
}

// isTTY asks the terminal driver (a character device such as /dev/null is not a terminal).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
