package specs

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/sandbox/local"
	_ "github.com/steward-evals/steward/internal/sandbox/providers" // the eval set names docker and kubernetes
)

// twoTasks is an eval set of a task of its own image (by tag, two
// samples) and a Harbor dataset's task (testdata/harbor: four samples,
// each with an environment of its own, built from its Dockerfile).
func twoTasks(t *testing.T) *plan.Plan {
	t.Helper()
	dir := t.TempDir()
	fixtures, err := filepath.Abs("../../testdata/harbor")
	if err != nil {
		t.Fatal(err)
	}
	yaml := `
tasks:
  - name: own
    sandbox: {provider: docker, image: "busybox:tagged", memory: 64m}
    env: {FROM_TASK: own}
    agent: 'true'
    samples: [{id: a, input: x, target: x}, {id: b, input: y, target: y}]
  - name: fixtures
    sandbox: {provider: docker}
    env: {FROM_TASK: fixtures}
    agent: 'true'
    tasks_from: {harbor: ` + fixtures + `}
`
	path := filepath.Join(dir, "steward.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := evalset.Load(path, evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(es, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A task's spec is its sandbox and env; a sample's own is its task's with
// the sample's image or build, limits, network and workdir, a writable root
// and the Harbor task's env; one per sample, keyed by attempt.SampleKey.
func TestMake(t *testing.T) {
	p := twoTasks(t)
	s := Make(p, "run-1")
	if len(s.Tasks) != 2 || s.Tasks[0].RunID != "run-1" || s.Tasks[0].Image != "busybox:tagged" || s.Tasks[0].Memory != 64<<20 || s.Tasks[0].Env["FROM_TASK"] != "own" {
		t.Fatalf("task specs %+v", s.Tasks)
	}
	want := []string{"1/background-server", "1/reward-json", "1/system-state", "1/timeout", "1/write-file"}
	if got := s.SampleKeys(); !reflect.DeepEqual(got, want) {
		t.Fatalf("sample keys %v, want %v", got, want)
	}
	wf := s.Samples[attempt.SampleKey(1, "write-file")]
	if wf.Task != "fixtures" || wf.Build == "" || wf.Image != "" || !wf.WritableRoot || wf.Workdir != "/app" || wf.Memory != 256<<20 || wf.CPUs != 1 || wf.Env["FROM_TASK"] != "fixtures" {
		t.Errorf("write-file's own spec %+v", wf)
	}
	if TaskOf("1/write-file") != 1 || TaskOf(attempt.SampleKey(12, "a/b")) != 12 {
		t.Error("TaskOf does not read the task index back")
	}
	if !NeedsImage(p.Tasks[1].Task) || !NeedsImage(p.Tasks[0].Task) {
		t.Error("both tasks' sandboxes run images (the Harbor task's through its samples)")
	}
	plain := &evalset.Task{Name: "plain", Samples: []*evalset.Sample{{ID: "s"}}}
	if NeedsImage(plain) {
		t.Error("a task without an image or a sample's own needs none")
	}
}

// Preparing a clone leaves the chosen specs as they were.
func TestClone(t *testing.T) {
	s := Make(twoTasks(t), "run-1")
	c := s.Clone()
	for i := range c.Tasks {
		c.Tasks[i].Image = "sha256:prepared"
	}
	for _, sp := range c.Samples {
		sp.Image = "sha256:built"
		sp.Services = append(sp.Services, sandbox.Service{Name: "db"})
	}
	if s.Tasks[0].Image != "busybox:tagged" || s.Tasks[1].Image != "" {
		t.Errorf("the tasks' specs changed with their clone's: %+v", s.Tasks)
	}
	for k, sp := range s.Samples {
		if sp.Image != "" || len(sp.Services) != 0 {
			t.Errorf("%s changed with its clone: %+v", k, sp)
		}
	}
}

// What a provider prepares and is sized for: the tasks with an attempt to
// run at a sample without an environment of its own, the samples' own
// specs with an attempt to run; images named by tag, in a stable order.
func TestNeededOfProviderImageRefs(t *testing.T) {
	p := twoTasks(t)
	s := Make(p, "run-1")
	taskProv := []string{"docker", "kubernetes"}
	for _, a := range p.Attempts {
		if a.Task == 1 && a.Sample.ID != "timeout" || a.Task == 0 && a.Sample.ID == "a" {
			continue
		}
		a.Action = plan.ActionCarry
	}
	needed := s.Needed(p, taskProv)
	if len(needed) != 2 {
		t.Fatalf("needed by %d providers, want 2: %v", len(needed), needed)
	}
	if d := needed["docker"]; len(d.Tasks) != 1 || d.Tasks[0] != s.Tasks[0] || len(d.Samples) != 0 {
		t.Errorf("docker prepares %+v", d)
	}
	k := needed["kubernetes"]
	if len(k.Tasks) != 0 || !reflect.DeepEqual(k.Samples, []string{"1/background-server", "1/reward-json", "1/system-state", "1/write-file"}) {
		t.Errorf("kubernetes prepares %+v", k)
	}
	if all := k.All(s); len(all) != 4 || all[0] != s.Samples["1/background-server"] {
		t.Errorf("kubernetes' preflight sees %v", all)
	}
	for _, a := range p.Attempts {
		a.Action = plan.ActionCarry
	}
	if n := s.Needed(p, taskProv); len(n) != 0 {
		t.Errorf("nothing runs, yet %v is needed", n)
	}
	if of := s.OfProvider(taskProv, "kubernetes"); len(of) != 6 || of[0].Task != "fixtures" || of[1].Build == "" || of[5].Build != s.Samples["1/write-file"].Build {
		t.Errorf("the kubernetes provider is sized for %+v", of)
	}
	if of := s.OfProvider(taskProv, "docker"); len(of) != 1 || of[0].Image != "busybox:tagged" {
		t.Errorf("the docker provider is sized for %+v", of)
	}
	if refs := s.ImageRefs(); !reflect.DeepEqual(refs, []ImageRef{{0, "busybox:tagged"}}) {
		t.Errorf("image refs %v (built images have none)", refs)
	}
}

// Samples' specs a provider prepares without complaint get no error.
func TestPrepareSamplesReady(t *testing.T) {
	s := Make(twoTasks(t), "run-1")
	errs := map[string]attempt.SampleEnvError{}
	prov := local.New(local.Options{BaseDir: t.TempDir()})
	if err := s.PrepareSamples(context.Background(), prov, s.SampleKeys(), errs, os.Stderr); err != nil || len(errs) != 0 {
		t.Fatalf("prepare: %v, errors %v", err, errs)
	}
}
