package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	stewardversion "github.com/steward-evals/steward/internal/version"
)

// version is the stamped version and commit (internal/version).
func version() string { return stewardversion.String() }

func newVersion(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(env.Stdout, "steward", version())
			return nil
		},
	}
}
