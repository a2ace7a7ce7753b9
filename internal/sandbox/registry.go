package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// A provider plugs into Steward by registering a Descriptor from its
// package's init function; the package is linked in by one blank import in
// internal/sandbox/providers. The supervisor (run), the commands (cli),
// eval set validation (evalset) and the JSON schema's test read every fact
// about providers from here: no other package spells a provider's name.

// RunInfo is what a provider needs to make the sandboxes of one run and to
// label what it creates.
type RunInfo struct {
	RunID    string // "" when no run records anything (a dry run, a probe)
	LockPath string // the run's lock file: proves the run live to sweepers
	Stderr   io.Writer
	// Getenv reads the environment (nil = none set).
	Getenv func(string) string
	// Settings are the _steward.yaml sections of providers that have one,
	// by provider name (kubernetes: kubeconf.Settings); nil = none.
	Settings map[string]any
	// Liveness judges which runs are dead, for sweeps (the supervisor and the
	// CLI pass runlock.Liveness{}); nil = no run is ever proven dead.
	Liveness Liveness
}

// Liveness tells dead runs from live ones, from this process. It is
// injected so that providers know nothing of run locks.
type Liveness interface {
	// Owner is this process's identity, encoded; it labels what the provider creates.
	Owner() string
	// Judge says whether the run that holds (or held) lockPath, owned by
	// owner (as Owner encoded it), is provably dead; an error says why it
	// cannot be judged (the run is then left alone).
	Judge(lockPath, owner string) (dead bool, err error)
}

// ErrBadInput marks a provider's refusal of the user's configuration (a
// missing kubeconfig, an unknown namespace): exit code 2, not infra.
var ErrBadInput = errors.New("bad input")

// Settings are the sandbox settings of one task that a provider judges
// when the eval set is validated.
type Settings struct {
	Image, Build, Network string
	// Compose: the sandbox is a compose environment's service main
	// (Harbor's environment/docker-compose.yaml), with Spec.Services beside it.
	Compose bool
}

// Problem is one thing a provider refuses in a task's sandbox settings.
// Field is relative to the task's sandbox: "" (the sandbox itself), "image", "build", …
type Problem struct {
	Field, Message string
}

// Descriptor is everything Steward knows about a provider without making one.
type Descriptor struct {
	// Name is what `sandbox: {provider: NAME}` says.
	Name string
	// Summary is one line for the schema's description, doctor and docs.
	Summary string
	// Exclusive: the provider's sandboxes share the host, so a task runs one
	// attempt at a time unless it declares `exclusive: false` (C3).
	Exclusive bool
	// OnHost: sandbox commands are host processes (STEWARD_BIN names the
	// host's steward binary; nothing is copied into the sandbox).
	OnHost bool
	// Auto: a task that names no provider but an image or build gets the
	// first Auto provider (by name) that is Available.
	Auto bool
	// Fallback: a task that names no provider and gets no Auto provider
	// gets this one. At most one provider is the fallback.
	Fallback bool
	// Available says whether the provider can make sandboxes here (nil = always).
	Available func(ctx context.Context) bool
	// Check judges a task's sandbox settings (nil = anything goes).
	Check func(Settings) []Problem
	// New makes the provider for one run (or for a probe: RunID "").
	New func(ctx context.Context, ri RunInfo) (Provider, error)
	// Sweep removes what dead runs left, for `steward sweep` (nil = nothing
	// to sweep). ri has no RunID: its Getenv, Settings (from _steward.yaml
	// here) and Liveness are set.
	Sweep func(ctx context.Context, w io.Writer, ri RunInfo) error
	// Doctor prints what the provider sees of this machine, for `steward doctor` (nil = nothing).
	Doctor func(ctx context.Context, w io.Writer, ri RunInfo) error
	// Internal are hidden commands the provider's own processes run as
	// `steward NAME ARGS…` (docker: the gateway relay in its relay container).
	Internal []InternalCommand
}

// InternalCommand is a hidden subcommand of the steward binary that a
// provider runs itself; users never type it.
type InternalCommand struct {
	Name  string // e.g. "__relay"
	Usage string // the arguments, e.g. "LISTEN TARGET"
	Short string
	Args  int // exactly this many arguments
	Run   func(ctx context.Context, args []string, stderr io.Writer) error
}

// Preflighter is implemented by providers that check the machine before any
// sandbox starts (docker: its address pools, D1), and may offer a fix:
// confirm asks the user, write accepts without asking.
type Preflighter interface {
	PreflightRun(ctx context.Context, specs []*Spec, concurrency int, w io.Writer, confirm func(string) bool, write bool) error
}

// AfterRunSweeper is implemented by providers that remove what dead runs
// left, this run's crashed workers included, once the run's lock is released (D4).
type AfterRunSweeper interface {
	SweepAfterRun(ctx context.Context)
}

