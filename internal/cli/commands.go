package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/run"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox/docker"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes"
	"github.com/steward-evals/steward/internal/sandbox/kubernetes/kuberelay"
	"github.com/steward-evals/steward/internal/sandbox/local"
)

func openRecord(ctx context.Context, flag string, args []string, env Env) (*record.DB, error) {
	es := ""
	if len(args) > 0 {
		es = args[0]
	}
	dir, err := resolveRecord(flag, es, env)
	if err != nil {
		return nil, err
	}
	return record.Open(ctx, dir)
}

func newReport(env Env) *cobra.Command {
	var recFlag, runID, format, title string
	cmd := &cobra.Command{
		Use:   "report [EVALSET]",
		Short: "Render a run's report from the record (terminal, markdown, json, junit)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := openRecord(ctx, recFlag, args, env)
			if err != nil {
				return err
			}
			defer db.Close()
			if runID == "" {
				runs, err := db.Runs(ctx)
				if err != nil {
					return err
				}
				if len(runs) == 0 {
					return exitWith(ExitBadInput, fmt.Errorf("the record %s holds no runs yet", db.Path))
				}
				runID = runs[0].ID
			}
			rep, err := report.FromRecord(ctx, db, []string{runID}, title)
			if err != nil {
				return exitWith(ExitBadInput, err)
			}
			return render(env.Stdout, rep, format, env)
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().StringVar(&runID, "run", "", "run id (default the newest)")
	cmd.Flags().StringVar(&format, "format", "terminal", "terminal, markdown, json or junit")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	return cmd
}

func render(w io.Writer, rep *report.Report, format string, env Env) error {
	switch format {
	case "terminal":
		return report.Terminal(w, rep, report.TerminalOptions{})
	case "markdown", "md":
		return report.Markdown(w, rep, report.MarkdownOptions{})
	case "json":
		return report.JSON(w, rep)
	case "junit":
		return report.JUnit(w, rep)
	case "comment":
		_, err := io.WriteString(w, report.Comment(rep, report.CommentOptions{}))
		return err
	}
	return exitWith(ExitBadInput, fmt.Errorf("--format %q: want terminal, markdown, json, junit or comment", format))
}

func newDoctor(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Print what Steward sees of this machine: Docker daemon, CPUs, memory, networks, address pools; and the Kubernetes cluster when one is configured",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !docker.Available(ctx) {
				fmt.Fprintln(env.Stdout, "docker: no daemon answers (DOCKER_HOST or /var/run/docker.sock); tasks default to the local provider")
			} else {
				p, err := docker.New(ctx, docker.Options{InContainer: inContainer(env)})
				if err != nil {
					return err
				}
				if err := p.Doctor(ctx, env.Stdout); err != nil {
					return err
				}
			}
			return kubeDoctor(cmd, env)
		},
	}
}

// kubeDoctor reports the cluster when one is configured: _steward.yaml's
// kubernetes: section in this directory, KUBECONFIG, STEWARD_KUBE_* or the
// in-cluster environment.
func kubeDoctor(cmd *cobra.Command, env Env) error {
	p, err := configuredKube(cmd, env, "doctor")
	if p == nil || err != nil {
		return err
	}
	return p.Doctor(cmd.Context(), env.Stdout)
}

// configuredKube connects to the cluster configured here (nil when none is).
func configuredKube(cmd *cobra.Command, env Env, role string) (*kubernetes.Provider, error) {
	fleet, err := evalset.LoadFleet(evalset.FleetFileName, env.Getenv, evalset.FleetOverrides{})
	if err != nil {
		return nil, exitWith(ExitBadInput, err)
	}
	k := fleet.Kubernetes
	if k.Kubeconfig == "" && k.Namespace == "" && k.RelayImage == "" && env.Getenv("KUBECONFIG") == "" &&
		env.Getenv(kubernetes.EnvNamespace) == "" && env.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	o, err := kubernetes.OptionsFrom(k, env.Getenv)
	if err != nil {
		return nil, exitWith(ExitBadInput, err)
	}
	o.RunID = role + "-" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	p, err := kubernetes.New(cmd.Context(), o)
	if err != nil {
		fmt.Fprintf(env.Stdout, "kubernetes: %v\n", err)
		return nil, nil
	}
	return p, nil
}

// newKubeProbe is the doctor's probe pod command (see kubernetes.Probe).
func newKubeProbe(env Env) *cobra.Command {
	return &cobra.Command{
		Use: kubernetes.ProbeArg + " URL", Hidden: true, Args: cobra.ExactArgs(1),
		Short: "internal: fetch a URL through the kubernetes relay",
		RunE: func(cmd *cobra.Command, args []string) error {
			return kubernetes.Probe(cmd.Context(), args[0])
		},
	}
}

