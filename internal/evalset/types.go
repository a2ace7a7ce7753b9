// Package evalset defines Steward's eval set format (steward.yaml), the fleet
// settings file (_steward.yaml), and loads and validates both.
package evalset

import (
	"time"

	"github.com/steward-evals/steward/internal/score"
)

// EvalSet is a loaded, validated eval set. Paths inside it are absolute,
// except Task.Inputs (globs relative to Dir). Defaults are filled in and
// every sample has an id. See docs/evalset.md for the format.
type EvalSet struct {
	// File is the absolute path of the eval set YAML.
	File string `yaml:"-" json:"-"`
	// Dir is the directory that holds File; relative paths resolve against it.
	Dir string `yaml:"-" json:"-"`

	Name  string  `yaml:"name" json:"name"`
	Model Model   `yaml:"model" json:"model"`
	Tasks []*Task `yaml:"tasks" json:"tasks"`
	// SecretEnv names environment variables whose values are secrets (a
	// token a host hook uses, say): the GitHub Action masks their values in
	// the job log before anything runs. The model key (api_key_env) is
	// always a secret and need not be listed.
	SecretEnv []string `yaml:"secret_env" json:"secret_env"`
	// Decide is what an inconclusive verdict against a base may spend on
	// extra attempts (docs/judging.md); the action's decide input, when
	// set, wins. Rounds 0 is off.
	Decide *Decide `yaml:"decide" json:"decide,omitempty"`

	// Fleet holds the settings from _steward.yaml beside File, after
	// environment variables and flags were applied.
	Fleet Fleet `yaml:"-" json:"-"`

	// Warnings are what Load read but will not honour (a Harbor task's
	// health check, a task.toml key it does not know), each at its file,
	// line and key; the launch prints them.
	Warnings []Warning `yaml:"-" json:"-"`

	// expanded are the ${…} Load expanded in the eval set (secrets refused).
	expanded []expansion

	// snap holds every files: source (task, sample, scorer) as read once at
	// Load, by absolute path: what is fingerprinted and copied into sandboxes
	// is what was validated, whatever happens to the files later.
	snap map[string]snapFile
}

type snapFile struct {
	data []byte
	mode int64
}

// Decide bounds decide's extra attempts: at most Rounds rounds of PerRound
// attempts on each uncertain sample, until Attempts, USD or Time runs out.
type Decide struct {
	Rounds   int      `yaml:"rounds" json:"rounds,omitempty"`
	PerRound int      `yaml:"per_round" json:"per_round,omitempty"`
	Attempts int      `yaml:"attempts" json:"attempts,omitempty"`
	USD      float64  `yaml:"usd" json:"usd,omitempty"`
	Time     Duration `yaml:"time" json:"time,omitempty"`
}

// Model names the upstream the gateway forwards to.
type Model struct {
	// Upstream is "mock" (built in, the default), "openai" or "anthropic".
	Upstream string `yaml:"upstream" json:"upstream"`
	// Name is the model name agents are expected to ask for (informational, fingerprinted).
	Name string `yaml:"name" json:"name"`
	// BaseURL of the real endpoint (default per upstream).
	BaseURL string `yaml:"base_url" json:"base_url"`
	// APIKeyEnv names the environment variable holding the real key.
	APIKeyEnv string `yaml:"api_key_env" json:"api_key_env"`
	// MaxConnections fixes the connection limit; 0 means adaptive (C5).
	MaxConnections int `yaml:"max_connections" json:"max_connections"`
	// MaxConnectionsCeiling is the hard ceiling on the adaptive connection
	// limit, however high the provider's rate and the ramp would take it;
	// 0 means the gateway's own (100 000).
	MaxConnectionsCeiling int `yaml:"max_connections_ceiling" json:"max_connections_ceiling"`
	// BudgetMaxTokens is the max_tokens --budget assumes for a model call
	// that names none, to hold what it may cost before it is sent; 0 means
	// DefaultBudgetMaxTokens. Not fingerprinted: it decides no outcome.
	BudgetMaxTokens int `yaml:"budget_max_tokens" json:"budget_max_tokens"`
	// Prices per million tokens, in USD, used for spend and --budget (S5).
	Prices Prices `yaml:"prices" json:"prices"`
	// Settings are extra model settings (temperature, …) that the
	// quickstart agent sends and that enter the fingerprint.
	Settings map[string]any `yaml:"settings" json:"settings"`

	// Sources names the values launch's flags set ("name", "base_url",
	// "upstream", "settings.KEY" -> "flag"), for the PLAN line; nil when
	// every value is the file's.
	Sources map[string]string `yaml:"-" json:"-"`
}

