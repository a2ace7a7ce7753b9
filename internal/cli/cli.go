// Package cli is Steward's command line. It maps errors to the documented
// exit codes; only cmd/steward touches the process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
)

// Exit codes (documented in docs/guide.md, "Exit codes").
const (
	ExitOK        = 0   // every judged attempt passed
	ExitFailed    = 1   // some attempt failed, errored or was interrupted
	ExitBadInput  = 2   // bad input: nothing ran
	ExitInfra     = 3   // an infrastructure error (daemon, disk, upstream) stopped work
	ExitBudget    = 4   // the --budget ran out and stopped the run (attempts skipped or refused)
	ExitCancelled = 130 // cancelled by a signal; what finished is in the record
)

// Env is the outside world, handed in by main.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// StderrTTY and StdinTTY say whether those are terminals.
	StderrTTY, StdinTTY bool
	// Hard is cancelled by the second signal.
	Hard context.Context
	// Exe is this binary's path.
	Exe string
}

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Hard == nil {
		env.Hard = context.Background()
	}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetIn(env.Stdin)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(env.Stderr, "steward:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(env.Stderr, "steward:", err)
	switch {
	case isBadInput(err), isUsage(err):
		return ExitBadInput
	case ctx.Err() != nil:
		return ExitCancelled
	}
	return ExitInfra
}

func isUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "invalid argument", "accepts ", "requires ", "flag needs", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRoot(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "steward",
		Short:         "Run agentic evaluations in CI: sandboxes, a model gateway, a sample ramp, and reports",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.AddCommand(
		newLaunch(env), newReport(env), newVersion(env), newDoctor(env), newSweep(env),
		newRamp(env), newTend(env), newLease(env), newMerge(env), newAction(env), newAgent(env),
		newWorker(env), newView(env), newRuns(env), newFlaky(env), newCompare(env), newTrends(env), newPrune(env),
	)
	root.AddCommand(newInternal(env)...)
	root.InitDefaultCompletionCmd() // now, so that refuseUnknownSubcommands sees it too
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (`steward agent`, `steward ramp`, `steward lease`) refuse an argument that
// names none of them, with cobra's did-you-mean: exit 2, never the help text
// on stdout and exit 0 (an agent's "answer" was once `steward agent caht`'s
// help). Without an argument such a command prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return exitWith(ExitBadInput, errors.New(msg))
	}
	c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
}

// exitFor maps a finished run's counts to an exit code.
func exitFor(r *report.Report, cancelled bool) int {
	switch {
	case cancelled:
		return ExitCancelled
	case r.Counts.Infra > 0:
		return ExitInfra
	case r.Spend.BudgetStopped:
		return ExitBudget
	case r.Counts.Failed+r.Counts.Errored+r.Counts.Interrupted > 0:
		return ExitFailed
	}
	return ExitOK
}

func isBadInput(err error) bool {
	var verrs *evalset.Errors
	var ee *exitError
	return errors.As(err, &verrs) || errors.Is(err, run.ErrBadInput) || (errors.As(err, &ee) && ee.code == ExitBadInput)
}

// Supervises says whether args start a command that runs sandboxes
// (launch, action): main makes it the reaper of orphaned agent processes.
func Supervises(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		return a == "launch" || a == "action"
	}
	return false
}
