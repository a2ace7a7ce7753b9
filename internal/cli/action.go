package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/merge"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/status"
)

func newAction(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "action",
		Short: "Run as the GitHub Action (reads INPUT_*, writes outputs, summary, annotations and the PR comment)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			genv := ghaction.Env{Getenv: env.Getenv, Stdout: env.Stdout, Stderr: env.Stderr,
				Secrets: func(path string) []string { return modelSecrets(path, env) }, Baseline: readBaseline, Prune: actionPrune}
			code := ghaction.Run(cmd.Context(), genv, func(ctx context.Context, o ghaction.LaunchOptions) (*report.Report, int, error) {
				if o.Merge {
					out := o.Record
					if out == "" {
						out = ".steward"
					}
					warn := o.Warn // ::warning:: once workflow commands are back on
					if warn == nil {
						warn = mergeWarnings(o.Log)
					}
					rep, err := runMerge(ctx, out, o.Records, merge.Options{Title: o.Title, Shards: o.Shards, EvalSet: o.EvalSet, Getenv: env.Getenv, Warn: warn})
					if err != nil {
						return nil, ExitBadInput, err
					}
					return rep, exitFor(rep, false), nil
				}
				lenv := env
				if o.Log != nil {
					lenv.Stderr = o.Log
				}
				f := launchFlags{concurrency: o.Concurrency, budget: o.BudgetUSD, rerun: o.Rerun, earlyExit: o.EarlyExit,
					confirm: o.Confirm, confirmSamples: o.ConfirmSamples,
					shard: o.Shard, title: o.Title, record: o.Record, samplesRamp: o.SamplesRamp, grace: actionGrace}
				changed := func(name string) bool {
					switch name {
					case "max-concurrency":
						return o.Concurrency > 0
					case "record":
						return o.Record != ""
					case "samples-ramp":
						return o.SamplesRamp != ""
					}
					return false
				}
				lenv.Stdout = io.Discard // the action renders its own outputs
				rep, cancelled, err := launch(ctx, lenv, o.EvalSet, f, changed)
				if err != nil {
					code := ExitInfra
					if isBadInput(err) {
						code = ExitBadInput
					}
					return rep, code, err
				}
				if cancelled {
					return rep, ExitCancelled, context.Canceled
				}
				return rep, exitFor(rep, false), nil
			})
			if code != 0 {
				return exitWith(code, nil)
			}
			return nil
		},
	}
}

// actionPrune prunes the action's record before the workflow caches it
// (req.Off: only measures it).
func actionPrune(ctx context.Context, req ghaction.PruneRequest) (ghaction.PruneSummary, error) {
	if req.Off {
		n := record.SizeOf(req.Record)
		return ghaction.PruneSummary{Before: n, After: n}, nil
	}
	var args []string
	if req.EvalSet != "" {
		args = []string{req.EvalSet}
	}
	res, err := pruneRecord(ctx, req.Record, args, req.KeepRuns, req.KeepTranscripts, false)
	if err != nil {
		return ghaction.PruneSummary{}, err
	}
	return ghaction.PruneSummary{Before: res.BytesBefore, After: res.BytesAfter, Line: pruneSummary(res, false)}, nil
}

