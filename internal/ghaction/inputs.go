package ghaction

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/steward-evals/steward/internal/shard"
)

// Inputs are the action's inputs (action.yml), parsed and checked.
type Inputs struct {
	EvalSet     string
	Concurrency int
	SamplesRamp string
	BudgetUSD   float64
	Rerun       bool
	EarlyExit   bool
	Shard       string
	Record      string
	Title       string
	Token       string
	Comment     bool
	Mode        string // "run" or "merge"
	Records     []string
	ReportDir   string
	PRNumber    int // 0: from the event
	Shards      int // merge mode: shards expected; 0: from the records
	Baseline    string
	FailOn      FailOn
	// Judge holds the verdict's settings (confidence, min-effect,
	// on-inconclusive) and Decide the extra attempts an inconclusive
	// verdict may spend (decide input; zero: off).
	Judge  Judge
	Decide Decide
	// Confirm runs this many more attempts of every sample (or of
	// ConfirmSamples, "task/sample"): the nightly evidence job.
	Confirm        int
	ConfirmSamples []string
	// Prune says what the record keeps when the action prunes it before it
	// is cached (prune input; default on, the record package's defaults).
	Prune Prune
	// Inspect is the encoding of the Inspect logs written under
	// report-dir/inspect ("eval" or "json"); "" writes none (inspect input).
	Inspect string
}

// Prune is the prune input: Off, or what to keep.
type Prune struct {
	Off             bool
	KeepRuns        int
	KeepTranscripts int
}

// Default prune settings (record.DefaultKeepRuns, DefaultKeepTranscripts).
const (
	defaultPruneRuns        = 10
	defaultPruneTranscripts = 3
)

// parsePrune reads the prune input: "true" (the defaults), "false", or
// settings "runs=N,transcripts=M".
func parsePrune(v string) (Prune, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	p := Prune{KeepRuns: defaultPruneRuns, KeepTranscripts: defaultPruneTranscripts}
	switch v {
	case "", "true", "on", "yes":
		return p, nil
	case "false", "off", "no":
		return Prune{Off: true}, nil
	}
	for _, kv := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' }) {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		switch {
		case !ok || err != nil:
			return p, fmt.Errorf("input prune: %q is not true, false or runs=N,transcripts=M", v)
		case strings.TrimSpace(k) == "runs" && n >= 1:
			p.KeepRuns = n
		case strings.TrimSpace(k) == "transcripts" && n >= 0:
			p.KeepTranscripts = n
		default:
			return p, fmt.Errorf("input prune: %q: runs is at least 1, transcripts at least 0, and nothing else is a setting", strings.TrimSpace(kv))
		}
	}
	return p, nil
}

// Judge is how the comparison with the base decides.
type Judge struct {
	Confidence float64 // 0.95
	MinEffect  float64 // 0.05 (5 points)
	// FailInconclusive: on-inconclusive: fail (default pass, with a warning).
	FailInconclusive bool
}

// Decide bounds the extra attempts an inconclusive verdict may spend: at
// most Rounds rounds of PerRound attempts on each uncertain sample, until
// Attempts, USD or Time runs out. Rounds 0 is off.
type Decide struct {
	// Set: the input was given (even as "off"); unset, the eval set's
	// decide: applies.
	Set      bool
	Rounds   int
	PerRound int
	Attempts int
	USD      float64
	Time     time.Duration
}

// parseDecide reads the decide input: "off", "on" (defaults), or
// comma-separated settings: rounds=3, per-round=2, attempts=200, usd=2,
// time=15m.
func parseDecide(v string) (Decide, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	def := Decide{Set: true, Rounds: 3, PerRound: 2, Attempts: 200}
	switch v {
	case "":
		return Decide{}, nil
	case "off", "false", "no":
		return Decide{Set: true}, nil
	case "on", "true", "yes":
		return def, nil
	}
	d := def
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		bad := func(want string) error {
			return fmt.Errorf("input decide: %s=%q is not %s (e.g. decide: rounds=3,per-round=2,attempts=200,usd=2,time=15m)", k, val, want)
		}
		if !ok {
			return Decide{}, fmt.Errorf("input decide: %q is not key=value (rounds, per-round, attempts, usd, time), on or off", kv)
		}
		switch k {
		case "rounds", "per-round", "attempts":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 1_000_000 {
				return Decide{}, bad("a whole number ≥ 1")
			}
			switch k {
			case "rounds":
				if n > 10 {
					return Decide{}, bad("at most 10 rounds")
				}
				d.Rounds = n
			case "per-round":
				d.PerRound = n
			default:
				d.Attempts = n
			}
		case "usd":
			x, err := strconv.ParseFloat(strings.TrimPrefix(val, "$"), 64)
			if err != nil || x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return Decide{}, bad("an amount of USD above 0")
			}
			d.USD = x
		case "time":
			t, err := time.ParseDuration(val)
			if err != nil || t <= 0 {
				return Decide{}, bad("a duration such as 15m")
			}
			d.Time = t
		default:
			return Decide{}, fmt.Errorf("input decide: unknown setting %q (rounds, per-round, attempts, usd, time)", k)
		}
	}
	return d, nil
}

