// Package sandbox defines what a sandbox provider offers the runner. The
// providers (local, docker) live in subpackages and know nothing of the
// scheduler; the runner knows nothing of Docker.
package sandbox

import (
	"context"
	"time"

	"github.com/steward-evals/steward/internal/status"
)

// Label keys carried by everything a provider creates (D4).
const (
	LabelManaged = "dev.steward.managed" // "true"
	LabelRun     = "dev.steward.run"     // run id
	LabelTask    = "dev.steward.task"    // task name
	LabelProject = "dev.steward.project" // record dir hash
)

// Spec describes the sandboxes of one task.
type Spec struct {
	RunID string
	Task  string
	Image string // resolved image reference (after Prepare for build:)
	Build string // absolute Dockerfile directory, or ""
	// BuildNetwork is the network of Build's RUN steps: "" or "none" (no
	// network), "default" (Docker's default: the outside world).
	BuildNetwork string
	// BuildTimeout bounds Build's image build (0 = none beyond the run's).
	BuildTimeout time.Duration
	// Disk bounds what the sandbox can write, in bytes (0 = provider default).
	Disk int64
	// WritableRoot asks for a root filesystem the sandbox's commands (and
	// CopyIn) may write anywhere in, as Harbor's tasks do (/etc, /usr,
	// /tests, /logs). Where the provider bounds disk with a read-only root
	// (docker without storage quotas, docs/docker.md#disk) the root is then
	// writable and what is written outside the provider's bounded paths is
	// not bounded by Disk; elsewhere it changes nothing.
	WritableRoot bool
	CPUs         float64
	Memory       int64 // bytes; 0 = provider default
	PIDs         int64
	Network      string // "gateway" | "bridge" | "isolated" | "allowlist"
	// AllowedHosts are the host names a network "allowlist" sandbox reaches
	// through its egress proxy (internal/egress.ParseHost: exact names and
	// "*.domain"), besides the gateway.
	AllowedHosts []string
	CapAdd       []string
	Workdir      string
	// Env is set for every command run in the sandbox.
	Env    map[string]string
	Labels map[string]string
	// Dockerfile is Build's Dockerfile, relative to Build ("" = Dockerfile).
	Dockerfile string
	// Services are the other services of a compose environment (a Harbor
	// task's environment/docker-compose.yaml): the sandbox is its service
	// main, and each of these runs beside it, on a network of the
	// sandbox's own where service names resolve, started (and healthy)
	// before the sandbox is handed out. BuildTimeout bounds their start.
	Services []Service
}

// Service is one service of a compose environment besides main.
type Service struct {
	Name string
	// Image is the service's image (filled by Prepare for a Build).
	Image string
	// Build is the absolute build context; Dockerfile is relative to it ("" = Dockerfile).
	Build      string
	Dockerfile string
	Env        map[string]string
	// Entrypoint and Command replace the image's when non-nil.
	Entrypoint []string
	Command    []string
	Workdir    string
	User       string
	// Healthcheck replaces the image's HEALTHCHECK when set; either way a
	// service with a health check must be healthy before main is used.
	Healthcheck *Healthcheck
	// DependsOn names the services started before this one, with the
	// condition each must meet ("service_started" or "service_healthy").
	DependsOn map[string]string
	CPUs      float64 // 0 = provider default
	Memory    int64   // bytes; 0 = provider default
	CapAdd    []string
}

// Healthcheck is a service's health check (Docker's HEALTHCHECK).
type Healthcheck struct {
	// Test is Docker's form: ["CMD", …], ["CMD-SHELL", "…"] or ["NONE"].
	Test                                          []string
	Interval, Timeout, StartPeriod, StartInterval time.Duration
	Retries                                       int
}

// File is a file copied into a sandbox; Path is relative to the workdir
// unless absolute.
type File struct {
	Path string
	Mode int64 // 0 = 0644
	Data []byte
}

// ExecSpec is one command run inside a sandbox.
type ExecSpec struct {
	// Shell is run with /bin/sh -c (local: the host shell).
	Shell string
	Env   map[string]string
	// Timeout kills the command (and its process group) after this long; 0 = none beyond ctx.
	Timeout time.Duration
	// Grace, when set, makes the timeout a deadline the command may answer:
	// at Timeout its process group gets SIGTERM and Grace to exit before
	// SIGKILL (local, docker; other providers kill at once). Either way the
	// result is TimedOut, with what the command printed.
	Grace time.Duration
	Stdin []byte
	// MaxOutput caps captured stdout and stderr each (0 = 1 MiB); the rest is dropped and Truncated set.
	MaxOutput int
}

