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
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/steward-evals/steward/internal/report"
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
	Shard       string // "i/n" or ""
	Record      string // record root, "" for the default
	Title       string
	// Merge combines the shard records in Records (one record and one report)
	// instead of running anything.
	Merge   bool
	Records []string
	// Log receives the run's progress lines (the job log).
	Log io.Writer
	// Mask hides a secret the launch loads (the model API key) in the job log.
	Mask func(secret string)
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
	// Sleep waits out rate limits (default: a timer honouring ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock (default time.Now).
	Now func() time.Time
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
	if e.Sleep == nil {
		e.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	if e.Now == nil {
		e.Now = time.Now
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
	OutCommentURL  = "comment-url"
	OutPartial     = "partial"
)

// secretEnv are variables whose values are masked in the job log whenever
// they are set, in case anything ever prints them.
var secretEnv = []string{
	"GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "STEWARD_API_KEY",
}

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
	for _, name := range secretEnv {
		a.mask(env.Getenv(name))
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			gh.Errorf("%s", line)
		}
		return ExitBadInput
	}
	a.in = in
	a.workspace = env.Getenv("GITHUB_WORKSPACE")

	records, err := a.expandRecords(in.Records)
	if err != nil {
		gh.Errorf("%s", err)
		return ExitBadInput
	}
	opts := LaunchOptions{
		EvalSet: in.EvalSet, Concurrency: in.Concurrency, SamplesRamp: in.SamplesRamp,
		BudgetUSD: in.BudgetUSD, Rerun: in.Rerun, EarlyExit: in.EarlyExit, Shard: in.Shard,
		Record: in.Record, Title: in.Title, Merge: in.Mode == ModeMerge, Records: records,
		Log: env.Stdout, Mask: a.mask,
	}

	what := "Steward: run " + in.EvalSet
	if opts.Merge {
		what = fmt.Sprintf("Steward: merge %d records", len(records))
	}
	// Note when the run is cancelled: the reporting's deadline counts from it.
	var cancelledAt time.Time
	cancelled := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		cancelledAt = env.Now()
		close(cancelled)
	})
	defer stopWatch()

	gh.Group(what)
	resume := a.stopCommands()
	rep, code, lerr := launch(ctx, opts)
	resume()
	gh.EndGroup()

	if rep == nil {
		if lerr == nil {
			lerr = fmt.Errorf("launch returned no report")
		}
		gh.Errorf("%s", report.Plain(lerr.Error(), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
		return code
	}
	if rep.Title == "" {
		rep.Title = in.Title
	}

	// Reporting goes on after a cancellation, on a context of its own, short
	// enough to finish before the runner's kill.
	timeout := env.ReportTimeout
	if ctx.Err() != nil {
		<-cancelled // AfterFunc has run (or is running) once ctx is done
		timeout = max(env.CancelBudget-env.Now().Sub(cancelledAt), time.Second)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()

	if err := a.report(rctx, rep); err != nil {
		gh.Errorf("%s", report.Plain(err.Error(), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
	}
	if lerr != nil {
		gh.Errorf("%s", report.Plain(lerr.Error(), 2000))
		if code == ExitOK {
			code = ExitInfra
		}
	}
	return code
}

type action struct {
	env       Env
	gh        *githubactions.Action
	in        Inputs
	workspace string
}

func (a *action) mask(secret string) {
	secret = strings.TrimSpace(secret)
	if len(secret) < 4 { // masking "a" would star every a in the log
		return
	}
	for _, line := range strings.Split(secret, "\n") {
		if line = strings.TrimSpace(line); line != "" {
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
	jsonPath := filepath.Join(dir, "report.json")
	junitPath := filepath.Join(dir, "junit.xml")
	summaryPath := filepath.Join(dir, "summary.md")
	commentPath := filepath.Join(dir, "comment.md")
	if err := writeFile(jsonPath, func(w io.Writer) error { return report.JSON(w, rep) }); err != nil {
		return err
	}
	if err := writeFile(junitPath, func(w io.Writer) error { return report.JUnit(w, rep) }); err != nil {
		return err
	}
	htmlPath := filepath.Join(dir, "report.html")
	if err := writeFile(htmlPath, func(w io.Writer) error { return report.HTML(w, rep, report.HTMLOptions{}) }); err != nil {
		return err
	}

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

	var notes []string
	summaryURL := a.summaryURL()
	body := report.Comment(rep, report.CommentOptions{SummaryURL: summaryURL})
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
	outputs := []struct{ k, v string }{
		{OutTotal, strconv.Itoa(c.Total)},
		{OutPassed, strconv.Itoa(c.Passed)},
		{OutFailed, strconv.Itoa(c.Failed)},
		{OutErrored, strconv.Itoa(c.Errored + c.Infra + c.Interrupted)},
		{OutSkipped, strconv.Itoa(c.Skipped)},
		{OutPassRate, strconv.FormatFloat(c.PassRate(), 'f', 4, 64)},
		{OutSpendUSD, strconv.FormatFloat(rep.Spend.USD, 'f', 4, 64)},
		{OutSummaryPath, a.rel(summaryPath)},
		{OutJUnitPath, a.rel(junitPath)},
		{OutJSONPath, a.rel(jsonPath)},
		{OutReportDir, a.rel(dir)},
		{OutHTMLPath, a.rel(htmlPath)},
		{OutCommentURL, commentURL},
		{OutPartial, strconv.FormatBool(rep.Partial)},
	}
	for _, o := range outputs {
		gh.SetOutput(o.k, o.v)
	}
	return nil
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
		case report.StatusFailed:
			kind = "error"
		case report.StatusErrored, report.StatusInfra, report.StatusInterrupted:
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
			reason = row.Status
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