var registry struct {
	sync.RWMutex
	byName map[string]Descriptor
}

// Register adds a provider. It panics on a descriptor without a name or a
// constructor, on a name registered twice and on a second fallback: these
// are programming errors found at start-up.
func Register(d Descriptor) {
	registry.Lock()
	defer registry.Unlock()
	if d.Name == "" || d.New == nil {
		panic("sandbox: Register needs a name and a constructor")
	}
	if _, dup := registry.byName[d.Name]; dup {
		panic(fmt.Sprintf("sandbox: provider %q registered twice", d.Name))
	}
	if d.Fallback {
		for _, o := range registry.byName {
			if o.Fallback {
				panic(fmt.Sprintf("sandbox: providers %q and %q are both the fallback", o.Name, d.Name))
			}
		}
	}
	if registry.byName == nil {
		registry.byName = map[string]Descriptor{}
	}
	registry.byName[d.Name] = d
}

// Lookup returns the provider registered under name.
func Lookup(name string) (Descriptor, bool) {
	registry.RLock()
	defer registry.RUnlock()
	d, ok := registry.byName[name]
	return d, ok
}

// Registered returns every provider, sorted by name.
func Registered() []Descriptor {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Descriptor, 0, len(registry.byName))
	for _, d := range registry.byName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the registered providers' names, sorted.
func Names() []string {
	var out []string
	for _, d := range Registered() {
		out = append(out, d.Name)
	}
	return out
}

// IsExclusive says whether tasks of the named provider run one attempt at a
// time unless they declare otherwise (false for an unknown name).
func IsExclusive(name string) bool {
	d, ok := Lookup(name)
	return ok && d.Exclusive
}

// IsOnHost says whether the named provider's commands are host processes.
func IsOnHost(name string) bool {
	d, ok := Lookup(name)
	return ok && d.OnHost
}

// Choose picks the provider of a task: the one it names; else, for a task
// with an image or build, the first Auto provider (by name) that
// available says answers; else the fallback. available is asked at most
// once per provider by the caller's cache, not here.
func Choose(named string, wantsImage bool, available func(name string) bool) (string, error) {
	if named != "" {
		if _, ok := Lookup(named); !ok {
			return "", fmt.Errorf("unknown sandbox provider %q (known: %v)", named, Names())
		}
		return named, nil
	}
	all := Registered()
	if wantsImage {
		for _, d := range all {
			if d.Auto && available(d.Name) {
				return d.Name, nil
			}
		}
	}
	for _, d := range all {
		if d.Fallback {
			return d.Name, nil
		}
	}
	return "", fmt.Errorf("no sandbox provider answers and none is the fallback (registered: %v)", Names())
}

// Deregister removes a provider (for tests that register one of their own).
func Deregister(name string) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.byName, name)
}

// Section is a provider's own section of _steward.yaml (kubernetes:) and
// the launch flags that override it (--kubeconfig), declared by the
// provider's settings package and decoded by the eval set's loader through
// this registry, so the loader names no provider. The decoded value reaches
// the provider as RunInfo.Settings[Key].
type Section struct {
	// Key is the section's name in _steward.yaml.
	Key string
	// New returns a pointer to the section's zero settings, which the loader
	// fills from the file as strictly as the rest of it (unknown keys, types
	// and positions reported the same way).
	New func() any
	// Check judges the decoded settings (a pointer from New) and may
	// complete them (dir is the fleet file's directory, for relative
	// paths); each problem's Field is relative to Key. Nil: nothing to check.
	Check func(settings any, dir string) []Problem
	// Value is what RunInfo.Settings carries for the settings New made
	// (nil: the pointer itself).
	Value func(settings any) any
	// Flags are the launch flags over the section.
	Flags []SectionFlag
}

// SectionFlag is a string flag of `steward launch` over a provider section.
type SectionFlag struct {
	Name, Usage string
	// Apply sets value over settings (a pointer from Section.New, the
	// file's or a fresh one); its error is the flag's problem.
	Apply func(settings any, value string) error
}

var sections struct {
	sync.RWMutex
	byKey map[string]Section
}

// RegisterSection adds a provider section; it panics on an empty key, a
// missing New or a key registered twice (programming errors).
func RegisterSection(s Section) {
	sections.Lock()
	defer sections.Unlock()
	if s.Key == "" || s.New == nil {
		panic("sandbox: RegisterSection needs a key and New")
	}
	if _, dup := sections.byKey[s.Key]; dup {
		panic(fmt.Sprintf("sandbox: section %q registered twice", s.Key))
	}
	if sections.byKey == nil {
		sections.byKey = map[string]Section{}
	}
	sections.byKey[s.Key] = s
}

// Sections returns the registered provider sections, sorted by key.
func Sections() []Section {
	sections.RLock()
	defer sections.RUnlock()
	out := make([]Section, 0, len(sections.byKey))
	for _, s := range sections.byKey {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