// ExecResult is what a command did.
type ExecResult struct {
	ExitCode  int
	Stdout    []byte
	Stderr    []byte
	Truncated bool
	TimedOut  bool
	// OOMKilled is set when the sandbox's memory limit killed the command.
	OOMKilled bool
	// DiskFull is set when the command failed with the sandbox's disk quota used up.
	DiskFull bool
	Duration time.Duration
}

// Sandbox is one live sandbox.
type Sandbox interface {
	ID() string
	// Workdir is the absolute working directory inside the sandbox.
	Workdir() string
	// StewardDir is the absolute directory, outside the workdir, where
	// Steward places what it hands the sandbox's commands (the agent's
	// instruction files, the steward binary): CopyIn writes there in every
	// mode of the provider, and the sandbox's commands can read it (docker
	// and kubernetes: /opt/steward; local: a directory beside the workdir).
	StewardDir() string
	CopyIn(ctx context.Context, files []File) error
	CopyOut(ctx context.Context, path string) ([]byte, error)
	Exec(ctx context.Context, spec ExecSpec) (ExecResult, error)
	// Reset empties the workdir between attempts of a reused sandbox (D2).
	// It settles the sandbox first: nothing a past attempt started runs on.
	Reset(ctx context.Context) error
	// Settle stops every process the sandbox's commands started, and
	// anything those left running (a background job, a process that left its
	// group or session), from running on: local kills them and checks that
	// none is left; docker freezes the whole container (Grader, Reset and
	// Close then kill everything in it). Files stay. Only Reset may run
	// commands in a settled sandbox again.
	Settle(ctx context.Context) error
	// Grader returns the sandbox the scorer runs in, for a settled sandbox:
	// it holds this sandbox's workdir (docker: a copy in a fresh container of
	// the same image, so nothing the agent changed outside the workdir counts),
	// and files copied to scorerDir (absolute in the grader), a directory the
	// agent's sandbox never held. The caller closes the grader.
	Grader(ctx context.Context, files []File) (grader Sandbox, scorerDir string, err error)
	// Close removes the sandbox and everything it holds. It must work with a cancelled parent ctx.
	Close(ctx context.Context) error
}

// Resumer is a sandbox that can run commands again after Settle with its
// files kept, everything the agent started ended first: Harbor's shared
// verifier runs in the agent's own sandbox this way (docs/harbor.md).
type Resumer interface {
	// Resume ends every process left in a settled sandbox and lets commands
	// run in it again; it fails when that cannot be done with the files kept.
	Resume(ctx context.Context) error
}

// SampleEnvironments is a provider that runs samples with environments of
// their own (a Harbor dataset's): a spec per sample (its image or build,
// resources, network, WritableRoot), and sandboxes that are Resumers.
type SampleEnvironments interface {
	RunsSampleEnvironments() bool
}

// Capacity is a provider's default sandbox budget (C3).
type Capacity struct {
	// Limit is the number of sandboxes the provider can hold at once; 0 = unlimited.
	Limit int
	// Source explains the bound that won, e.g. "docker default: 2 × 4 CPUs".
	Source string
	// Exclusive: the provider runs one sandbox at a time for correctness, whatever the budget.
	Exclusive bool
}

// GatewayAddr tells the runner where to listen for the model gateway so that
// sandboxes of this provider reach it, and which host name they use.
type GatewayAddr struct {
	Listen string // e.g. "127.0.0.1:0"
	Host   string // host sandboxes dial, e.g. "127.0.0.1" or "172.30.0.1"
	// Proxied: connections arrive through a relay, each starting with a
	// PROXY protocol v1 line naming the sandbox's address.
	Proxied bool
}

// Provider makes sandboxes.
type Provider interface {
	Name() string
	// Capacity computes the default budget for these specs (C3, D1).
	Capacity(ctx context.Context, specs []Spec) (Capacity, error)
	// Prepare readies images and run-wide resources (networks) for the specs,
	// and fills Spec.Image for build: specs. Called once per run before any Create.
	Prepare(ctx context.Context, specs []*Spec) error
	// Gateway says where the model gateway must listen for sandboxes to reach it. Valid after Prepare.
	Gateway(ctx context.Context) (GatewayAddr, error)
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Finalize removes run-wide resources made by Prepare (the provider finalizer).
	Finalize(ctx context.Context) error
}

// ErrInfra marks errors that are the infrastructure's fault (daemon refused,
// hung, disk full) rather than the task's; the runner counts them apart and
// may retry. It is status.ErrInfra, the one classification every package shares.
var ErrInfra = status.ErrInfra

// InfraError wraps err so that errors.Is(err, ErrInfra) holds (status.InfraError).
func InfraError(err error) error { return status.InfraError(err) }
