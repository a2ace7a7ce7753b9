package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/ghaction"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/record"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/shard"
	"github.com/steward-evals/steward/internal/status"
)

func newMerge(env Env) *cobra.Command {
	var out, format, title, evalSet string
	var shards int
	cmd := &cobra.Command{
		Use:   "merge --out DIR RECORD...",
		Short: "Combine shard records into one record and one report",
		Long: `Combine the newest run of each shard record (the .steward directories that
matrix jobs uploaded) into one run in the record at --out, then print its
report. Rows come out in the whole eval set's discovery order.

The shard count comes from the records' "i/n" (or --shards N). A missing
slice is an error that names it (and, with --eval-set, the tasks and samples
that are in no record). The same run given twice counts once; a record whose
newest run is not a shard run (a cache restored into a shard job that never
ran) is left out with a warning; two runs that disagree on an attempt are
reported by task and sample.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return exitWith(ExitBadInput, errors.New("--out is required: the record directory to merge into"))
			}
			if shards < 0 {
				return exitWith(ExitBadInput, fmt.Errorf("--shards must be at least 1, got %d", shards))
			}
			rep, err := merge(cmd.Context(), out, args, mergeOptions{title: title, shards: shards, evalSet: evalSet, getenv: env.Getenv, warn: env.Stderr})
			if err != nil {
				return err
			}
			if err := render(env.Stdout, rep, format, env); err != nil {
				return err
			}
			if code := exitFor(rep, false); code != ExitOK {
				return exitWith(code, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "record directory to merge into")
	cmd.Flags().StringVar(&format, "format", "terminal", "terminal, markdown, json or junit")
	cmd.Flags().StringVar(&title, "title", "", "report title")
	cmd.Flags().IntVar(&shards, "shards", 0, "how many shards to expect (default: the n of the records' i/n)")
	cmd.Flags().StringVar(&evalSet, "eval-set", "", "the eval set the shards ran, to name what a missing shard held")
	return cmd
}

type mergeOptions struct {
	title   string
	shards  int    // expected shard count; 0: from the records
	evalSet string // to name what missing shards held; "" or unreadable: not named
	getenv  func(string) string
	warn    io.Writer
	// warnf, when set, takes the merge's warnings instead of warn (the
	// action raises them as ::warning:: once workflow commands are back on).
	warnf func(msg string)
}

func (o mergeOptions) warning(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if o.warnf != nil {
		o.warnf(msg)
		return
	}
	fmt.Fprintln(o.warn, "steward merge: "+msg)
}

// missingShardsError is a merge that lacks shard records: which ones, of
// how many, and what they held (ghaction.MissingShards).
type missingShardsError struct {
	msg      string
	missing  []string
	expected int
	held     string
}

func (e *missingShardsError) Error() string { return e.msg }
func (e *missingShardsError) MissingShards() ([]string, int, string) {
	return e.missing, e.expected, e.held
}

// shardRecord is one input's newest run.
type shardRecord struct {
	dir      string
	run      record.Run
	i, n     int
	attempts []record.Attempt
	ramp     []record.RampPoint
	// transcripts by seq, copied into the merged record with their attempts.
	transcripts map[int]copiedTranscript
}

// copiedTranscript is a shard's transcript on its way into the merged record.
type copiedTranscript struct {
	info record.TranscriptInfo
	blob []byte
}

func readShardRecord(ctx context.Context, in string) (*shardRecord, error) {
	dir := in
	if filepath.Base(in) == record.FileName {
		dir = filepath.Dir(in)
	}
	if _, err := os.Stat(filepath.Join(dir, record.FileName)); err != nil {
		return nil, exitWith(ExitBadInput, fmt.Errorf("merge: %s holds no record (%s): %w", in, record.FileName, err))
	}
	src, err := record.OpenReadOnly(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	runs, err := src.Runs(ctx)
	if err != nil || len(runs) == 0 {
		return nil, exitWith(ExitBadInput, fmt.Errorf("merge: the record %s holds no run", dir))
	}
	sr := &shardRecord{dir: dir, run: runs[0]}
	if sr.run.Shard != "" {
		if sr.i, sr.n, err = shard.Parse(sr.run.Shard); err != nil {
			return nil, exitWith(ExitBadInput, fmt.Errorf("merge: %s: run %s has shard %q: %w", dir, sr.run.ID, sr.run.Shard, err))
		}
	}
	if sr.attempts, err = src.Attempts(ctx, sr.run.ID); err != nil {
		return nil, err
	}
	sr.transcripts = map[int]copiedTranscript{}
	for _, a := range sr.attempts {
		info, blob, err := src.TranscriptOf(ctx, a)
		if err != nil {
			return nil, err
		}
		if blob != nil {
			sr.transcripts[a.Seq] = copiedTranscript{info, blob}
		}
	}
	if sr.ramp, err = src.Ramp(ctx, sr.run.ID); err != nil {
		return nil, err
	}
	return sr, nil
}

func sameOutcome(a, b record.Attempt) bool {
	return a.Status == b.Status && a.Fingerprint == b.Fingerprint && a.Answer == b.Answer
}

func merge(ctx context.Context, out string, inputs []string, o mergeOptions) (*report.Report, error) {
	if o.warn == nil {
		o.warn = io.Discard
	}
	var recs []*shardRecord
	seenRun := map[string]string{}
	for _, in := range inputs {
		sr, err := readShardRecord(ctx, in)
		if err != nil {
			return nil, err
		}
		if prev, dup := seenRun[sr.run.ID]; dup {
			// The same run twice (an artifact downloaded twice): it counts once.
			o.warning("%s holds run %s, already read from %s: counted once", sr.dir, sr.run.ID, prev)
			continue
		}
		seenRun[sr.run.ID] = sr.dir
		recs = append(recs, sr)
	}
	sharded := false
	for _, sr := range recs {
		sharded = sharded || sr.n > 0
	}
	// Shard count: the flag, else the records' n, which must agree.
	n := o.shards
	var nFrom []string
	for _, sr := range recs {
		if sr.n == 0 {
			continue
		}
		if n == 0 {
			n = sr.n
		}
		if sr.n != n {
			nFrom = append(nFrom, fmt.Sprintf("%s ran %s", sr.dir, sr.run.Shard))
		}
	}
	if len(nFrom) > 0 {
		how := "the first record's"
		if o.shards > 0 {
			how = "--shards"
		}
		return nil, exitWith(ExitBadInput, fmt.Errorf("merge: %d shards expected (%s), but %s", n, how, strings.Join(nFrom, "; ")))
	}
	var kept []*shardRecord
	for _, sr := range recs {
		if sr.n == 0 && (sharded || o.shards > 0) {
			// A whole (unsharded) run among shard runs: a record restored
			// from the cache into a shard job that failed before it ran.
			o.warning("%s is left out: its newest run %s (%s) is not a shard run (a record restored from the cache into a shard job that never ran?)",
				sr.dir, sr.run.ID, sr.run.Started.UTC().Format(time.RFC3339))
			continue
		}
		kept = append(kept, sr)
	}
	recs = kept
	if len(recs) == 0 {
		return nil, exitWith(ExitBadInput, errors.New("merge: no shard run in the records given"))
	}

	// Attempts by seq: the same attempt from two runs collapses when they
	// agree and is a conflict when they do not.
	bySeq := map[int]record.Attempt{}
	transcripts := map[int]copiedTranscript{}
	from := map[int]string{}
	var conflicts []string
	for _, sr := range recs {
		for _, a := range sr.attempts {
			prev, dup := bySeq[a.Seq]
			if !dup {
				bySeq[a.Seq] = a
				from[a.Seq] = sr.dir
				if t, ok := sr.transcripts[a.Seq]; ok {
					transcripts[a.Seq] = t
				}
				continue
			}
			if !sameOutcome(prev, a) {
				conflicts = append(conflicts, fmt.Sprintf("%s/%s#%d: %s in %s, %s in %s", a.Task, a.Sample, a.Attempt, prev.Status, from[a.Seq], a.Status, sr.dir))
			}
		}
	}
	if total := len(conflicts); total > 0 {
		sort.Strings(conflicts)
		more := ""
		if total > 20 {
			more = fmt.Sprintf("\n… and %d more", total-20)
			conflicts = conflicts[:20]
		}
		return nil, exitWith(ExitBadInput, fmt.Errorf("merge: %d attempts disagree between records (were they run from the same eval set?):\n%s%s",
			total, strings.Join(conflicts, "\n"), more))
	}
	if n > 0 {
		have := map[int]bool{}
		for _, sr := range recs {
			have[sr.i] = true
		}
		var missing []string
		for i := 1; i <= n; i++ {
			if !have[i] {
				missing = append(missing, fmt.Sprintf("%d/%d", i, n))
			}
		}
		if len(missing) > 0 {
			how := "from the records' i/n"
			if o.shards > 0 {
				how = "from --shards"
			}
			msg := fmt.Sprintf("merge: %d shards expected (%s), %d missing: %s (did their jobs fail before uploading a record?)",
				n, how, len(missing), strings.Join(missing, ", "))
			held := unmergedAttempts(o, bySeq)
			if held != "" {
				msg += "\nthey held: " + held
			} else if o.evalSet == "" {
				msg += "\n(pass --eval-set to name the tasks they held)"
			}
			return nil, exitWith(ExitBadInput, &missingShardsError{msg: msg, missing: missing, expected: n, held: held})
		}
	}

	dst, err := record.Open(ctx, out)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	id := "merge-" + time.Now().UTC().Format("20060102-150405-") + record.NewID("")[:6]
	merged := recs[0].run
	var shards []string
	var ramp []record.RampPoint
	for _, sr := range recs {
		r := sr.run
		if r.Shard != "" {
			shards = append(shards, r.Shard)
		}
		if r.Started.Before(merged.Started) {
			merged.Started = r.Started
		}
		if r.Finished.After(merged.Finished) {
			merged.Finished = r.Finished
		}
		if r.Status != status.Finished {
			merged.Status = r.Status
		}
		ramp = append(ramp, sr.ramp...)
	}
	var rows []record.Attempt
	for _, a := range bySeq {
		rows = append(rows, a)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
	merged.ID = id
	merged.Shard = ""
	merged.Title = o.title
	merged.Plan = fmt.Sprintf("merged %d shard records (%s)", len(recs), strings.Join(shards, ", "))
	if err := dst.StartRun(ctx, merged); err != nil {
		return nil, err
	}
	for _, a := range rows {
		a.RunID = id
		if err := dst.Publish(ctx, a); err != nil {
			return nil, err
		}
		if t, ok := transcripts[a.Seq]; ok {
			if err := dst.PutTranscript(ctx, id, a.Seq, t.info, t.blob); err != nil {
				return nil, err
			}
		}
	}
	if err := dst.AddRamp(ctx, id, ramp); err != nil {
		return nil, err
	}
	st := merged.Status
	if st == "" || st == status.Running {
		st = status.Finished
	}
	if err := dst.FinishRun(ctx, id, st, merged.Finished, nil); err != nil {
		return nil, err
	}
	rep, err := report.FromRecord(ctx, dst, []string{id}, o.title)
	if err != nil {
		return nil, err
	}
	if err := report.LoadTranscripts(ctx, dst, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// unmergedAttempts names, from the eval set's plan, the attempts no record
// holds: "arithmetic: add, mul (4 attempts); files: shout-1 (1 attempt)".
// "" when the eval set is not given or does not load.
func unmergedAttempts(o mergeOptions, have map[int]record.Attempt) string {
	if o.evalSet == "" {
		return ""
	}
	if _, err := os.Stat(o.evalSet); err != nil {
		return ""
	}
	es, err := evalset.Load(o.evalSet, evalset.LoadOptions{Getenv: o.getenv})
	if err != nil {
		return ""
	}
	p, err := plan.Build(es, plan.Options{})
	if err != nil {
		return ""
	}
	type agg struct {
		samples  []string
		attempts int
	}
	var order []string
	per := map[string]*agg{}
	for _, a := range p.Attempts {
		if _, ok := have[a.Seq]; ok {
			continue
		}
		task := p.Tasks[a.Task].Task.Name
		g := per[task]
		if g == nil {
			g = &agg{}
			per[task] = g
			order = append(order, task)
		}
		g.attempts++
		if len(g.samples) == 0 || g.samples[len(g.samples)-1] != a.Sample.ID {
			g.samples = append(g.samples, a.Sample.ID)
		}
	}
	var parts []string
	for _, task := range order {
		g := per[task]
		names := g.samples
		if len(names) > 10 {
			names = append(names[:10:10], fmt.Sprintf("… %d more", len(g.samples)-10))
		}
		unit := "attempts"
		if g.attempts == 1 {
			unit = "attempt"
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%d %s)", task, strings.Join(names, ", "), g.attempts, unit))
	}
	return strings.Join(parts, "; ")
}

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
					rep, err := merge(ctx, out, o.Records, mergeOptions{title: o.Title, shards: o.Shards, evalSet: o.EvalSet, getenv: env.Getenv, warn: o.Log, warnf: o.Warn})
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
					shard: o.Shard, title: o.Title, record: o.Record, samplesRamp: o.SamplesRamp, grace: 4 * time.Second}
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

// chatRequest is the built-in chat agent's request body: the whole message
// list when the input is one (inputJSON), else the text as a user message;
// the system prompt first; the model settings (a JSON object) alongside,
// never replacing the model or the messages.
func chatRequest(model, system, input, inputJSON, settings string) ([]byte, error) {
	var msgs []any
	var list []map[string]any
	if err := json.Unmarshal([]byte(inputJSON), &list); err == nil && len(list) > 0 {
		for i, m := range list {
			if r, _ := m["role"].(string); r == "" || m["content"] == nil {
				return nil, fmt.Errorf("STEWARD_INPUT_JSON: message %d has no role or content", i+1)
			}
			msgs = append(msgs, m)
		}
	} else {
		msgs = append(msgs, map[string]any{"role": "user", "content": input})
	}
	if system != "" {
		msgs = append([]any{map[string]any{"role": "system", "content": system}}, msgs...)
	}
	body := map[string]any{}
	if settings != "" {
		if err := json.Unmarshal([]byte(settings), &body); err != nil {
			return nil, fmt.Errorf("STEWARD_MODEL_SETTINGS is not a JSON object: %w", err)
		}
	}
	delete(body, "stream") // this agent reads one JSON reply
	body["model"], body["messages"] = model, msgs
	return json.Marshal(body)
}

func newAgent(env Env) *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Built-in agents for quick starts"}
	var system string
	chat := &cobra.Command{
		Use:   "chat",
		Short: "Send STEWARD_INPUT to the model through the gateway and print the reply",
		Long: `A minimal model-only agent: it sends the sample's input to
OPENAI_BASE_URL/chat/completions with OPENAI_API_KEY (the gateway and the
attempt's token, set by Steward) and prints the reply on stdout. An input
that is a list of chat messages is sent whole (system prompt and history
included); a text input is sent as one user message. --system puts a system
prompt first. The model settings (model.settings: temperature, max_tokens,
…; STEWARD_MODEL_SETTINGS) go with the request. A multiple-choice sample's
input already holds its choices lettered and asks for 'ANSWER: $LETTER' (the
task's choices_template, Inspect's prompt by default), judged by match: choice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base := env.Getenv("OPENAI_BASE_URL")
			if base == "" {
				return exitWith(ExitBadInput, errors.New("OPENAI_BASE_URL is not set: run this agent inside a Steward sandbox"))
			}
			model := env.Getenv("STEWARD_MODEL")
			if model == "" {
				model = "mock"
			}
			body, err := chatRequest(model, system, env.Getenv("STEWARD_INPUT"), env.Getenv("STEWARD_INPUT_JSON"), env.Getenv("STEWARD_MODEL_SETTINGS"))
			if err != nil {
				return exitWith(ExitBadInput, err)
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, strings.TrimSuffix(base, "/")+"/chat/completions", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+env.Getenv("OPENAI_API_KEY"))
			resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
			if err != nil {
				return fmt.Errorf("call the model: %w", err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the model answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
			}
			var out struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
				return fmt.Errorf("read the model's reply: %v", err)
			}
			fmt.Fprintln(env.Stdout, out.Choices[0].Message.Content)
			return nil
		},
	}
	chat.Flags().StringVar(&system, "system", "", "a system prompt")
	cmd.AddCommand(chat)
	return cmd
}
