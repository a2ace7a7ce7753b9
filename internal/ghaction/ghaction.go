// Package ghaction is Steward's GitHub Action edge: it reads the action's
// inputs, runs the eval set through the launch function the CLI supplies,
// then writes the report files, the job summary, annotations and outputs, and
// posts or edits the sticky pull request comment. Nothing else in Steward
// knows about GitHub.
package ghaction

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/steward-evals/steward/internal/clock"
	"github.com/steward-evals/steward/internal/forecast"
	"github.com/steward-evals/steward/internal/report"
	"github.com/steward-evals/steward/internal/secret"
	"github.com/steward-evals/steward/internal/stats"
	"github.com/steward-evals/steward/internal/status"
)

// Exit codes Run returns when it decides the code itself; otherwise it
// returns the launch function's code.
const (
	ExitOK       = 0
	ExitFailed   = 1 // some attempts failed (the launch function decides)
	ExitBadInput = 2 // an input is invalid: nothing ran
	ExitInfra    = 3 // the run could not complete
)

// LaunchOptions is what the action asks the CLI to run.
type LaunchOptions struct {
	EvalSet     string
	Concurrency int // 0: the provider's default
	SamplesRamp string
	BudgetUSD   float64 // 0: no budget
	Rerun       bool
	EarlyExit   bool
	// Confirm runs this many more attempts of every selected sample,
	// numbered after the highest the record holds at the sample's identity
	// (`launch --confirm N`); ConfirmSamples ("task/sample") narrows them.
	Confirm        int
	ConfirmSamples []string
	Shard          string // "i/n" or ""
	Record         string // record root, "" for the default
	Title          string
	// Merge combines the shard records in Records (one record and one report)
	// instead of running anything.
	Merge   bool
	Records []string
	// Shards is how many shard records the merge expects (0: from the
	// records' i/n).
	Shards int
	// Log receives the run's progress lines (the job log). Workflow commands
	// are switched off while it is written: a mask added there would be
	// ignored by the runner (and print the secret), so every secret is
	// masked before the launch, from Env.Secrets.
	Log io.Writer
	// Warn takes a warning the launch wants raised (a shard record left
	// out of the merge): it is written to the log as ::warning:: once
	// workflow commands are back on, with the workspace's paths relative.
	Warn func(msg string)
}

// PruneRequest asks Env.Prune to prune the record at Record (only the runs
// of EvalSet, when set), keeping the newest KeepRuns runs whole and the
// transcripts of the newest KeepTranscripts; Off only measures it.
type PruneRequest struct {
	Record, EvalSet           string
	KeepRuns, KeepTranscripts int
	Off                       bool
}

// PruneSummary is the record's size before and after, and what was
// dropped, in a line.
type PruneSummary struct {
	Before, After int64
	Line          string
}

// MissingShards is implemented by the merge's error when shard records are
// missing: which (i/n), of how many, and what they held ("" unknown). The
// action then says so plainly instead of "the eval set has errors".
type MissingShards interface {
	MissingShards() (missing []string, expected int, held string)
}

// LaunchFunc runs (or merges) and returns the report, the exit code the CLI
// would use, and an error when the run could not complete. A cancelled run
// returns its partial report (Partial set) together with the error.
type LaunchFunc func(ctx context.Context, opts LaunchOptions) (*report.Report, int, error)

// Env is everything Run takes from the process.
type Env struct {
	Getenv func(string) string
	Stdout io.Writer // the job log: workflow commands go here
	Stderr io.Writer
	// HTTPClient talks to the GitHub API (default: a client with a timeout).
	HTTPClient *http.Client
	// Clock times the rate-limit waits and the reporting budget after a
	// cancellation (default: the wall clock).
	Clock clock.Clock
	// Chown changes a path's owner (default os.Lchown; nil in tests that
	// must not) and Owner reads a directory's owner (default: stat).
	Chown func(path string, uid, gid int) error
	Owner func(path string) (uid, gid int, ok bool)
	// Baseline reads the base's results from the record at path (a
	// directory or its record.sqlite): its newest run's report.
	Baseline func(ctx context.Context, path string) (*report.Report, error)
	// Prune prunes the record before it is cached (req.Off: only measures
	// it) and says its size; nil: the record is neither pruned nor measured.
	Prune func(ctx context.Context, req PruneRequest) (PruneSummary, error)
	// Secrets returns the secret values the eval set at path will load (the
	// model key in the variable its api_key_env names); they are masked
	// before anything runs and before workflow commands are switched off.
	Secrets func(evalSet string) []string
	// ReportTimeout bounds the reporting after the run (default 2 minutes).
	// After a cancellation the reporting must end before the runner's kill,
	// which comes 10 s after its SIGINT: CancelBudget is the time from the
	// cancellation to the end of reporting (default 9 s), and the reporting
	// always gets at least a second to write its files.
	ReportTimeout time.Duration
	CancelBudget  time.Duration
	// RateLimitRetries bounds retries of one API call after a rate limit
	// (default 3); MaxRateLimitWait is the longest single wait (default 2 min):
	// a longer limit gives up on the comment rather than hold the job.
	RateLimitRetries int
	MaxRateLimitWait time.Duration
}

