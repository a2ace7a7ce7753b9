package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/tend"
)

func newRamp(env Env) *cobra.Command {
	var recFlag, reason string
	cmd := &cobra.Command{Use: "ramp", Short: "Hold or resume the sample ramp of live runs (through the record)"}
	hold := &cobra.Command{
		Use:   "hold [EVALSET]",
		Short: "Freeze the climb of every live run on this record",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return exitWith(ExitBadInput, errors.New(`--reason is required, e.g. --reason "provider looks unhappy"`))
			}
			return setHold(cmd, recFlag, args, env, reason, "ramp held: "+reason)
		},
	}
	hold.Flags().StringVar(&reason, "reason", "", "why (shown in the panel and the report)")
	resume := &cobra.Command{
		Use:   "resume [EVALSET]",
		Short: "Release a hold",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setHold(cmd, recFlag, args, env, "", "ramp resumed")
		},
	}
	cmd.PersistentFlags().StringVar(&recFlag, "record", "", "record directory")
	cmd.AddCommand(hold, resume)
	return cmd
}

// setHold writes the ramp hold (reason) or its release ("") into the record,
// where live runs read it at their next tend (R5).
func setHold(cmd *cobra.Command, recFlag string, args []string, env Env, reason, said string) error {
	db, err := openRecord(cmd.Context(), recFlag, args, env)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SetControl(cmd.Context(), tend.HoldKey, reason, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s (live runs apply it at their next tend)\n", said)
	return nil
}
