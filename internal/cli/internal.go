package cli

import (
	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/sandbox"
)

// newInternal makes the hidden commands the registered sandbox providers
// run themselves (docker: the gateway relay).
func newInternal(env Env) []*cobra.Command {
	var out []*cobra.Command
	for _, d := range sandbox.Registered() {
		for _, ic := range d.Internal {
			out = append(out, &cobra.Command{
				Use:    ic.Name + " " + ic.Usage,
				Short:  ic.Short,
				Hidden: true,
				Args:   cobra.ExactArgs(ic.Args),
				RunE: func(cmd *cobra.Command, args []string) error {
					return ic.Run(cmd.Context(), args, env.Stderr)
				},
			})
		}
	}
	return out
}