// Prices are USD per million tokens.
type Prices struct {
	InputPerMTok  float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
}

// Task is a named group of samples with one sandbox spec, agent and scorer.
type Task struct {
	Name    string  `yaml:"name" json:"name"`
	Sandbox Sandbox `yaml:"sandbox" json:"sandbox"`
	// Setup runs once in every new sandbox before its first attempt.
	Setup string `yaml:"setup" json:"setup"`
	// Agent is the shell command that runs one attempt inside the sandbox.
	// Its answer is its standard output, trimmed (or the file answer.txt in the workdir when it exists).
	Agent  string `yaml:"agent" json:"agent"`
	Scorer Scorer `yaml:"scorer" json:"scorer"`

	// Samples are inline samples; SamplesFile is a JSONL file of samples.
	// After Load, Samples holds the samples either way (in file order) and
	// SamplesFile is absolute or "".
	Samples     []*Sample `yaml:"samples" json:"samples"`
	SamplesFile string    `yaml:"samples_file" json:"samples_file"`
	// TasksFrom loads the samples from a dataset in another format
	// ({harbor: DIR}: one sample per Harbor task, each with its own
	// environment; docs/harbor.md) instead of samples or samples_file.
	TasksFrom *TasksFrom `yaml:"tasks_from" json:"tasks_from,omitempty"`
	// SamplesFormat is samples_file's format: jsonl, json, csv, tsv or
	// parquet; "" means from the file's extension (docs/evalset.md).
	SamplesFormat string `yaml:"samples_format" json:"samples_format,omitempty"`
	// Fields maps samples_file's columns (or JSON keys) to the sample's
	// fields, like Inspect's FieldSpec; nil reads them by their own names.
	Fields *FieldMap `yaml:"fields" json:"fields,omitempty"`
	// Shuffle orders the samples by a hash of Seed and their id (after ids
	// are assigned, before SamplesLimit); SamplesLimit keeps the first N
	// (0 = all). ShuffleChoices shuffles each multiple-choice sample's
	// choices (by Seed and its id) and remaps its target letters.
	Shuffle        bool  `yaml:"shuffle" json:"shuffle,omitempty"`
	SamplesLimit   int   `yaml:"samples_limit" json:"samples_limit,omitempty"`
	ShuffleChoices bool  `yaml:"shuffle_choices" json:"shuffle_choices,omitempty"`
	Seed           int64 `yaml:"seed" json:"seed,omitempty"`
	// ChoicesTemplate is the prompt a multiple-choice sample's input is
	// rendered into ({question}, {choices}, {letters}); "" = the built-in one.
	ChoicesTemplate string `yaml:"choices_template" json:"choices_template,omitempty"`

	// Attempts per sample (alias: epochs). Default 1.
	Attempts int `yaml:"attempts" json:"attempts"`
	// Reducer turns a sample's judged attempts into its score: mean (the
	// default), all, any, majority, at_least: K or pass_at: K
	// (docs/judging.md). Reports, the comparison and the fail policy use it.
	Reducer score.Reducer `yaml:"reducer" json:"reducer"`
	// Timeout per attempt (agent + scorer). Default 10m.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// AgentTimeout and ScorerTimeout split it (each defaults from Timeout):
	// at the agent's deadline it gets SIGTERM, AgentGrace (default 10s) to
	// finish, then is killed, and the scorer judges what it left (limits.go).
	AgentTimeout  Duration  `yaml:"agent_timeout" json:"agent_timeout,omitempty"`
	ScorerTimeout Duration  `yaml:"scorer_timeout" json:"scorer_timeout,omitempty"`
	AgentGrace    *Duration `yaml:"agent_grace" json:"agent_grace,omitempty"`
	// Limits bound each attempt (tokens, model calls, USD, agent time); unset
	// fields default from _steward.yaml's limits: (limits.go).
	Limits *Limits `yaml:"limits" json:"limits,omitempty"`
	// MaxSamples fixes the task's setpoint and keeps it out of the ramp (C5). 0 = unset.
	MaxSamples int `yaml:"max_samples" json:"max_samples"`
	// Exclusive: nil = the provider's default; false lets a local task run under the normal gates (C3).
	Exclusive *bool `yaml:"exclusive" json:"exclusive"`

	// Host runs commands on the host before the first and after the last attempt of the task.
	Host HostHooks `yaml:"host" json:"host"`

	SandboxReuse bool        `yaml:"sandbox_reuse" json:"sandbox_reuse"`
	Groups       []*Group    `yaml:"groups" json:"groups"`
	SharedState  SharedState `yaml:"shared_state" json:"shared_state"`
	EarlyExit    bool        `yaml:"early_exit" json:"early_exit"`
	// Inputs are globs (relative to the eval set dir, no "..", "**" for any
	// directories) of files that decide outcomes (helpers, fixtures); their
	// contents enter every attempt's fingerprint. They stay relative after
	// Load; EvalSet.InputFiles expands them.
	Inputs []string `yaml:"inputs" json:"inputs"`
	// Env is set in every sandbox of the task.
	Env map[string]string `yaml:"env" json:"env"`
	// Volatile names Env keys (and metadata keys) left out of the fingerprint.
	Volatile []string `yaml:"volatile" json:"volatile"`
	// Files are copied into every sandbox's workdir: destination -> source
	// path (relative to the eval set dir; absolute after Load) or a data: URL.
	// FileData reads either.
	Files map[string]string `yaml:"files" json:"files"`
	// Retries is how many times an attempt that hit an infrastructure error is retried. Default 1.
	Retries *int `yaml:"retries" json:"retries"`
	// JudgeFailedAgents: a scorer.command judges what the agent left even
	// when the agent exited non-zero (Harbor's rule; the agent's exit status
	// and output tail are kept beside the verdict). Default true; false
	// makes such an attempt errored without scoring. A match: scorer never
	// judges a failed agent (there is no answer).
	JudgeFailedAgents *bool `yaml:"judge_failed_agents" json:"judge_failed_agents"`
	// Artifacts are shell globs, relative to the workdir, of files the
	// agent leaves that are copied out after the attempt and shown beside
	// its transcript (regular files only: symlinks are refused; size-capped).
	Artifacts []string `yaml:"artifacts" json:"artifacts"`

	// Line is the line of the task in File (for messages).
	Line int `yaml:"-" json:"-"`
}

