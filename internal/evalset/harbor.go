package evalset

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/steward-evals/steward/internal/harbor"
	"github.com/steward-evals/steward/internal/sandbox"
)

// TasksFrom loads a task's samples from a dataset in another format:
// {harbor: DIR}, a directory of Harbor-format tasks (docs/harbor.md), one
// sample per task directory, each with its own environment and verifier.
type TasksFrom struct {
	// Harbor is the dataset directory (relative to the eval set dir;
	// absolute after Load), or one task directory.
	Harbor string `yaml:"harbor" json:"harbor"`
	// KeepProcesses (default true): a shared-mode verifier runs while the
	// processes the agent left in its sandbox (a server it started in the
	// background) still run, as Harbor's does; false ends them first.
	KeepProcesses *bool `yaml:"keep_processes" json:"keep_processes,omitempty"`
}

// Keeps says whether a shared-mode verifier runs beside the agent's processes.
func (f *TasksFrom) Keeps() bool { return f == nil || f.KeepProcesses == nil || *f.KeepProcesses }

// HarborSample is what a sample loaded from a Harbor task carries beyond
// the sample fields: its verifier's contract and its reference solution.
type HarborSample struct {
	// Dir is the Harbor task directory (absolute).
	Dir string
	// Env is [environment] env: set for every command of the sample's sandbox.
	Env map[string]string
	// VerifierMode is "shared" (Harbor's default: the tests run in the
	// agent's own, frozen sandbox) or "separate" (a fresh sandbox of the
	// sample's image).
	VerifierMode string
	// KeepProcesses: in shared mode, the processes the agent left run on
	// through the verifier (tasks_from's keep_processes, default true);
	// else they are ended before it starts.
	KeepProcesses bool
	// VerifierEnv is [verifier] env, ${…} expanded from the host.
	VerifierEnv map[string]string
	// Tests are tests/'s files, by path under /tests; Solution solution/'s,
	// by path under /solution (nil without a solution); SolutionEnv is
	// [solution] env.
	Tests       map[string]HarborFile
	Solution    map[string]HarborFile
	SolutionEnv map[string]string
	// Compose is the compose file of a compose environment (as displayed;
	// "" for a Dockerfile or docker_image task): the sample's sandbox is its
	// service main, built with Dockerfile (relative to the sandbox's build;
	// "" = Dockerfile), and Services run beside it.
	Compose    string
	Dockerfile string
	Services   []sandbox.Service
	// AllowedHosts are the hosts a sandbox of network "allowlist" reaches
	// through its egress proxy ([environment] allowed_hosts, normalized).
	AllowedHosts []string
}

// HarborFile is one file of a Harbor task's tests/ or solution/, as read at Load.
type HarborFile struct {
	Data []byte
	Mode int64
}

// Warning is a problem that does not stop a load: something a source asks
// for that Steward ignores (each names its file, line and key).
type Warning = Error

// loadTasksFrom reads task i's tasks_from into its samples.
func (v *validator) loadTasksFrom(i int, t *Task) {
	tp := index("tasks", i)
	fp := tp + ".tasks_from"
	for _, k := range []string{"samples", "samples_file", "fields", "samples_format"} {
		if v.has(tp + "." + k) {
			v.errf(tp+"."+k, "a task with tasks_from takes its samples from the dataset: drop %s", k)
		}
	}
	if t.TasksFrom.Harbor == "" {
		v.errf(fp+".harbor", "missing: the directory of Harbor tasks")
		v.samplesOK[i] = false
		return
	}
	rel := t.TasksFrom.Harbor
	abs := rel
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(v.es.Dir, rel)
	}
	abs = filepath.Clean(abs)
	t.TasksFrom.Harbor = abs
	display := rel
	if !filepath.IsAbs(rel) {
		display = filepath.Join(filepath.Dir(v.display), rel)
	}
	r := harbor.Load(abs, display, harbor.Options{Expand: func(s string) (string, []string, error) {
		return ExpandVars(s, v.d.getenv)
	}})
	for _, p := range r.Problems {
		e := Error{File: p.File, Line: p.Line, Field: p.Key, Msg: p.Msg}
		if p.Warning {
			v.es.Warnings = append(v.es.Warnings, e)
			continue
		}
		v.d.errs.add(e)
		v.samplesOK[i] = false
	}
	for _, ref := range r.Refs {
		v.d.expanded = append(v.d.expanded, expansion{name: ref.Name, at: pos{file: ref.File, line: ref.Line}, field: ref.Key})
	}
	if len(r.Errs()) > 0 {
		return
	}
	for j, h := range r.Tasks {
		sp := index(tp+".samples", j)
		file := filepath.Join(display, h.ID, "task.toml")
		at := pos{file: file, line: 1}
		for _, k := range []string{"", ".id", ".input", ".metadata", ".sandbox"} {
			v.d.at[sp+k] = at
		}
		hs := harborSample(h, file)
		hs.Harbor.KeepProcesses = t.TasksFrom.Keeps()
		t.Samples = append(t.Samples, hs)
	}
}

