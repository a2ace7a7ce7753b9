package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newLease(env Env) *cobra.Command {
	var recFlag, token string
	var ownerGone, quiescent bool
	cmd := &cobra.Command{Use: "lease", Short: "Inspect and recover shared_state leases"}
	inspect := &cobra.Command{
		Use:   "inspect [KEY]",
		Short: "Show who holds a lease, with its owner token (the only place the token is shown)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecordRO(cmd.Context(), recFlag, nil, env)
			if err != nil {
				return err
			}
			defer db.Close()
			key := ""
			if len(args) == 1 {
				key = args[0]
			}
			ls, err := db.Leases(cmd.Context(), key)
			if err != nil {
				return err
			}
			if len(ls) == 0 {
				if key != "" {
					fmt.Fprintf(env.Stdout, "lease %q is free\n", key)
				} else {
					fmt.Fprintln(env.Stdout, "no lease is held")
				}
				return nil
			}
			for _, l := range ls {
				fmt.Fprintf(env.Stdout, "key:      %s\nrun:      %s\ntask:     %s\nowner:    pid %d on %s\nsince:    %s\ntoken:    %s\n\n", l.Key, l.RunID, l.Task, l.PID, l.Host, l.Acquired.Format(time.RFC3339), l.Token)
			}
			fmt.Fprintln(env.Stdout, "Steward never takes a lease over. Once you have checked that the owner is gone and the shared state is quiescent:\n  steward lease recover KEY --token TOKEN --owner-gone --state-quiescent")
			return nil
		},
	}
	recover := &cobra.Command{
		Use:   "recover KEY",
		Short: "Free a lease whose owner is gone (needs the owner token and both confirmations)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" || !ownerGone || !quiescent {
				return exitWith(ExitBadInput, errors.New("recover needs --token (from `steward lease inspect`), --owner-gone and --state-quiescent: confirm the owner has terminated and the shared state is quiescent"))
			}
			db, err := openRecord(cmd.Context(), recFlag, nil, env)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Recover(cmd.Context(), args[0], token); err != nil {
				return exitWith(ExitBadInput, err)
			}
			fmt.Fprintf(env.Stdout, "lease %q recovered\n", args[0])
			return nil
		},
	}
	recover.Flags().StringVar(&token, "token", "", "the owner token shown by `steward lease inspect`")
	recover.Flags().BoolVar(&ownerGone, "owner-gone", false, "confirm the owning process has terminated")
	recover.Flags().BoolVar(&quiescent, "state-quiescent", false, "confirm the shared state is quiescent")
	cmd.PersistentFlags().StringVar(&recFlag, "record", "", "record directory (default .steward)")
	cmd.AddCommand(inspect, recover)
	return cmd
}