// JudgesFailedAgents says whether an agent's non-zero exit still goes to
// the scorer: with a scorer.command or a Harbor dataset's verifier unless
// judge_failed_agents is false.
func (t *Task) JudgesFailedAgents() bool {
	return (t.Scorer.Command != "" || t.HarborSamples()) && (t.JudgeFailedAgents == nil || *t.JudgeFailedAgents)
}

// Sandbox is a task's sandbox spec.
type Sandbox struct {
	// Provider names a registered sandbox provider (sandbox.Register); "" = the
	// first automatic provider that answers (docker) for a task with an image or
	// build, else the fallback (local).
	Provider string `yaml:"provider" json:"provider"`
	Image    string `yaml:"image" json:"image"`
	// Build is a directory holding a Dockerfile (relative to the eval set dir); built once per run, cached by content hash.
	Build string `yaml:"build" json:"build"`
	// BuildNetwork is the network of Build's RUN steps: "none" (default) or
	// "default" (Docker's build network, which reaches the outside world).
	BuildNetwork string `yaml:"build_network" json:"build_network"`
	// Disk bounds what a docker sandbox can write (default 1g); see docs/docker.md.
	Disk Bytes `yaml:"disk" json:"disk"`
	// CPUs per sandbox (default 1), Memory per sandbox (default "512m"), PIDs limit (default 256).
	CPUs   float64 `yaml:"cpus" json:"cpus"`
	Memory Bytes   `yaml:"memory" json:"memory"`
	PIDs   int64   `yaml:"pids" json:"pids"`
	// Network: "gateway" (default: reaches the model gateway only), "bridge"
	// (Docker's default bridge, reaches the outside) or "isolated" (a network of its own per sandbox).
	Network string   `yaml:"network" json:"network"`
	CapAdd  []string `yaml:"cap_add" json:"cap_add"`
	// Workdir inside the sandbox (docker default /work).
	Workdir string `yaml:"workdir" json:"workdir"`
}