func (e *Env) defaults() {
	if e.Getenv == nil {
		e.Getenv = func(string) string { return "" }
	}
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	if e.HTTPClient == nil {
		e.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if e.Clock == nil {
		e.Clock = clock.Real()
	}
	if e.Chown == nil {
		e.Chown = os.Lchown
	}
	if e.Owner == nil {
		e.Owner = func(p string) (int, int, bool) {
			st, err := os.Stat(p)
			if err != nil {
				return 0, 0, false
			}
			s, ok := st.Sys().(*syscall.Stat_t)
			if !ok {
				return 0, 0, false
			}
			return int(s.Uid), int(s.Gid), true
		}
	}
	if e.ReportTimeout <= 0 {
		e.ReportTimeout = 2 * time.Minute
	}
	if e.CancelBudget <= 0 {
		e.CancelBudget = 9 * time.Second
	}
	if e.RateLimitRetries <= 0 {
		e.RateLimitRetries = 3
	}
	if e.MaxRateLimitWait <= 0 {
		e.MaxRateLimitWait = 2 * time.Minute
	}
}

// Output names (action.yml).
const (
	OutTotal       = "total"
	OutPassed      = "passed"
	OutFailed      = "failed"
	OutErrored     = "errored"
	OutSkipped     = "skipped"
	OutPassRate    = "pass-rate"
	OutSpendUSD    = "spend-usd"
	OutSummaryPath = "summary-path"
	OutJUnitPath   = "junit-path"
	OutJSONPath    = "json-path"
	OutReportDir   = "report-dir"
	OutHTMLPath    = "html-path"
	OutInspectDir  = "inspect-dir"
	OutCommentURL  = "comment-url"
	OutPartial     = "partial"
	// OutVerdict is the comparison's verdict (regressed, improved,
	// unchanged, inconclusive; "" without a baseline) and OutVerdictSummary
	// its sentence.
	OutVerdict        = "verdict"
	OutVerdictSummary = "verdict-summary"
	// OutForecastUSD and OutForecastSeconds are the launch's forecast of
	// its spend and wall time (the point; "" when the record had no
	// history of the tasks), OutForecast its line with the range.
	OutForecastUSD     = "forecast-usd"
	OutForecastSeconds = "forecast-seconds"
	OutForecast        = "forecast"
)

// Run is the action's entry point (`steward action`). It returns the exit
// code; it never exits the process.
func Run(ctx context.Context, env Env, launch LaunchFunc) (exitCode int) {
	env.defaults()
	gh := githubactions.New(githubactions.WithWriter(env.Stdout), githubactions.WithGetenv(env.Getenv))
	a := &action{env: env, gh: gh}
	// go-githubactions panics when it cannot write a command or a file; turn
	// that into an infrastructure error rather than a crash.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(env.Stderr, "steward action: %v\n", p)
			exitCode = ExitInfra
		}
	}()

	in, err := ParseInputs(env.Getenv)
	a.mask(in.Token)
	// secret.EnvNames: the variables whose values are masked in the job log
	// whenever they are set, in case anything ever prints them.
	for _, name := range secret.EnvNames {
		if strings.HasPrefix(name, "INPUT_") {
			continue // the action's own inputs: the token is masked above
		}
		a.mask(env.Getenv(name))
	}
	a.workspace = env.Getenv("GITHUB_WORKSPACE")
	if err != nil {
		a.badInput("the action's inputs", err)
		return ExitBadInput
	}
	a.in = in
	// Whatever the action writes in the workspace goes to the workspace's
	// owner, not to the container's root (a self-hosted runner's git clean
	// must be able to remove it).
	defer a.chownWritten()
	if env.Secrets != nil && in.Mode == ModeRun {
		for _, v := range env.Secrets(a.path(in.EvalSet)) {
			a.mask(v)
		}
	}

	records, err := a.expandRecords(in.Records)
	if err != nil {
		a.badInput("the action's inputs", err)
		return ExitBadInput
	}
	opts := LaunchOptions{
		EvalSet: in.EvalSet, Concurrency: in.Concurrency, SamplesRamp: in.SamplesRamp,
		BudgetUSD: in.BudgetUSD, Rerun: in.Rerun, EarlyExit: in.EarlyExit, Shard: in.Shard,
		Record: in.Record, Title: in.Title, Merge: in.Mode == ModeMerge, Records: records, Shards: in.Shards,
		Confirm: in.Confirm, ConfirmSamples: in.ConfirmSamples,
		Log: env.Stdout,
	}
	var warnings []string
	opts.Warn = func(msg string) { warnings = append(warnings, msg) }

	what := "Steward: run " + in.EvalSet
	if opts.Merge {
		what = fmt.Sprintf("Steward: merge %d records", len(records))
	}
	// Note when the run is cancelled: the reporting's deadline counts from it.
	// A context cancelled already is noted here, not by AfterFunc's
	// goroutine, so the budget counts from before the launch.
	var cancelledAt time.Time
	cancelled := make(chan struct{})
	if ctx.Err() != nil {
		cancelledAt = env.Clock.Now()
		close(cancelled)
	} else {
		stopWatch := context.AfterFunc(ctx, func() {
			cancelledAt = env.Clock.Now()
			close(cancelled)
		})
		defer stopWatch()
	}

	gh.Group(what)
	resume := a.stopCommands()
	rep, code, lerr := launch(ctx, opts)
	resume()
	gh.EndGroup()
	if rep != nil {
		a.forecast = rep.Forecast // the first launch's: decide's rounds forecast only themselves
	}
	for _, w := range warnings {
		gh.Warningf("Steward: %s", report.Plain(a.relText(w), 1000))
	}

	if rep == nil {
		if lerr == nil {
			lerr = fmt.Errorf("launch returned no report")
		}
		var ms MissingShards
		if code == ExitBadInput && errors.As(lerr, &ms) {
			a.missingShards(ms)
			return code
		}
		if code == ExitBadInput {
			a.badInput(in.EvalSet, lerr)
			return code
		}
		gh.Errorf("%s", report.Plain(a.relText(lerr.Error()), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
		return code
	}
	if rep.Title == "" {
		rep.Title = in.Title
	}
	a.relativize(rep)
	a.decideWith = a.in.Decide
	if !a.in.Decide.Set && rep.Decide != nil {
		d := rep.Decide
		a.decideWith = Decide{Rounds: d.Rounds, PerRound: d.PerRound, Attempts: d.Attempts, USD: d.USD, Time: d.Time}
	}
	a.compare(ctx, rep)
	rep, code = a.decide(ctx, opts, launch, rep, code)
	a.prune(ctx, rep)

	// Reporting goes on after a cancellation, on a context of its own, short
	// enough to finish before the runner's kill.
	timeout := env.ReportTimeout
	if ctx.Err() != nil {
		<-cancelled // AfterFunc has run (or is running) once ctx is done
		timeout = max(env.CancelBudget-clock.Since(env.Clock, cancelledAt), time.Second)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()

	if err := a.report(rctx, rep); err != nil {
		gh.Errorf("%s", report.Plain(err.Error(), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
	}
	if lerr != nil && (rep.Partial || errors.Is(lerr, context.Canceled)) && ctx.Err() != nil {
		c := rep.Counts
		gh.Noticef("Steward: the run was cancelled. %d of %d attempts finished (%d passed), %d were interrupted and %d never started; "+
			"the partial report is in the job summary%s.", c.Passed+c.Failed+c.Errored+c.Infra, c.Total, c.Passed, c.Interrupted, c.Skipped, map[bool]string{true: " and the pull request comment", false: ""}[a.in.Comment])
		lerr = nil
	}
	if lerr != nil {
		gh.Errorf("%s", report.Plain(a.relText(lerr.Error()), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
	}
	return a.failOn(rep, code)
}

// prune prunes the record before the workflow caches it (the prune input)
// and puts its size in the job summary. It never fails the run: a record
// that could not be pruned is cached as it is, with a warning. A cancelled
// or partial run is not pruned (the reporting's time is short).
func (a *action) prune(ctx context.Context, rep *report.Report) {
	if a.env.Prune == nil || rep.Partial || ctx.Err() != nil {
		return
	}
	rec := a.in.Record
	if rec == "" {
		rec = ".steward"
	}
	req := PruneRequest{Record: a.path(rec), KeepRuns: a.in.Prune.KeepRuns, KeepTranscripts: a.in.Prune.KeepTranscripts, Off: a.in.Prune.Off}
	if a.in.Mode == ModeRun {
		req.EvalSet = a.path(a.in.EvalSet)
	}
	a.gh.Group("Steward: prune the record")
	res, err := a.env.Prune(ctx, req)
	where := "`" + report.Plain(a.rel(filepath.Join(req.Record, "record.sqlite")), 300) + "`"
	switch {
	case err != nil:
		a.gh.EndGroup()
		a.gh.Warningf("Steward: the record was not pruned: %s", report.Plain(a.relText(err.Error()), 500))
		a.summaryNotes = append(a.summaryNotes, "**Record** "+where+": not pruned ("+report.MD(a.relText(err.Error()), 300)+").")
		return
	case req.Off:
		a.gh.Infof("The record is %s (prune: false)", humanBytes(res.After))
		a.summaryNotes = append(a.summaryNotes, fmt.Sprintf("**Record** %s: %s (not pruned: `prune: false`).", where, humanBytes(res.After)))
	default:
		a.gh.Infof("%s", report.Plain(res.Line, 1000))
		a.summaryNotes = append(a.summaryNotes, fmt.Sprintf("**Record** %s: %s after pruning (was %s; keeps %d runs whole and the transcripts of %d).",
			where, humanBytes(res.After), humanBytes(res.Before), req.KeepRuns, req.KeepTranscripts))
	}
	a.gh.EndGroup()
}

// humanBytes shows a size as people read it: 512 B, 3.4 KiB, 12.0 MiB.
func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}

// compare judges the run against the baseline record, when one is given.
// A baseline that cannot be read is a warning: the first run on a new base
// has none.
func (a *action) compare(ctx context.Context, rep *report.Report) {
	if a.in.Baseline == "" || a.env.Baseline == nil || a.in.Mode == ModeMerge && rep.Partial {
		return
	}
	base, err := a.env.Baseline(ctx, a.path(a.in.Baseline))
	if err != nil {
		a.gh.Warningf("Steward: no comparison with the base: %s", report.Plain(a.relText(err.Error()), 500))
		a.notes = append(a.notes, "_No comparison with the base: "+report.MD(a.relText(err.Error()), 300)+"._")
		return
	}
	a.relativize(base)
	a.base = base
	rep.Comparison = report.Compare(rep, base, a.in.Baseline, a.compareOptions(1))
}

// compareOptions are the verdict's settings at look (1 = the planned run;
// each decide round is one more look of the Rounds+1 fixed in advance).
func (a *action) compareOptions(look int) report.CompareOptions {
	j := a.in.Judge
	o := report.CompareOptions{Confidence: j.Confidence, MinEffect: j.MinEffect, MinEffectSet: true, Look: look, Looks: 1,
		DecideExtras: look > 1}
	if a.decideWith.Rounds > 0 {
		o.Looks = a.decideWith.Rounds + 1
	}
	if a.base != nil {
		o.Flaky = a.base.KnownFlaky
	}
	return o
}

// decide spends extra attempts on an inconclusive verdict: each round runs
// PerRound more attempts of every uncertain sample of the inconclusive
// tasks (launch --confirm), then judges again at the next look, until the
// verdict is decided or a limit (rounds, attempts, USD, time) is reached.
// It returns the last round's report and exit code (the planned attempts
// carried, the extra ones beside them).
func (a *action) decide(ctx context.Context, opts LaunchOptions, launch LaunchFunc, rep *report.Report, code int) (*report.Report, int) {
	d := a.decideWith
	if d.Rounds == 0 || rep.Comparison == nil || rep.Partial || ctx.Err() != nil || opts.Merge {
		return rep, code
	}
	start := a.env.Clock.Now()
	var rounds []report.DecideRound
	stop := ""
	spentAttempts, spentUSD := 0, 0.0
	for round := 1; rep.Comparison.Verdict == stats.Inconclusive; round++ {
		var samples []string
		for _, t := range rep.Comparison.Tasks {
			if t.Verdict != stats.Inconclusive || t.Test == nil {
				continue
			}
			for _, s := range t.Uncertain {
				samples = append(samples, t.Name+"/"+s)
			}
		}
		left := d.Attempts - spentAttempts
		switch {
		case round > d.Rounds:
			stop = fmt.Sprintf("all %d rounds spent", d.Rounds)
		case len(samples) == 0:
			stop = "no sample is uncertain: more attempts cannot move the verdict (more samples can)"
		case left < d.PerRound:
			stop = fmt.Sprintf("the %d extra attempts are spent", d.Attempts)
		case d.USD > 0 && spentUSD >= d.USD:
			stop = "the " + strconv.FormatFloat(d.USD, 'f', 2, 64) + " USD for extra attempts is spent"
		case d.Time > 0 && clock.Since(a.env.Clock, start) >= d.Time:
			stop = "the time for extra attempts is spent (" + d.Time.String() + ")"
		case ctx.Err() != nil:
			stop = "cancelled"
		}
		if stop != "" {
			break
		}
		if len(samples)*d.PerRound > left {
			samples = samples[:left/d.PerRound]
		}
		o := opts
		o.Confirm, o.ConfirmSamples = d.PerRound, samples
		if d.USD > 0 {
			o.BudgetUSD = d.USD - spentUSD
			if opts.BudgetUSD > 0 {
				o.BudgetUSD = min(o.BudgetUSD, opts.BudgetUSD)
			}
		}
		a.gh.Group(fmt.Sprintf("Steward: decide, round %d: %d more attempts on each of %d uncertain samples", round, d.PerRound, len(samples)))
		resume := a.stopCommands()
		next, ncode, err := launch(ctx, o)
		resume()
		a.gh.EndGroup()
		if next == nil || err != nil {
			msg := "no report"
			if err != nil {
				msg = err.Error()
			}
			a.gh.Warningf("Steward: decide round %d did not complete: %s", round, report.Plain(msg, 500))
			stop = "a round did not complete"
			break
		}
		if next.Title == "" {
			next.Title = rep.Title
		}
		a.relativize(next)
		next.Comparison = report.Compare(next, a.base, a.in.Baseline, a.compareOptions(round+1))
		next.Comparison.KeepDecided(rep.Comparison)
		n := len(samples) * d.PerRound
		spentAttempts += n
		spentUSD += next.Spend.USD
		rounds = append(rounds, report.DecideRound{Round: round, Samples: len(samples), Attempts: n, USD: next.Spend.USD, Verdict: next.Comparison.Verdict})
		rep, code = next, ncode
		if next.Partial {
			stop = "the round was cut short"
			break
		}
	}
	if len(rounds) > 0 || stop != "" {
		rep.Comparison.Rounds = rounds
		if rep.Comparison.Verdict == stats.Inconclusive {
			rep.Comparison.DecideStop = stop
		}
	}
	return rep, code
}

// failOn decides the exit from the results and the fail-on input. Bad input,
// infrastructure errors and cancellation keep their codes.
func (a *action) failOn(rep *report.Report, code int) int {
	if code != ExitOK && code != ExitFailed {
		return code
	}
	f := a.in.FailOn
	var want int
	switch f.Mode {
	case FailOnNever, FailOnErrors:
		want = ExitOK
	case FailOnRegression:
		c := rep.Comparison
		if c == nil {
			a.gh.Warningf("Steward: fail-on: regression needs a baseline record; failing on failures instead")
			return code
		}
		switch c.Verdict {
		case stats.Regressed:
			a.gh.Errorf("Steward: %s", report.Plain(c.Summary, 2000))
			want = ExitFailed
		case stats.Inconclusive:
			what := "fail"
			if !a.in.Judge.FailInconclusive {
				what = "pass"
			}
			a.gh.Warningf("Steward: the verdict is inconclusive (on-inconclusive: %s). %s", what, report.Plain(c.Summary, 2000))
			if a.in.Judge.FailInconclusive {
				want = ExitFailed
			}
		}
	case FailOnPassRate:
		if rate := scoreOf(rep); rate < f.MinRate {
			a.gh.Errorf("Steward: pass rate %.1f%% is below %.1f%% (fail-on: %s)", 100*rate, 100*f.MinRate, report.Plain(f.Original, 50))
			want = ExitFailed
		}
	default:
		return code
	}
	if want != code {
		a.gh.Noticef("Steward: exit %d instead of %d (fail-on: %s)", want, code, report.Plain(f.Original, 50))
	}
	return want
}

// relativize shows the eval set's and the samples' paths relative to the
// workspace: the container's /github/workspace means nothing on the runner
// or in the pull request. (The comment's marker is built from the relative
// path too, so it is the same wherever the workspace is mounted.)
func (a *action) relativize(rep *report.Report) {
	if a.workspace == "" {
		return
	}
	if rep.EvalSet != "" {
		rep.EvalSet = a.rel(a.path(rep.EvalSet))
	}
	for i := range rep.Attempts {
		src := rep.Attempts[i].Source
		if !filepath.IsAbs(src) {
			continue
		}
		if file, line := report.SplitSource(src); file != "" {
			rel := a.rel(file)
			if line > 0 {
				rel += ":" + strconv.Itoa(line)
			}
			rep.Attempts[i].Source = rel
		}
	}
}

// locatedRe matches "file:line: message" and "file:line:col: message".
var locatedRe = regexp.MustCompile(`^(?:steward: )?([^:\s][^:]*):([0-9]+):(?:[0-9]+:)? (.+)$`)

// badInput reports invalid input: one error annotation per error, at its
// file and line when the error names them, and a job summary that says what
// was wrong (nothing ran).
func (a *action) badInput(what string, err error) {
	var items []string
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		line = strings.TrimSpace(line)
		if locatedRe.FindStringSubmatch(line) == nil {
			line = a.relText(line)
		}
		if line == "" {
			continue
		}
		if m := locatedRe.FindStringSubmatch(line); m != nil {
			file := a.rel(a.path(m[1]))
			a.gh.WithFieldsMap(map[string]string{
				"file": report.Plain(file, 500), "line": m[2], "title": "Steward: bad input",
			}).Errorf("%s", report.Plain(m[3], 1000))
			items = append(items, fmt.Sprintf("- `%s:%s` %s", report.Plain(file, 300), m[2], report.MD(m[3], 500)))
			continue
		}
		a.gh.WithFieldsMap(map[string]string{"title": "Steward: bad input"}).Errorf("%s", report.Plain(line, 1000))
		items = append(items, "- "+report.MD(strings.TrimPrefix(line, "steward: "), 500))
	}
	if a.env.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	if what != "the action's inputs" {
		what = "`" + report.Plain(a.rel(a.path(what)), 300) + "`"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Steward: bad input\n\nNothing ran: %s %s %d error(s). Fix them and push again.\n\n",
		what, map[bool]string{true: "has", false: "have"}[!strings.HasPrefix(what, "the ")], len(items))
	b.WriteString(strings.Join(items, "\n") + "\n")
	a.gh.AddStepSummary(b.String())
}

// missingShards reports a merge that lacks shard records, plainly: which
// shards, of how many, what they held, and what to do; nothing was merged.
func (a *action) missingShards(ms MissingShards) {
	missing, n, held := ms.MissingShards()
	which := "shard " + strings.Join(missing, ", ")
	if len(missing) > 1 {
		which = "shards " + strings.Join(missing, ", ")
	}
	msg := fmt.Sprintf("The merge has no record of %s (%d of %d shards missing): did the job fail before it uploaded its record, or was the artifact not downloaded? Nothing was merged.",
		which, len(missing), n)
	if held != "" {
		msg += " Not run: " + held + "."
	}
	a.gh.WithFieldsMap(map[string]string{"title": "Steward: shard records missing"}).Errorf("%s", report.Plain(msg, 2000))
	if a.env.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Steward: shard records missing\n\nNothing was merged: %d shards were expected and the merge has no record of **%s**. "+
		"Did the job fail before it uploaded its record, or was the artifact not downloaded? Re-run the failed shard jobs.\n",
		n, report.MD(strings.Join(missing, ", "), 300))
	if held != "" {
		fmt.Fprintf(&b, "\nWhat the missing shards held (not run): %s\n", report.MD(held, 2000))
	}
	a.gh.AddStepSummary(b.String())
}

// chownWritten gives what the action wrote in the workspace (the record and
// report directories, and the directories it created to hold them) to the
// workspace's owner. The container runs as root; the runner's workspace
// belongs to the runner's user.
func (a *action) chownWritten() {
	if a.workspace == "" || a.env.Chown == nil {
		return
	}
	uid, gid, ok := a.env.Owner(a.workspace)
	if !ok {
		return
	}
	ws := filepath.Clean(a.workspace)
	for _, p := range []string{a.in.Record, a.in.ReportDir} {
		if p == "" {
			continue
		}
		dir := filepath.Clean(a.path(p))
		if r, err := filepath.Rel(ws, dir); err != nil || r == "." || strings.HasPrefix(r, "..") {
			continue // outside the workspace: not ours to change
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				_ = a.env.Chown(p, uid, gid)
			}
			return nil
		})
		for d := filepath.Dir(dir); d != ws && strings.HasPrefix(d, ws+string(filepath.Separator)); d = filepath.Dir(d) {
			_ = a.env.Chown(d, uid, gid)
		}
	}
}

type action struct {
	env       Env
	gh        *githubactions.Action
	in        Inputs
	workspace string
	notes     []string // for the summary and the comment
	// summaryNotes are for the summary alone (the record's size).
	summaryNotes []string
	// base is the baseline's report, once read (compare).
	base *report.Report
	// forecast is what the first launch predicted (nil: nothing known).
	forecast *forecast.Forecast
	// masked are the values already registered as masks (each once).
	masked map[string]bool
	// decideWith is the decide input, or the eval set's decide: when the
	// input is not set.
	decideWith Decide
}

func (a *action) mask(secret string) {
	secret = strings.TrimSpace(secret)
	if len(secret) < 4 { // masking "a" would star every a in the log
		return
	}
	for _, line := range strings.Split(secret, "\n") {
		if line = strings.TrimSpace(line); line != "" && !a.masked[line] {
			if a.masked == nil {
				a.masked = map[string]bool{}
			}
			a.masked[line] = true
			a.gh.AddMask(line)
		}
	}
}

// stopCommands stops the runner from reading workflow commands in what
// follows (eval output in the log could otherwise set outputs or add masks
// and annotations) and returns the function that resumes it.
func (a *action) stopCommands() func() {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return func() {}
	}
	tok := "steward-" + hex.EncodeToString(b[:])
	a.gh.IssueCommand(&githubactions.Command{Name: "stop-commands", Message: tok})
	return func() { fmt.Fprintf(a.env.Stdout, "::%s::\n", tok) }
}

