// Command steward runs agentic evaluations in CI. This file is the only one
// that touches the process: stdio, the environment, signals and the exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/steward-evals/steward/internal/cli"
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
	exe, _ := os.Executable()
	code := cli.Main(soft, os.Args[1:], cli.Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		StderrTTY: isTTY(os.Stderr), StdinTTY: isTTY(os.Stdin), Hard: hard, Exe: exe,
	})
	stopHard()
	os.Exit(code)
}

// isTTY asks the terminal driver (a character device such as /dev/null is not a terminal).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