// Scorer judges an attempt. Exactly one of Command, Match or ModelGraded.
type Scorer struct {
	// Command runs after the agent's processes are gone, in a sandbox of its
	// own (docker: a fresh container of the task's image) holding a copy of
	// the agent's workdir, with STEWARD_ANSWER, STEWARD_TARGET and
	// STEWARD_SCORER_DIR set; exit 0 passes, or it prints JSON
	// {"passed":bool,"score":number,"explanation":string} as its last line.
	Command string `yaml:"command" json:"command"`
	// Files are copied only into the scorer's sandbox, under
	// STEWARD_SCORER_DIR (never into the agent's): destination -> source, as
	// Task.Files. Scripts that grade belong here, not in Task.Files, which
	// the agent can rewrite.
	Files map[string]string `yaml:"files" json:"files"`
	// Match compares the answer with the sample's target: exact, includes,
	// regex, numeric (the vocabulary is score.Matches).
	Match score.Match `yaml:"match" json:"match"`
	// IgnoreCase applies to exact and includes.
	IgnoreCase bool `yaml:"ignore_case" json:"ignore_case"`
	// ModelGraded is the built-in model judge (modelgraded.go); nil: none.
	// omitempty keeps the fingerprints of tasks without it as they were.
	ModelGraded *ModelGraded `yaml:"model_graded" json:"model_graded,omitempty"`
}

// HostHooks are task-level commands run on the host (in the eval set dir).
type HostHooks struct {
	Setup    string `yaml:"setup" json:"setup"`
	Teardown string `yaml:"teardown" json:"teardown"`
}

// Group lists samples that run one after another in one reused sandbox (D3).
type Group struct {
	Name    string   `yaml:"name" json:"name"`
	Samples []string `yaml:"samples" json:"samples"`
}

// SharedState names a lease key (S1).
type SharedState struct {
	Key string `yaml:"key" json:"key"`
}

// Sample is one test case (Inspect's dataset fields).
type Sample struct {
	// ID is unique in its task after NormalizeID; Load assigns the 1-based
	// position ("1", "2", …) to samples written without one.
	ID string `yaml:"id" json:"id"`
	// Input is a string, or a list of chat messages ({role, content}); after
	// Load a string or a []any of map[string]any. InputText gives STEWARD_INPUT.
	Input any `yaml:"input" json:"input"`
	// Target is a string or a list of strings (any matches); after Load nil,
	// a string or a []string. Targets and TargetText read it.
	Target   any            `yaml:"target" json:"target"`
	Metadata map[string]any `yaml:"metadata" json:"metadata"`
	// Files: destination in the workdir -> source path (relative to the
	// eval set dir, absolute after Load; it may not leave the eval set dir)
	// or inline content as a data URL ("data:,text", "data:;base64,…").
	Files map[string]string `yaml:"files" json:"files"`
	// Setup is a shell script run in the sandbox before the agent.
	Setup string `yaml:"setup" json:"setup"`
	// Choices make a multiple-choice sample (lettered A, B, …; in the
	// order presented, after shuffle_choices). After Load its Input holds
	// the question rendered with them (the task's choices_template) and
	// its Target the correct letters.
	Choices []string `yaml:"choices,omitempty" json:"choices,omitempty"`

	// Source is "file:line" where the sample was declared.
	Source string `yaml:"-" json:"-"`

	// Sandbox, when not nil, is this sample's own sandbox, complete (image
	// or build, resources, network), in place of its task's; Timeout and
	// ScorerTimeout its own agent and scorer (verifier) timeouts, and
	// BuildTimeout its image build's. Only a dataset loader sets them
	// today (tasks_from: harbor); they enter the sample's fingerprint.
	Sandbox       *Sandbox `yaml:"-" json:"-"`
	Timeout       Duration `yaml:"-" json:"-"`
	ScorerTimeout Duration `yaml:"-" json:"-"`
	BuildTimeout  Duration `yaml:"-" json:"-"`
	// Harbor is set on a sample loaded from a Harbor task: its verifier's
	// contract and its reference solution.
	Harbor *HarborSample `yaml:"-" json:"-"`
}