// path resolves a path from an input against the workspace.
func (a *action) path(p string) string {
	if filepath.IsAbs(p) || a.workspace == "" {
		return p
	}
	return filepath.Join(a.workspace, p)
}

// rel shows a path the way later steps (running outside the container, in the
// workspace) can use it: relative to the workspace when inside it.
func (a *action) rel(p string) string {
	if a.workspace == "" {
		return p
	}
	if r, err := filepath.Rel(a.workspace, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// relText shows the workspace's paths in a message (a warning, an error)
// relative to it: "/github/workspace/shards/x" means nothing on the runner
// or in the pull request, "shards/x" does.
func (a *action) relText(msg string) string {
	ws := strings.TrimSuffix(a.workspace, "/")
	if ws == "" || ws == "." {
		return msg
	}
	msg = strings.ReplaceAll(msg, ws+"/", "")
	return strings.ReplaceAll(msg, ws, ".")
}

func (a *action) expandRecords(pats []string) ([]string, error) {
	var out []string
	for _, p := range pats {
		if !strings.ContainsAny(p, "*?[") {
			out = append(out, a.path(p))
			continue
		}
		m, err := filepath.Glob(a.path(p))
		if err != nil {
			return nil, fmt.Errorf("input records: bad pattern %q: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("input records: %q matches nothing (did the download step run?)", p)
		}
		out = append(out, m...)
	}
	return out, nil
}

func writeFile(path string, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// report writes everything the run reports, in an order that loses the
// least if time runs out: files, log table, annotations, comment, summary,
// outputs.
func (a *action) report(ctx context.Context, rep *report.Report) error {
	gh := a.gh
	dir := a.path(a.in.ReportDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report dir: %w", err)
	}
	summaryPath := filepath.Join(dir, "summary.md")
	commentPath := filepath.Join(dir, "comment.md")
	// Every format with a file (report.Formats), but markdown: the action
	// writes it as summary.md, with the run's notes, below.
	for _, f := range report.Formats {
		if f.File == "" || f.Render == nil || f.Name == "markdown" {
			continue
		}
		if err := writeFile(filepath.Join(dir, f.File), func(w io.Writer) error { return f.Render(w, rep) }); err != nil {
			return err
		}
	}
	fileOf := func(format string) string {
		f, _ := report.LookupFormat(format)
		return filepath.Join(dir, f.File)
	}
	jsonPath, junitPath, htmlPath := fileOf("json"), fileOf("junit"), fileOf("html")
	inspectDir := a.writeInspect(dir, rep)

	gh.Group("Steward: results")
	resume := a.stopCommands()
	if err := report.Terminal(a.env.Stdout, rep, report.TerminalOptions{NoPlan: false}); err != nil {
		resume()
		gh.EndGroup()
		return err
	}
	resume()
	gh.EndGroup()

	a.annotate(rep)

	notes := append(append([]string(nil), a.notes...), a.summaryNotes...)
	summaryURL := a.summaryURL()
	// The comment, like the summary, points at the HTML report.
	body := report.Comment(rep, report.CommentOptions{SummaryURL: summaryURL, Notes: append(append([]string(nil), a.notes...), htmlNote(summaryURL))})
	if err := os.WriteFile(commentPath, []byte(body), 0o644); err != nil {
		return fmt.Errorf("write comment.md: %w", err)
	}
	commentURL, note := a.comment(ctx, rep, body)
	if note != "" {
		notes = append(notes, note)
	}

	notes = append(notes, htmlNote(summaryURL))
	var md bytes.Buffer
	if err := report.Markdown(&md, rep, report.MarkdownOptions{Notes: notes}); err != nil {
		return err
	}
	if err := os.WriteFile(summaryPath, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write summary.md: %w", err)
	}
	if a.env.Getenv("GITHUB_STEP_SUMMARY") != "" {
		gh.AddStepSummary(md.String())
	} else {
		gh.Infof("GITHUB_STEP_SUMMARY is not set: the summary is in %s", a.rel(summaryPath))
	}

	if a.env.Getenv("GITHUB_OUTPUT") == "" {
		gh.Infof("GITHUB_OUTPUT is not set: no outputs written")
		return nil
	}
	c := rep.Counts
	verdict, summary := "", ""
	if rep.Comparison != nil {
		verdict, summary = string(rep.Comparison.Verdict), report.Plain(rep.Comparison.Summary, 2000)
	}
	outputs := []struct{ k, v string }{
		{OutTotal, strconv.Itoa(c.Total)},
		{OutPassed, strconv.Itoa(c.Passed)},
		{OutFailed, strconv.Itoa(c.Failed)},
		{OutErrored, strconv.Itoa(c.Errored + c.Infra + c.Interrupted)},
		{OutSkipped, strconv.Itoa(c.Skipped)},
		{OutPassRate, passRate(rep)},
		{OutSpendUSD, strconv.FormatFloat(rep.Spend.USD, 'f', 4, 64)},
		{OutSummaryPath, a.rel(summaryPath)},
		{OutJUnitPath, a.rel(junitPath)},
		{OutJSONPath, a.rel(jsonPath)},
		{OutReportDir, a.rel(dir)},
		{OutHTMLPath, a.rel(htmlPath)},
		{OutInspectDir, inspectDir},
		{OutCommentURL, commentURL},
		{OutPartial, strconv.FormatBool(rep.Partial)},
		{OutVerdict, verdict},
		{OutVerdictSummary, summary},
	}
	fusd, fsec, fline := "", "", ""
	if f := a.forecast; f != nil && f.Runs > 0 {
		fusd, fsec, fline = strconv.FormatFloat(f.USD.Point, 'f', 4, 64), strconv.FormatFloat(f.Seconds.Point, 'f', 0, 64), f.String()
	}
	outputs = append(outputs, struct{ k, v string }{OutForecastUSD, fusd}, struct{ k, v string }{OutForecastSeconds, fsec},
		struct{ k, v string }{OutForecast, fline})
	for _, o := range outputs {
		gh.SetOutput(o.k, o.v)
	}
	return nil
}

// writeInspect writes the run as one Inspect log per task into
// report-dir/inspect (inspect view --log-dir opens it) and returns that
// directory, relative to the workspace; "" when the inspect input is off.
// A failed export is a warning: the other reports stand.
func (a *action) writeInspect(dir string, rep *report.Report) string {
	if a.in.Inspect == "" {
		return ""
	}
	opts, _ := report.InspectOptionsFor(a.path(a.in.EvalSet), a.env.Getenv) // without it, inputs from the transcripts
	opts.Format = a.in.Inspect
	out := filepath.Join(dir, "inspect")
	if _, err := report.WriteInspect(out, rep, opts); err != nil {
		a.gh.Warningf("Steward: the Inspect logs were not written: %s", report.Plain(a.relText(err.Error()), 500))
		return ""
	}
	return a.rel(out)
}

// HTMLArtifact is the artifact name the documented workflows upload
// report-dir under; the summary points there for report.html.
const HTMLArtifact = "steward-report"

// htmlNote points the summary at the HTML report (every attempt with its
// transcript), which the workflow uploads as an artifact of this run.
func htmlNote(runURL string) string {
	where := "this workflow run"
	if runURL != "" {
		where = "[this workflow run](" + runURL + ")"
	}
	return "**Full report** with every attempt's model transcript: `report.html` in the `" + HTMLArtifact + "` artifact of " + where + "."
}

// summaryURL links to this workflow run, where the job summary is.
func (a *action) summaryURL() string {
	server := a.env.Getenv("GITHUB_SERVER_URL")
	repo := a.env.Getenv("GITHUB_REPOSITORY")
	run := a.env.Getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || run == "" {
		return ""
	}
	if _, err := strconv.ParseInt(run, 10, 64); err != nil {
		return ""
	}
	return strings.TrimSuffix(server, "/") + "/" + repo + "/actions/runs/" + run
}

// Annotation caps: GitHub shows at most 10 of each kind per step.
const maxAnnotations = 10

// annotate adds an error annotation per failed attempt and a warning per
// errored one, at the sample's file and line, up to GitHub's display limit.
func (a *action) annotate(rep *report.Report) {
	var errs, warns, moreErrs, moreWarns int
	for _, row := range rep.Attempts {
		var kind string
		switch row.Status {
		case status.Failed:
			kind = "error"
		case status.Errored, status.Infra, status.Interrupted:
			kind = "warning"
		default:
			continue
		}
		if kind == "error" && errs == maxAnnotations {
			moreErrs++
			continue
		}
		if kind == "warning" && warns == maxAnnotations {
			moreWarns++
			continue
		}
		fields := map[string]string{
			"title": report.Plain(fmt.Sprintf("Steward: %s/%s #%d %s", row.Task, row.Sample, row.Attempt, row.Status), 200),
		}
		if file, line := report.SplitSource(row.Source); file != "" {
			fields["file"] = report.Plain(a.rel(a.path(file)), 500)
			if line > 0 {
				fields["line"] = strconv.Itoa(line)
			}
		}
		reason := row.Reason
		if reason == "" {
			reason = row.Explanation
		}
		if reason == "" {
			reason = string(row.Status)
		}
		msg := report.Plain(reason, 1000)
		if kind == "error" {
			a.gh.WithFieldsMap(fields).Errorf("%s", msg)
			errs++
		} else {
			a.gh.WithFieldsMap(fields).Warningf("%s", msg)
			warns++
		}
	}
	if moreErrs+moreWarns > 0 {
		a.gh.Noticef("%d more failed and %d more errored attempts are not annotated: see the job summary", moreErrs, moreWarns)
	}
}

// scoreOf is the run's pass rate: the mean sample score under each task's
// reducer (0 when nothing was judged).
func scoreOf(rep *report.Report) float64 {
	if rep.Score == nil {
		return 0
	}
	return rep.Score.Mean
}

// passRate is the pass-rate output: the score, with 4 decimals.
func passRate(rep *report.Report) string {
	return strconv.FormatFloat(scoreOf(rep), 'f', 4, 64)
}