// parseJudge reads confidence, min-effect and on-inconclusive.
func parseJudge(getenv func(string) string) (Judge, []error) {
	j := Judge{Confidence: 0.95, MinEffect: 0.05}
	var errs []error
	if v := input(getenv, "confidence"); v != "" {
		x, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if strings.HasSuffix(v, "%") {
			x /= 100
		}
		if err != nil || x < 0.5 || x >= 1 {
			errs = append(errs, fmt.Errorf("input confidence: %q is not a level from 0.5 to below 1 (0.95, or 95%%)", v))
		} else {
			j.Confidence = x
		}
	}
	if v := input(getenv, "min-effect"); v != "" {
		x, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(v), "pts"), "%"), 64)
		if err != nil || x < 0 || x > 100 || math.IsNaN(x) {
			errs = append(errs, fmt.Errorf("input min-effect: %q is not a number of points from 0 to 100 (5 means five points of pass rate)", v))
		} else {
			j.MinEffect = x / 100
		}
	}
	switch v := strings.ToLower(input(getenv, "on-inconclusive")); v {
	case "", "pass":
	case "fail":
		j.FailInconclusive = true
	default:
		errs = append(errs, fmt.Errorf("input on-inconclusive: %q is not pass or fail", v))
	}
	return j, errs
}

// FailOn decides the step's exit from the results (fail-on input). Bad input
// (2), infrastructure errors (3) and cancellation (130) are never hidden.
type FailOn struct {
	Mode     string  // failures, regression, errors, pass-rate, never
	MinRate  float64 // pass-rate: fail below this (0..1)
	Original string
}

// Fail-on modes.
const (
	FailOnFailures   = "failures"
	FailOnRegression = "regression"
	FailOnErrors     = "errors"
	FailOnPassRate   = "pass-rate"
	FailOnNever      = "never"
)

func parseFailOn(v string) (FailOn, error) {
	f := FailOn{Mode: strings.ToLower(strings.TrimSpace(v)), Original: v}
	switch f.Mode {
	case "":
		f.Mode = FailOnFailures
		return f, nil
	case FailOnFailures, FailOnRegression, FailOnErrors, FailOnNever:
		return f, nil
	}
	if rest, ok := strings.CutPrefix(strings.ReplaceAll(f.Mode, " ", ""), "pass-rate<"); ok {
		pct := strings.HasSuffix(rest, "%")
		x, err := strconv.ParseFloat(strings.TrimSuffix(rest, "%"), 64)
		if pct {
			x /= 100
		}
		if err == nil && x > 0 && x <= 1 && !math.IsNaN(x) {
			return FailOn{Mode: FailOnPassRate, MinRate: x, Original: v}, nil
		}
	}
	return f, fmt.Errorf("input fail-on: %q is not failures, regression, errors, never or pass-rate<X (X from 0 to 1, or a percentage: pass-rate<0.9, pass-rate<90%%)", v)
}

// Modes.
const (
	ModeRun   = "run"
	ModeMerge = "merge"
)

// input reads INPUT_<NAME> the way the runner sets it (upper case, hyphens
// kept, spaces as underscores), trimmed.
func input(getenv func(string) string, name string) string {
	return strings.TrimSpace(getenv("INPUT_" + strings.ToUpper(strings.ReplaceAll(name, " ", "_"))))
}

func parseBool(name, v string, def bool) (bool, error) {
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("input %s: %q is not a boolean (use true or false)", name, v)
}

