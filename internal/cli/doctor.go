package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
)

func newDoctor(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Print what Steward sees of this machine for each sandbox provider: Docker daemon, CPUs, memory, networks, address pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			settings, err := providerSettingsHere(env)
			if err != nil {
				return err
			}
			out := scrubbed(env.Stdout, env)
			defer out.Flush()
			for _, d := range sandbox.Registered() {
				if d.Doctor == nil {
					continue
				}
				if err := d.Doctor(cmd.Context(), out, sandbox.RunInfo{Getenv: env.Getenv, Settings: settings, Liveness: runlock.Liveness{}}); err != nil {
					return out.Scrubber().Error(fmt.Errorf("%s: %w", d.Name, err))
				}
			}
			return nil
		},
	}
}

// providerSettingsHere reads the providers' sections of _steward.yaml in
// the working directory (kubernetes:), for doctor and sweep.
func providerSettingsHere(env Env) (map[string]any, error) {
	fleet, err := evalset.LoadFleet(evalset.FleetFileName, env.Getenv, evalset.FleetOverrides{})
	if err != nil {
		return nil, exitWith(ExitBadInput, err)
	}
	return fleet.ProviderSettings(), nil
}
