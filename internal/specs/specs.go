// Package specs makes the sandbox specs a plan's attempts run in, from the
// eval set: each task's, and each sample's own for the samples with
// environments of their own (a Harbor dataset, tasks_from: harbor), which
// run each in a sandbox of its own spec: the sample's image or build
// (content-hash cached, built once per run with the task's), its resources,
// network and workdir, a writable root (Harbor tasks write outside their
// workdir) and its compose services. It says which specs have work, copies
// them for preparing, and prepares samples' specs one by one, so a sample
// whose environment does not build fails alone.
//
// The supervisor (internal/run) makes a Set in its choose stage and
// prepares a copy in its prepare stage; an attempt is given the prepared
// one in attempt.Env (Specs, SampleSpecs, SampleErrs, keyed by
// attempt.SampleKey). The attempt's side of these samples, and the Harbor
// verifier's contract, are internal/attempt's (samples.go, harborexec.go);
// docs/harbor.md.
package specs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Set is a plan's sandbox specs: each task's (by plan task index) and each
// sample's own (by attempt.SampleKey).
type Set struct {
	Tasks   []*sandbox.Spec
	Samples map[string]*sandbox.Spec
}

// Make is the specs of p's tasks and of its samples with environments of
// their own, labelled with run runID.
func Make(p *plan.Plan, runID string) Set {
	s := Set{Samples: map[string]*sandbox.Spec{}}
	for _, t := range p.Tasks {
		s.Tasks = append(s.Tasks, Task(t.Task, runID))
	}
	for _, a := range p.Attempts {
		if !a.Sample.OwnEnvironment() {
			continue
		}
		k := attempt.SampleKey(a.Task, a.Sample.ID)
		if s.Samples[k] == nil {
			s.Samples[k] = Sample(p.Tasks[a.Task].Task, a.Sample, runID)
		}
	}
	return s
}

// Task is a task's sandbox spec.
func Task(t *evalset.Task, runID string) *sandbox.Spec {
	sb := t.Sandbox
	spec := &sandbox.Spec{
		RunID: runID, Task: t.Name, Image: sb.Image, Build: sb.Build, BuildNetwork: sb.BuildNetwork, Disk: int64(sb.Disk), CPUs: sb.CPUs, Memory: int64(sb.Memory),
		PIDs: sb.PIDs, Network: sb.Network, CapAdd: sb.CapAdd, Workdir: sb.Workdir, Env: map[string]string{},
	}
	maps.Copy(spec.Env, t.Env)
	return spec
}

// Sample is the sandbox spec of a sample with its own environment: its
// task's (provider settings, env, labels), with the sample's image or
// build, limits, network and workdir in place of the task's.
func Sample(t *evalset.Task, s *evalset.Sample, runID string) *sandbox.Spec {
	spec := Task(t, runID)
	sb := s.Sandbox
	spec.Image, spec.Build, spec.BuildNetwork, spec.BuildTimeout = sb.Image, sb.Build, sb.BuildNetwork, s.BuildTimeout.D()
	spec.CPUs, spec.Memory, spec.Disk, spec.PIDs = sb.CPUs, int64(sb.Memory), int64(sb.Disk), sb.PIDs
	spec.Network, spec.CapAdd, spec.Workdir = sb.Network, sb.CapAdd, sb.Workdir
	if h := s.Harbor; h != nil {
		// Harbor's tasks write outside their workdir (/logs, /tests, and
		// whatever they are about: /etc, installed packages).
		spec.WritableRoot = true
		maps.Copy(spec.Env, h.Env)
		// A compose environment: main is this sandbox, the other services run beside it.
		spec.Dockerfile, spec.Services = h.Dockerfile, append([]sandbox.Service(nil), h.Services...)
		// A network allowlist: the hosts its egress proxy lets through.
		spec.AllowedHosts = append([]string(nil), h.AllowedHosts...)
	}
	return spec
}

// NeedsImage says whether a task's sandboxes run an image: its own, or
// one of its samples' (a Harbor dataset's).
func NeedsImage(t *evalset.Task) bool {
	if t.Sandbox.Image != "" || t.Sandbox.Build != "" {
		return true
	}
	for _, s := range t.Samples {
		if s != nil && s.Sandbox != nil && (s.Sandbox.Image != "" || s.Sandbox.Build != "") {
			return true
		}
	}
	return false
}

// SampleKeys lists the samples' keys in order (specs are sized, resolved
// and prepared in a stable order).
func (s Set) SampleKeys() []string { return slices.Sorted(maps.Keys(s.Samples)) }

// TaskOf is the plan task index of an attempt.SampleKey.
func TaskOf(key string) int {
	i, _, _ := strings.Cut(key, "/")
	n, _ := strconv.Atoi(i)
	return n
}