// ParseInputs reads and checks every input, reporting all errors at once.
func ParseInputs(getenv func(string) string) (Inputs, error) {
	in := Inputs{
		EvalSet:     input(getenv, "eval-set"),
		SamplesRamp: input(getenv, "samples-ramp"),
		Shard:       input(getenv, "shard"),
		Record:      input(getenv, "record"),
		Title:       input(getenv, "title"),
		Token:       input(getenv, "github-token"),
		Mode:        strings.ToLower(input(getenv, "mode")),
		ReportDir:   input(getenv, "report-dir"),
	}
	var errs []error
	if in.Mode == "" {
		in.Mode = ModeRun
	}
	if in.Mode != ModeRun && in.Mode != ModeMerge {
		errs = append(errs, fmt.Errorf("input mode: %q is not run or merge", in.Mode))
	}
	if in.EvalSet == "" {
		in.EvalSet = "steward.yaml"
	}
	if in.ReportDir == "" {
		in.ReportDir = ".steward/report"
	}
	if v := input(getenv, "concurrency"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("input concurrency: %q is not a whole number ≥ 0 (0: the provider's default)", v))
		}
		in.Concurrency = n
	}
	if v := input(getenv, "budget"); v != "" {
		f, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			errs = append(errs, fmt.Errorf("input budget: %q is not an amount of US dollars ≥ 0", v))
		}
		in.BudgetUSD = f
	}
	var err error
	if in.Rerun, err = parseBool("rerun", input(getenv, "rerun"), false); err != nil {
		errs = append(errs, err)
	}
	if in.EarlyExit, err = parseBool("early-exit", input(getenv, "early-exit"), false); err != nil {
		errs = append(errs, err)
	}
	if in.Comment, err = parseBool("comment", input(getenv, "comment"), true); err != nil {
		errs = append(errs, err)
	}
	switch v := strings.ToLower(input(getenv, "inspect")); v {
	case "", "true", "on", "yes", "eval":
		in.Inspect = "eval"
	case "json":
		in.Inspect = "json"
	case "false", "off", "no":
	default:
		errs = append(errs, fmt.Errorf("input inspect: %q is not eval, json or false", v))
	}
	if in.Shard != "" {
		if _, _, err := shard.Parse(in.Shard); err != nil {
			errs = append(errs, fmt.Errorf("input shard: %w", err))
		}
		if in.Mode == ModeMerge {
			errs = append(errs, errors.New("input shard: merge mode combines shards; it takes no shard"))
		}
	}
	for _, f := range strings.FieldsFunc(input(getenv, "records"), func(r rune) bool { return r == '\n' || r == ',' }) {
		if f = strings.TrimSpace(f); f != "" {
			in.Records = append(in.Records, f)
		}
	}
	if in.Mode == ModeMerge && len(in.Records) == 0 {
		errs = append(errs, errors.New("input records: merge mode needs the shard records to merge (one path or glob per line)"))
	}
	if v := input(getenv, "shards"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("input shards: %q is not a whole number ≥ 0 (0: from the records)", v))
		}
		if in.Mode != ModeMerge && n > 0 {
			errs = append(errs, errors.New("input shards: only merge mode takes it (the shard input slices a run)"))
		}
		in.Shards = n
	}
	in.Baseline = input(getenv, "baseline")
	if in.FailOn, err = parseFailOn(input(getenv, "fail-on")); err != nil {
		errs = append(errs, err)
	}
	var jerrs []error
	in.Judge, jerrs = parseJudge(getenv)
	errs = append(errs, jerrs...)
	if in.Decide, err = parseDecide(input(getenv, "decide")); err != nil {
		errs = append(errs, err)
	}
	if v := input(getenv, "confirm"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1000 {
			errs = append(errs, fmt.Errorf("input confirm: %q is not a whole number from 0 to 1000 (more attempts of every sample)", v))
		}
		in.Confirm = n
		if in.Mode == ModeMerge && n > 0 {
			errs = append(errs, errors.New("input confirm: merge mode runs nothing; put confirm on the job that runs"))
		}
	}
	for _, f := range strings.FieldsFunc(input(getenv, "confirm-samples"), func(r rune) bool { return r == '\n' || r == ',' }) {
		if f = strings.TrimSpace(f); f != "" {
			in.ConfirmSamples = append(in.ConfirmSamples, f)
		}
	}
	if len(in.ConfirmSamples) > 0 && in.Confirm == 0 {
		errs = append(errs, errors.New("input confirm-samples: names the samples confirm runs more attempts of; set confirm too"))
	}
	if in.Decide.Rounds > 0 && in.Mode == ModeMerge {
		errs = append(errs, errors.New("input decide: merge mode runs nothing, so it cannot decide; put decide on the shards' job, or judge the merged record without it"))
	}
	if in.Prune, err = parsePrune(input(getenv, "prune")); err != nil {
		errs = append(errs, err)
	}
	if v := input(getenv, "pr-number"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("input pr-number: %q is not a pull request number", v))
		}
		in.PRNumber = n
	}
	return in, errors.Join(errs...)
}