// harborSample is the sample a Harbor task becomes. Its sandbox is
// completed from the task's in completeHarborSandbox.
func harborSample(h *harbor.Task, file string) *Sample {
	s := &Sample{
		ID:       h.ID,
		Input:    h.Instruction,
		Metadata: h.Metadata,
		Source:   file + ":1",
		Sandbox: &Sandbox{
			Image: h.Image, Build: h.Build, CPUs: h.CPUs, Memory: Bytes(h.MemoryBytes), Disk: Bytes(h.StorageBytes),
			Network: h.Network, Workdir: h.Workdir,
		},
		Timeout:       Duration(h.AgentTimeout),
		ScorerTimeout: Duration(h.VerifierTimeout),
		BuildTimeout:  Duration(h.BuildTimeout),
		Harbor: &HarborSample{
			Dir: h.Dir, Env: h.Env, VerifierMode: h.VerifierMode, VerifierEnv: h.VerifierEnv,
			Tests: harborFiles(h.Tests), Solution: harborFiles(h.Solution), SolutionEnv: h.SolutionEnv,
			Compose: h.Compose, Dockerfile: h.Dockerfile, Services: h.Services,
			AllowedHosts: h.AllowedHosts,
		},
	}
	return s
}

func harborFiles(m map[string]harbor.File) map[string]HarborFile {
	if m == nil {
		return nil
	}
	out := make(map[string]HarborFile, len(m))
	for k, f := range m {
		out[k] = HarborFile{Data: f.Data, Mode: int64(f.Mode)}
	}
	return out
}

// harborTask checks what a tasks_from task may say beside its dataset and
// completes each sample's sandbox from the task's: the provider, pids and
// cap_add are the task's; image or build, cpus, memory, disk (storage),
// network and workdir the Harbor task's; a build reaches the network
// (Harbor's builds do) unless the task sets build_network.
func (v *validator) harborTask(i int, t *Task) {
	tp := index("tasks", i)
	for _, k := range []string{"image", "build", "cpus", "memory", "disk", "network", "workdir"} {
		if v.has(tp + ".sandbox." + k) {
			v.errf(tp+".sandbox."+k, "each Harbor task sets its own %s (task.toml [environment]): drop it here", k)
		}
	}
	if v.has(tp+".scorer") || t.Scorer.Command != "" || t.Scorer.Match != "" {
		v.errf(tp+".scorer", "a Harbor task's verifier (tests/test.sh and its reward file) is the scorer: drop scorer")
	}
	if v.has(tp + ".timeout") {
		v.errf(tp+".timeout", "each Harbor task sets its own timeouts ([agent] and [verifier] timeout_sec): drop timeout")
	}
	if t.SandboxReuse || len(t.Groups) > 0 {
		v.errf(tp, "sandbox_reuse and groups do not apply to a Harbor dataset: each sample has an environment of its own")
	}
	buildNet := t.Sandbox.BuildNetwork
	if !v.has(tp + ".sandbox.build_network") {
		buildNet = "default"
	}
	// The provider's refusals, once each: the first sample and how many.
	refused := map[string]*[2]any{}
	var order []string
	defer func() {
		for _, msg := range order {
			first, n := refused[msg][0].(string), refused[msg][1].(int)
			what := "sample " + first
			if n > 1 {
				what = fmt.Sprintf("%d samples (the first %s)", n, first)
			}
			v.errf(tp+".sandbox.provider", "%s: %s", what, msg)
		}
	}()
	for _, s := range t.Samples {
		if s == nil || s.Sandbox == nil {
			continue
		}
		sb := s.Sandbox
		sb.Provider, sb.PIDs, sb.CapAdd = t.Sandbox.Provider, t.Sandbox.PIDs, t.Sandbox.CapAdd
		if sb.Build != "" {
			sb.BuildNetwork = buildNet
		}
		if d, ok := sandbox.Lookup(sb.Provider); ok && sb.Provider != "" && d.Check != nil {
			for _, p := range d.Check(sandbox.Settings{Image: sb.Image, Build: sb.Build, Network: sb.Network, Compose: s.Harbor != nil && s.Harbor.Compose != ""}) {
				if refused[p.Message] == nil {
					order = append(order, p.Message)
					refused[p.Message] = &[2]any{s.ID, 0}
				}
				refused[p.Message][1] = refused[p.Message][1].(int) + 1
			}
		}
		if sb.Memory < MinMemory {
			v.errf(index(tp+".samples", 0), "sample %s: memory %s is below the minimum %s", s.ID, sb.Memory, MinMemory)
		}
	}
}

// HarborSamples says whether a task's samples come from a Harbor dataset.
func (t *Task) HarborSamples() bool { return t.TasksFrom != nil && t.TasksFrom.Harbor != "" }

// OwnEnvironment says whether a sample carries its own sandbox (image or
// build, resources, network) in place of its task's.
func (s *Sample) OwnEnvironment() bool { return s.Sandbox != nil }

// SortedHarborFiles lists m's paths in order.
func SortedHarborFiles(m map[string]HarborFile) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