// Clone is a copy of s whose specs preparing leaves s's as they were
// (Prepare sets the images, the services' too).
func (s Set) Clone() Set {
	c := Set{Tasks: make([]*sandbox.Spec, len(s.Tasks)), Samples: make(map[string]*sandbox.Spec, len(s.Samples))}
	for i, sp := range s.Tasks {
		c.Tasks[i] = clone(sp)
	}
	for k, sp := range s.Samples {
		c.Samples[k] = clone(sp)
	}
	return c
}

func clone(s *sandbox.Spec) *sandbox.Spec {
	c := *s
	c.Services = append([]sandbox.Service(nil), s.Services...)
	return &c
}

// OfProvider is every spec, the tasks' then the samples' in key order, of
// the tasks whose provider (taskProv, by plan task) is name: what the
// provider is sized for.
func (s Set) OfProvider(taskProv []string, name string) []sandbox.Spec {
	var out []sandbox.Spec
	for i, n := range taskProv {
		if n == name {
			out = append(out, *s.Tasks[i])
		}
	}
	for _, k := range s.SampleKeys() {
		if taskProv[TaskOf(k)] == name {
			out = append(out, *s.Samples[k])
		}
	}
	return out
}

// ImageRef is an image a task or a sample names by reference (a tag, not a
// build): its ID goes into the fingerprints.
type ImageRef struct {
	Task int
	Ref  string
}

// ImageRefs are the images named by reference, the tasks' then the
// samples' in key order.
func (s Set) ImageRefs() []ImageRef {
	var out []ImageRef
	for i, sp := range s.Tasks {
		if sp.Image != "" && sp.Build == "" {
			out = append(out, ImageRef{i, sp.Image})
		}
	}
	for _, k := range s.SampleKeys() {
		if sp := s.Samples[k]; sp.Image != "" && sp.Build == "" {
			out = append(out, ImageRef{TaskOf(k), sp.Image})
		}
	}
	return out
}

// Needed is what a provider prepares for the plan's work: the specs of
// the tasks with an attempt to run at a sample without an environment of
// its own, then the own specs of the samples with an attempt to run.
type Needed struct {
	Tasks   []*sandbox.Spec
	Samples []string // keys into Set.Samples
}

// All is every spec needed, the tasks' then the samples' (the provider's
// preflight).
func (n Needed) All(s Set) []*sandbox.Spec {
	out := append([]*sandbox.Spec(nil), n.Tasks...)
	for _, k := range n.Samples {
		out = append(out, s.Samples[k])
	}
	return out
}

// Needed is, by provider name (taskProv, by plan task), what each provider
// with work prepares for p's attempts to run.
func (s Set) Needed(p *plan.Plan, taskProv []string) map[string]*Needed {
	task := make([]bool, len(p.Tasks))
	sample := map[string]bool{}
	for _, a := range p.Attempts {
		switch {
		case a.Action != plan.ActionRun:
		case a.Sample.OwnEnvironment():
			sample[attempt.SampleKey(a.Task, a.Sample.ID)] = true
		default:
			task[a.Task] = true
		}
	}
	out := map[string]*Needed{}
	of := func(name string) *Needed {
		if out[name] == nil {
			out[name] = &Needed{}
		}
		return out[name]
	}
	for i, name := range taskProv {
		if task[i] {
			of(name).Tasks = append(of(name).Tasks, s.Tasks[i])
		}
	}
	for _, k := range s.SampleKeys() {
		if sample[k] {
			n := of(taskProv[TaskOf(k)])
			n.Samples = append(n.Samples, k)
		}
	}
	return out
}

// PrepareSamples prepares the samples' specs named by keys one by one
// (after the provider's own Prepare of the tasks'): a sample whose image
// does not build or is missing gets its error in errs, and only its
// attempts fail with it. A build directory shared by several samples is
// tried once. A cancelled ctx is returned as an error.
func (s Set) PrepareSamples(ctx context.Context, prov sandbox.Provider, keys []string, errs map[string]attempt.SampleEnvError, stderr io.Writer) error {
	byBuild := map[string]*attempt.SampleEnvError{}
	for _, k := range keys {
		sp := s.Samples[k]
		if e := byBuild[sp.Build]; sp.Build != "" && e != nil {
			errs[k] = *e
			continue
		}
		err := prov.Prepare(ctx, []*sandbox.Spec{sp})
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return err
		}
		e := attempt.SampleEnvError{Msg: err.Error(), Infra: errors.Is(err, sandbox.ErrInfra)}
		errs[k] = e
		if sp.Build != "" {
			byBuild[sp.Build] = &e
		}
		_, id, _ := strings.Cut(k, "/")
		fmt.Fprintf(stderr, "steward: sample %s of task %s: its environment is not ready, so its attempts are errored: %v\n", id, sp.Task, err)
	}
	return nil
}