// FieldMap is a task's fields: which column of samples_file (or key of its
// JSON records) holds each sample field, like Inspect's FieldSpec. Empty
// entries read the field's own name, when the record has it.
type FieldMap struct {
	ID     string `yaml:"id" json:"id,omitempty"`
	Input  string `yaml:"input" json:"input,omitempty"`
	Target string `yaml:"target" json:"target,omitempty"`
	// Choices is one column holding a list, or several columns, one choice each.
	Choices Columns `yaml:"choices" json:"choices,omitempty"`
	// Metadata names the columns kept as the sample's metadata.
	Metadata Columns `yaml:"metadata" json:"metadata,omitempty"`
	Files    string  `yaml:"files" json:"files,omitempty"`
	Setup    string  `yaml:"setup" json:"setup,omitempty"`
}

// Columns is one column name or a list of them.
type Columns []string

// Fleet holds run-wide settings (_steward.yaml, STEWARD_* env, flags).
type Fleet struct {
	// MaxSandboxes is the sandbox budget from config (0 = unset).
	MaxSandboxes int `yaml:"max_sandboxes" json:"max_sandboxes"`
	MaxWorkers   int `yaml:"max_workers" json:"max_workers"`
	MaxTasks     int `yaml:"max_tasks" json:"max_tasks"`
	// SamplesRamp is the ramp range; Enabled=false never ramps.
	SamplesRamp RampRange `yaml:"samples_ramp" json:"samples_ramp"`
	// TendInterval is the control window (default 10s).
	TendInterval Duration `yaml:"tend_interval" json:"tend_interval"`
	// Record is the record directory (default .steward beside the eval set).
	Record string `yaml:"record" json:"record"`
	// Transcripts is what the model gateway keeps of every model call:
	// "full" (default), "metadata" (no content) or "off".
	Transcripts string `yaml:"transcripts" json:"transcripts"`
	// Secrets names environment variables whose values, like the model key,
	// the gateway scrubs from every upstream answer and the run masks in
	// what it records and prints.
	Secrets []string `yaml:"secrets" json:"secrets,omitempty"`
	// Providers are the sections providers declare (sandbox.RegisterSection:
	// kubernetes:), decoded, by key; a section the file does not have is
	// absent. The loader names no provider.
	Providers map[string]any `yaml:"-" json:"providers,omitempty"`
	// Limits are every task's per-attempt limits unless the task sets its own (per field).
	Limits *Limits `yaml:"limits" json:"limits,omitempty"`

	// File is the _steward.yaml path it came from ("" if none).
	File string `yaml:"-" json:"-"`
	// expanded are the ${…} expanded in _steward.yaml (for Load's secret check).
	expanded []expansion

	// Sources says where each setting's value came from, keyed by its
	// _steward.yaml name: "default", "_steward.yaml:LINE",
	// "env STEWARD_MAX_SANDBOXES" or "flag" (for the PLAN line, C2).
	Sources map[string]string `yaml:"-" json:"sources,omitempty"`
}

// RampRange is samples_ramp: [lo, hi] or false.
type RampRange struct {
	Enabled bool
	Lo, Hi  int
}

// DefaultRamp is the seed's range: start 50, climb to 200.
var DefaultRamp = RampRange{Enabled: true, Lo: 50, Hi: 200}

// Duration is a time.Duration that reads "90s", "5m" or a number of seconds.
type Duration time.Duration

// Bytes is a size that reads "512m", "2g", "1048576".
type Bytes int64
