package run

import (
	"context"
	"fmt"

	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/runlock"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/shard"
	"github.com/steward-evals/steward/internal/specs"
)

// chosen is what the choose stage decided: a provider per task, each
// task's (and each sample's own) sandbox spec, the sandbox budget and its
// source, and --confirm's extra attempts. Through internal/plan's methods
// it put the resolved image IDs into the fingerprints (Plan.SetImageIDs),
// added the confirming attempts (Plan.Confirm) and kept this shard's
// (Plan.Keep).
type chosen struct {
	*loaded
	providers map[string]sandbox.Provider
	taskProv  []string // provider name per plan task
	exclusive []bool   // per plan task
	// specs are the tasks' sandbox specs and those of samples with
	// environments of their own (internal/specs), as chosen: prepare makes
	// its own copies and prepares those.
	specs     specs.Set
	budget    int
	budgetSrc string
	extras    []plan.Extra // --confirm's attempts
}

// choose picks each task's provider and the budget (C2, C3), resolves
// images named by tag into the fingerprints, adds --confirm's attempts and
// keeps this shard's.
func choose(ctx context.Context, ld *loaded) (*chosen, error) {
	ch := &chosen{loaded: ld}
	if err := ch.chooseProviders(ctx); err != nil {
		return nil, err
	}
	if err := ch.size(ctx); err != nil {
		return nil, err
	}
	ids, err := ch.resolveImages(ctx)
	if err != nil {
		return nil, err
	}
	ld.p.SetImageIDs(ids)
	if ch.extras, err = ld.confirm(ctx); err != nil {
		return nil, err
	}
	if ld.opts.Shard != "" {
		i, n, err := shard.Parse(ld.opts.Shard)
		if err != nil {
			return nil, badInput("--shard: %v", err)
		}
		// A sample's attempts stay together, group lanes and tasks sharing
		// a lease key never split; Seq stays the attempt's index in the
		// whole eval set's discovery order, so merged shard records sort
		// back into one run's order (C8).
		keep := ld.p.SelectShard(i, n, ld.durationHistory(ctx))
		ld.p.Keep(func(seq int) bool { return keep[seq] })
	}
	return ch, nil
}

// chooseProviders picks each task's provider from the registry and makes
// one of each for the run; it makes the specs.
func (ch *chosen) chooseProviders(ctx context.Context) error {
	p, opts := ch.p, ch.opts
	ch.providers = map[string]sandbox.Provider{}
	ch.taskProv = make([]string, len(p.Tasks))
	ch.exclusive = make([]bool, len(p.Tasks))
	available := availability(ctx, opts.Providers)
	for i, t := range p.Tasks {
		name, err := sandbox.Choose(t.Task.Sandbox.Provider, specs.NeedsImage(t.Task), available)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Task.Name, err)
		}
		ch.taskProv[i] = name
		ch.exclusive[i] = sandbox.IsExclusive(name) && (t.Task.Exclusive == nil || *t.Task.Exclusive)
		if _, made := ch.providers[name]; made {
			continue
		}
		if opts.Providers == nil {
			return fmt.Errorf("no sandbox provider factory")
		}
		prov, err := opts.Providers.Provider(ctx, name, RunInfo{RunID: ch.runID, LockPath: ch.lockPath(), Stderr: opts.Stderr, Settings: ch.es.Fleet.ProviderSettings(), Liveness: runlock.Liveness{}})
		if err != nil {
			return fmt.Errorf("sandbox provider %s (task %s): %w", name, t.Task.Name, err)
		}
		ch.providers[name] = prov
	}
	ch.specs = specs.Make(p, ch.runID)
	return nil
}

// size asks each provider its capacity for its specs and sets the budget
// and its source (sandbox.Budget: flag → config → the providers' defaults).
func (ch *chosen) size(ctx context.Context) error {
	caps := map[string]sandbox.Capacity{}
	for name, prov := range ch.providers {
		c, err := prov.Capacity(ctx, ch.specs.OfProvider(ch.taskProv, name))
		if err != nil {
			return fmt.Errorf("size the %s provider: %w", name, err)
		}
		caps[name] = c
	}
	allExclusive := true
	for _, e := range ch.exclusive {
		allExclusive = allExclusive && e
	}
	ch.budget, ch.budgetSrc = sandbox.Budget(ch.opts.Concurrency, ch.es.Fleet.MaxSandboxes, caps, allExclusive)
	return nil
}

// durationHistory maps "task/sample#n" to the seconds its newest run took
// (carried rows and rows without a duration do not count), over a few newest runs.
func (ld *loaded) durationHistory(ctx context.Context) map[string]float64 {
	if ld.db == nil {
		return nil
	}
	runs, err := ld.db.Runs(ctx)
	if err != nil {
		return nil
	}
	hist := map[string]float64{}
	for i, r := range runs {
		if i >= 5 {
			break
		}
		as, err := ld.db.Attempts(ctx, r.ID)
		if err != nil {
			continue
		}
		for _, a := range as {
			k := fmt.Sprintf("%s/%s#%d", a.Task, a.Sample, a.Attempt)
			if _, seen := hist[k]; seen || a.CarriedFrom != "" || a.Duration <= 0 {
				continue
			}
			hist[k] = a.Duration.Seconds()
		}
	}
	return hist
}

// imageResolver is implemented by providers that can say which image a
// reference (a tag) names now.
type imageResolver interface {
	ImageID(ctx context.Context, ref string) (string, error)
}

// resolveImages finds the IDs of the images that tasks (and samples with
// environments of their own) name by reference, for their fingerprints (a
// retagged image must not carry stale results). An image the provider does
// not have keeps its reference: preparing the run says it is missing.
func (ch *chosen) resolveImages(ctx context.Context) (map[string]string, error) {
	ids := map[string]string{}
	for _, n := range ch.specs.ImageRefs() {
		if _, done := ids[n.Ref]; done {
			continue
		}
		res, ok := ch.providers[ch.taskProv[n.Task]].(imageResolver)
		if !ok {
			continue
		}
		id, err := res.ImageID(ctx, n.Ref)
		if err != nil {
			return nil, fmt.Errorf("resolve image %s of task %s: %w", n.Ref, ch.p.Tasks[n.Task].Task.Name, err)
		}
		ids[n.Ref] = id
	}
	return ids, nil
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
