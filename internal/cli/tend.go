package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/tend"
)

func newTend(env Env) *cobra.Command {
	var recFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tend [EVALSET]",
		Short: "Show the live ramp state of running invocations: setpoints, connection ceiling, signals, last decision",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecordRO(cmd.Context(), recFlag, args, env)
			if errors.Is(err, record.ErrNoRecord) {
				fmt.Fprintf(env.Stdout, "no live run: %v\n", errors.Unwrap(err))
				return nil
			}
			if err != nil {
				return err
			}
			defer db.Close()
			live, err := db.Live(cmd.Context())
			if err != nil {
				return err
			}
			dropDeadRuns(cmd.Context(), db, live)
			if len(live) == 0 {
				fmt.Fprintln(env.Stdout, "no live run on this record has tended yet")
				return nil
			}
			ids := make([]string, 0, len(live))
			for id := range live {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				if asJSON {
					fmt.Fprintln(env.Stdout, live[id])
					continue
				}
				var s tend.LiveState
				if err := json.Unmarshal([]byte(live[id]), &s); err != nil {
					return fmt.Errorf("read live state of %s: %w", id, err)
				}
				if s.Tended {
					fmt.Fprintf(env.Stdout, "run %s  (%s)  tended %s ago\n", s.RunID, s.EvalSet, time.Since(s.At).Round(time.Second))
				} else {
					fmt.Fprintf(env.Stdout, "run %s  (%s)  started %s ago, not tended yet\n", s.RunID, s.EvalSet, time.Since(s.At).Round(time.Second))
				}
				fmt.Fprintf(env.Stdout, "  %s\n  %s\n", report.PlanLine(s.Plan), report.CountsLine(s.Counts))
				fmt.Fprintf(env.Stdout, "  samples_ramp %s · budget %d · connection ceiling %d · limit %d", s.Range, s.Budget, s.Decision.Ceiling, s.Decision.Signals.ConnLimit)
				if s.Held != "" {
					fmt.Fprintf(env.Stdout, " · HELD: %s", s.Held)
				}
				if s.Tended {
					fmt.Fprintf(env.Stdout, "\n  signals: pushback %v · retries %d of %d requests\n  decision: %s\n", s.Decision.Signals.Pushback, s.Decision.Signals.Retries, s.Decision.Signals.Requests, s.Decision.Reason)
				} else {
					fmt.Fprintf(env.Stdout, "\n  not tended yet: starting setpoints\n")
				}
				at := func(v []int, i int) int {
					if i < len(v) {
						return v[i]
					}
					return 0
				}
				for i, name := range s.Tasks {
					var td string
					if i < len(s.Decision.Tasks) {
						td = fmt.Sprintf(" · %s: %s", s.Decision.Tasks[i].Action, s.Decision.Tasks[i].Reason)
					}
					line := fmt.Sprintf("  %-20s setpoint %4d (cap %d) · running %4d", name, at(s.Setpoints, i), at(s.Caps, i), at(s.Running, i))
					if n := at(s.Starting, i); n > 0 {
						line += fmt.Sprintf(" · starting %d", n)
					}
					fmt.Fprintf(env.Stdout, "%s · queued %5d%s\n", line, at(s.Queued, i), td)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON state")
	return cmd
}
