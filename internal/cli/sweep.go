package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

func newSweep(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "sweep",
		Short: "Remove the sandboxes, containers, networks and untagged built images that dead Steward runs left behind (never a live run's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := providerSettingsHere(env)
			if err != nil {
				return err
			}
			var errs []error
			for _, d := range sandbox.Registered() {
				if d.Sweep == nil {
					continue
				}
				if err := d.Sweep(cmd.Context(), env.Stdout, sandbox.RunInfo{Getenv: env.Getenv, Settings: settings, Liveness: runlock.Liveness{}}); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
				}
			}
			return errors.Join(errs...)
		},
	}
}
