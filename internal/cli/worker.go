package cli

import (
	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/worker"
)

func newWorker(env Env) *cobra.Command {
	var forTasks string
	cmd := &cobra.Command{
		Use:    worker.Arg,
		Short:  "internal: a worker process that runs one or more tasks' attempts for the supervisor",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The worker runs in a process group of its own, so a terminal's
			// ^C reaches only the supervisor, which decides when attempts stop
			// (abort) or the run ends. The context ends when the worker itself
			// is signalled or its supervisor is gone: it then aborts and
			// removes its sandboxes.
			return worker.Serve(cmd.Context(), env.Stdin, env.Stdout, env.Stderr, sandbox.Factory{Getenv: env.Getenv}, env.Getenv)
		},
	}
	cmd.Flags().StringVar(&forTasks, "for", "", "the tasks this worker runs (informational, shown in ps)")
	return cmd
}

// IsWorker says whether args start a worker process (main prepares those to
// outlive a dead supervisor long enough to clean up).
func IsWorker(args []string) bool { return len(args) > 0 && args[0] == worker.Arg }