// readBaseline reads the base's results: the newest run in the record at
// path (a record directory or its record.sqlite).
func readBaseline(ctx context.Context, path string) (*report.Report, error) {
	dir := path
	if filepath.Base(path) == record.FileName {
		dir = filepath.Dir(path)
	}
	if _, err := os.Stat(filepath.Join(dir, record.FileName)); err != nil {
		return nil, fmt.Errorf("read baseline: no record at %s (was the base's record restored?)", path)
	}
	db, err := record.Open(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	defer db.Close()
	runs, err := db.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	for _, r := range runs {
		if r.Status != status.Finished {
			continue
		}
		rep, err := report.FromRecord(ctx, db, []string{r.ID}, "")
		if err != nil {
			return nil, err
		}
		if err := baseEvidence(ctx, db, runs, rep); err != nil {
			return nil, fmt.Errorf("read baseline: %w", err)
		}
		if err := knownFlaky(ctx, db, rep); err != nil {
			return nil, fmt.Errorf("read baseline: %w", err)
		}
		// The base's recent history, drawn beside the pull request's run.
		if rep.Trends, err = runTrends(ctx, db, r.ID); err != nil {
			return nil, fmt.Errorf("read baseline: %w", err)
		}
		return rep, nil
	}
	return nil, fmt.Errorf("read baseline: the record at %s holds no finished run", path)
}

// baseEvidence adds to the base's newest run every other judged attempt the
// record holds at the same sample identities (earlier runs, and the nightly
// `launch --confirm` runs that exist to build this evidence): each is an
// observation of the same definition, so the paired test gets more of the
// base side than one run gives. An observation is counted once: a carried
// row is its producer's.
func baseEvidence(ctx context.Context, db *record.DB, runs []record.Run, rep *report.Report) error {
	ids := map[string]string{}
	seen := map[string]bool{}
	key := func(producer, task, sample string, attempt int) string {
		return producer + "\x00" + task + "\x00" + sample + "\x00" + strconv.Itoa(attempt)
	}
	for _, a := range rep.Attempts {
		ids[a.Task+"\x00"+a.Sample] = a.Identity
		prod := a.Run
		if a.Carried {
			prod = a.CarriedFrom
		}
		seen[key(prod, a.Task, a.Sample, a.Attempt)] = true
	}
	added := false
	for _, r := range runs {
		if len(rep.RunIDs) > 0 && r.ID == rep.RunIDs[0] {
			continue
		}
		as, err := db.Attempts(ctx, r.ID)
		if err != nil {
			return err
		}
		for _, a := range as {
			if a.CarriedFrom != "" || (a.Status != status.Passed && a.Status != status.Failed && a.Status != status.Errored) {
				continue
			}
			id, ok := ids[a.Task+"\x00"+a.Sample]
			if !ok || id == "" || id != record.Identity(a.Task, a.Sample, a.Parts) || seen[key(r.ID, a.Task, a.Sample, a.Attempt)] {
				continue
			}
			seen[key(r.ID, a.Task, a.Sample, a.Attempt)] = true
			rep.Attempts = append(rep.Attempts, report.AttemptRow{Task: a.Task, Sample: a.Sample, Attempt: a.Attempt, Status: a.Status,
				Run: r.ID, Identity: id, Source: a.Source, Duration: a.Duration, Fingerprint: a.Fingerprint})
			added = true
		}
	}
	if added {
		rep.Recount()
	}
	return nil
}

// knownFlaky marks the samples the record's ledger holds mixed outcomes of
// at the identity rep's attempts have (the nightly --confirm runs build that
// evidence): the comparison lists their flips apart.
func knownFlaky(ctx context.Context, db *record.DB, rep *report.Report) error {
	rows, err := db.Ledger(ctx, "")
	if err != nil {
		return err
	}
	ids := map[string]string{}
	for _, a := range rep.Attempts {
		ids[a.Task+"\x00"+a.Sample] = a.Identity
	}
	for _, l := range rows {
		k := l.Task + "\x00" + l.Sample
		if id, ok := ids[k]; ok && id == l.Identity && l.Flaky() {
			if rep.KnownFlaky == nil {
				rep.KnownFlaky = map[string]report.FlakyInfo{}
			}
			rep.KnownFlaky[k] = report.FlakyInfo{Passed: l.Passed, Judged: l.Passed + l.Failed}
		}
	}
	return nil
}

// modelSecrets are the values the action masks before a run of the eval set
// at path: the key in the variable its model's api_key_env names (read from
// the loaded eval set, or from the file's text when it does not load), the
// variables its secret_env lists, and the providers' usual key variables.
func modelSecrets(path string, env Env) []string {
	out := secret.Values(env.Getenv, secret.EnvNames)
	if es, err := evalset.Load(path, evalset.LoadOptions{Getenv: env.Getenv}); err == nil {
		return append(out, secret.Values(env.Getenv, append(append([]string{es.Model.APIKeyEnv}, es.SecretEnv...), es.Fleet.Secrets...))...)
	}
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "api_key_env:"); ok && k == "" {
				v, _, _ = strings.Cut(v, "#")
				if key := env.Getenv(strings.Trim(strings.TrimSpace(v), `"'`)); key != "" {
					out = append(out, key)
				}
			}
		}
	}
	return out
}

// actionGrace is how long running attempts may finish after the runner's
// SIGINT. The runner sends SIGTERM 7.5 s after it; aborting the rest,
// removing the sandboxes, network and relay, and posting the partial report
// took 0.6–0.8 s on an idle daemon and 4.2 s on a daemon busy with other
// jobs' containers (a 4 s grace then ran past the SIGTERM), so 2 s leaves
// 5.5 s for that.
const actionGrace = 2 * time.Second