func newSweep(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "sweep",
		Short: "Remove the containers and networks that dead Steward runs left behind (never a live run's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			local.Sweep(os.TempDir(), runlock.Alive, env.Stdout)
			if kp, err := configuredKube(cmd, env, "sweep"); err != nil {
				return err
			} else if kp != nil {
				if _, err := kp.Sweep(ctx, env.Stdout); err != nil {
					return err
				}
			}
			if !docker.Available(ctx) {
				fmt.Fprintln(env.Stdout, "docker: no daemon answers; nothing to sweep")
				return nil
			}
			p, err := docker.New(ctx, docker.Options{})
			if err != nil {
				return err
			}
			_, err = p.Sweep(ctx, env.Stdout)
			return err
		},
	}
}

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
	if err := db.SetControl(cmd.Context(), run.HoldKey, reason, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s (live runs apply it at their next tend)\n", said)
	return nil
}

func newTend(env Env) *cobra.Command {
	var recFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tend [EVALSET]",
		Short: "Show the live ramp state of running invocations: setpoints, connection ceiling, signals, last decision",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecord(cmd.Context(), recFlag, args, env)
			if err != nil {
				return err
			}
			defer db.Close()
			live, err := db.Live(cmd.Context())
			if err != nil {
				return err
			}
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
				var s run.LiveState
				if err := json.Unmarshal([]byte(live[id]), &s); err != nil {
					return fmt.Errorf("read live state of %s: %w", id, err)
				}
				fmt.Fprintf(env.Stdout, "run %s  (%s)  tended %s ago\n", s.RunID, s.EvalSet, time.Since(s.At).Round(time.Second))
				fmt.Fprintf(env.Stdout, "  %s\n  %s\n", report.PlanLine(s.Plan), report.CountsLine(s.Counts))
				fmt.Fprintf(env.Stdout, "  samples_ramp %s · budget %d · connection ceiling %d · limit %d", s.Range, s.Budget, s.Decision.Ceiling, s.Decision.Signals.ConnLimit)
				if s.Held != "" {
					fmt.Fprintf(env.Stdout, " · HELD: %s", s.Held)
				}
				fmt.Fprintf(env.Stdout, "\n  signals: pushback %v · retries %d of %d requests\n  decision: %s\n", s.Decision.Signals.Pushback, s.Decision.Signals.Retries, s.Decision.Signals.Requests, s.Decision.Reason)
				for i, name := range s.Tasks {
					var td string
					if i < len(s.Decision.Tasks) {
						td = fmt.Sprintf("%s: %s", s.Decision.Tasks[i].Action, s.Decision.Tasks[i].Reason)
					}
					fmt.Fprintf(env.Stdout, "  %-20s setpoint %4d · running %4d · queued %5d · %s\n", name, s.Setpoints[i], s.Running[i], s.Queued[i], td)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&recFlag, "record", "", "record directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON state")
	return cmd
}

func newLease(env Env) *cobra.Command {
	var recFlag, token string
	var ownerGone, quiescent bool
	cmd := &cobra.Command{Use: "lease", Short: "Inspect and recover shared_state leases"}
	inspect := &cobra.Command{
		Use:   "inspect [KEY]",
		Short: "Show who holds a lease, with its owner token (the only place the token is shown)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := openRecord(cmd.Context(), recFlag, nil, env)
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

func newRelay(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    docker.RelayArg + " LISTEN TARGET",
		Short:  "internal: forward sandbox connections to the model gateway",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return docker.RunRelay(cmd.Context(), args[0], args[1], env.Stderr)
		},
	}
}

// newKubeRelay is what the kubernetes provider's relay pod runs (see kuberelay).
func newKubeRelay(env Env) *cobra.Command {
	return &cobra.Command{
		Use:    kuberelay.Arg + " SANDBOX-LISTEN CONTROL-LISTEN",
		Short:  "internal: the gateway relay in a kubernetes pod",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return kuberelay.Run(cmd.Context(), args[0], args[1], env.Stderr)
		},
	}
}

func newWorker(env Env) *cobra.Command {
	var forTasks string
	cmd := &cobra.Command{
		Use:    run.WorkerArg,
		Short:  "internal: a worker process that runs one or more tasks' attempts for the supervisor",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The worker ignores the first SIGINT of a terminal's Ctrl-C: the
			// supervisor decides when attempts stop (abort) or the run ends.
			return run.Worker(context.WithoutCancel(cmd.Context()), env.Stdin, env.Stdout, env.Stderr, providerFactory{env: env}, env.Getenv)
		},
	}
	cmd.Flags().StringVar(&forTasks, "for", "", "the tasks this worker runs (informational, shown in ps)")
	return cmd
}
