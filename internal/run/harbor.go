package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
)

// Samples with environments of their own (a Harbor dataset, tasks_from:
// harbor) run each in a sandbox of its own spec: the sample's image or
// build (content-hash cached, built once per run with the task's), its
// resources, network and workdir, a writable root (Harbor tasks write
// outside their workdir) and its own agent and verifier timeouts. The
// Harbor verifier's contract, and the attempt's side of these samples, are
// internal/attempt's (harborexec.go, samples.go); docs/harbor.md.

// printWarnings says what the eval set asks for that Steward ignores.
func printWarnings(w io.Writer, es *evalset.EvalSet) {
	for _, warn := range es.Warnings {
		fmt.Fprintf(w, "steward: warning: %s\n", warn.Error())
	}
}

// needsImage says whether a task's sandboxes run an image: its own, or
// one of its samples' (a Harbor dataset's).
func needsImage(t *evalset.Task) bool {
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

// sampleSpecFor is the sandbox spec of a sample with its own environment:
// its task's (provider settings, env, labels), with the sample's image or
// build, limits, network and workdir in place of the task's.
func sampleSpecFor(t *evalset.Task, s *evalset.Sample, runID string) *sandbox.Spec {
	spec := specFor(t, runID)
	sb := s.Sandbox
	spec.Image, spec.Build, spec.BuildNetwork, spec.BuildTimeout = sb.Image, sb.Build, sb.BuildNetwork, s.BuildTimeout.D()
	spec.CPUs, spec.Memory, spec.Disk, spec.PIDs = sb.CPUs, int64(sb.Memory), int64(sb.Disk), sb.PIDs
	spec.Network, spec.CapAdd, spec.Workdir = sb.Network, sb.CapAdd, sb.Workdir
	if h := s.Harbor; h != nil {
		// Harbor's tasks write outside their workdir (/logs, /tests, and
		// whatever they are about: /etc, installed packages).
		spec.WritableRoot = true
		for k, v := range h.Env {
			spec.Env[k] = v
		}
		// A compose environment: main is this sandbox, the other services run beside it.
		spec.Dockerfile, spec.Services = h.Dockerfile, append([]sandbox.Service(nil), h.Services...)
		// A network allowlist: the hosts its egress proxy lets through.
		spec.AllowedHosts = append([]string(nil), h.AllowedHosts...)
	}
	return spec
}

// sampleSpecs are the specs of the plan's samples with environments of
// their own, by attempt.SampleKey.
func sampleSpecs(p *plan.Plan, runID string) map[string]*sandbox.Spec {
	out := map[string]*sandbox.Spec{}
	for _, a := range p.Attempts {
		if !a.Sample.OwnEnvironment() {
			continue
		}
		k := attempt.SampleKey(a.Task, a.Sample.ID)
		if out[k] == nil {
			out[k] = sampleSpecFor(p.Tasks[a.Task].Task, a.Sample, runID)
		}
	}
	return out
}

// sortedSpecKeys lists m's keys in order (Prepare builds in a stable order).
func sortedSpecKeys(m map[string]*sandbox.Spec) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// refuseUnsupportedEnvironments refuses a launch whose samples carry
// environments of their own on a provider that cannot run them (a spec per
// sample, a writable root, the shared verifier: sandbox.SampleEnvironments),
// naming the first such task.
func (l *chosen) refuseUnsupportedEnvironments() error {
	for _, a := range l.p.Attempts {
		if a.Action != plan.ActionRun || !(a.Sample.OwnEnvironment() || a.Sample.Harbor != nil) {
			continue
		}
		name := l.taskProv[a.Task]
		if se, ok := l.providers[name].(sandbox.SampleEnvironments); ok && se.RunsSampleEnvironments() {
			continue
		}
		t := l.p.Tasks[a.Task].Task
		return badInput("task %s: its samples carry environments of their own (a Harbor dataset: tasks_from), which the %s provider cannot run yet (a sandbox per sample's image, a writable root, the verifier in the agent's own sandbox): use sandbox.provider: docker (or kubernetes with docker_image); see docs/harbor.md", t.Name, name)
	}
	return nil
}

// prepareSampleSpecs prepares the sample specs one by one (after the
// provider's own Prepare): a sample whose image does not build or is
// missing gets its error in errs, and only its attempts fail with it. A
// build directory shared by several samples is tried once. A cancelled ctx
// is returned as an error.
func prepareSampleSpecs(ctx context.Context, prov sandbox.Provider, keys []string, specs map[string]*sandbox.Spec, errs map[string]attempt.SampleEnvError, stderr io.Writer) error {
	byBuild := map[string]*attempt.SampleEnvError{}
	for _, k := range keys {
		sp := specs[k]
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

// taskOfKey is the task index of an attempt.SampleKey.
func taskOfKey(k string) (int, error) {
	i, _, _ := strings.Cut(k, "/")
	return strconv.Atoi(i)
}
