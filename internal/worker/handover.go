package worker

import (
	"encoding/json"
	"fmt"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
)

// A worker is handed its slice of the plan (issue 26 item 3): the
// definitions of its tasks and of their samples with attempts to run, the
// content of the files they name as the eval set's load read it, each
// attempt with its fingerprint, and what the supervisor prepared once for
// the run (specs with their images, samples' environments or why they are
// not ready, gateway URLs, the providers' networks and settings). It reads
// no eval set and no _steward.yaml: whatever happens to them during the
// launch, a worker runs exactly what its results' fingerprints name.

// Init is the first message a worker receives: the run, and what the
// supervisor prepared once for it (W1). Then come a task message for each
// of Tasks and Samples sample messages.
type Init struct {
	RunID    string `json:"run_id"`
	LockPath string `json:"lock_path"`
	Exe      string `json:"exe"`
	// EvalSetFile and EvalSetDir name the eval set (for the messages of
	// what runs); Model is its model. A worker reads neither file.
	EvalSetFile string        `json:"evalset_file"`
	EvalSetDir  string        `json:"evalset_dir"`
	Model       evalset.Model `json:"model"`
	// ModelName and ModelSettings are what agents are told of the model
	// (attempt.Env's Model and ModelSettings).
	ModelName     string `json:"model_name,omitempty"`
	ModelSettings string `json:"model_settings,omitempty"`
	// Tasks are the worker's tasks, as indexes into TaskProv, every task's
	// provider.
	Tasks    []int    `json:"tasks"`
	TaskProv []string `json:"task_prov"`
	// Samples is how many sample messages follow the task messages.
	Samples    int               `json:"samples"`
	GatewayURL map[string]string `json:"gateway_url,omitempty"`
	// JudgeURL is the gateway's loopback listener for the model judge.
	JudgeURL string `json:"judge_url,omitempty"`
	// Shared are the providers' run-wide resources (networks) the worker's
	// providers adopt instead of making their own; Settings are the
	// providers' sections of _steward.yaml as the supervisor decoded them.
	Shared   map[string]json.RawMessage `json:"shared,omitempty"`
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
}

// handedAttempt is one attempt to run, as the supervisor planned it.
type handedAttempt struct {
	Seq         int               `json:"seq"`
	Number      int               `json:"attempt"`
	Lane        string            `json:"lane,omitempty"`
	Fingerprint string            `json:"fingerprint"`
	Parts       map[string]string `json:"parts"`
}

// sharer is a provider whose run-wide resources (networks) one process
// prepares and others adopt.
type sharer interface {
	SharedState() (json.RawMessage, error)
	AdoptShared(json.RawMessage) error
}

// work is one sample of a worker's with its attempts to run.
type work struct {
	task     int
	sample   *evalset.Sample
	attempts []*plan.Attempt
}

// samplesOf lists the samples of tasks with attempts to run, in discovery
// order, each with those attempts (a sample's are consecutive in Seq).
func samplesOf(p *plan.Plan, tasks []int) []work {
	mine := map[int]bool{}
	for _, ti := range tasks {
		mine[ti] = true
	}
	var out []work
	for _, a := range p.Attempts {
		if !mine[a.Task] || a.Action != plan.ActionRun {
			continue
		}
		if n := len(out); n > 0 && out[n-1].task == a.Task && out[n-1].sample == a.Sample {
			out[n-1].attempts = append(out[n-1].attempts, a)
			continue
		}
		out = append(out, work{task: a.Task, sample: a.Sample, attempts: []*plan.Attempt{a}})
	}
	return out
}

// handOver sends a worker its slice of x's plan, for tasks: init, a task
// message each, a sample message each. A file's content travels once.
func handOver(x *attempt.Env, lockPath string, tasks []int, send func(wireMsg) error) error {
	es := x.Plan.EvalSet
	samples := samplesOf(x.Plan, tasks)
	ini := &Init{RunID: x.RunID, LockPath: lockPath, Exe: x.Exe, EvalSetFile: es.File, EvalSetDir: es.Dir, Model: es.Model,
		ModelName: x.Model, ModelSettings: x.ModelSettings, Tasks: tasks, TaskProv: x.TaskProv, Samples: len(samples),
		GatewayURL: x.GatewayURL, JudgeURL: x.JudgeURL, Shared: map[string]json.RawMessage{}, Settings: map[string]json.RawMessage{}}
	for name, prov := range x.Providers {
		if sh, ok := prov.(sharer); ok {
			if st, err := sh.SharedState(); err == nil {
				ini.Shared[name] = st
			}
		}
	}
	for key, v := range es.Fleet.Providers {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("provider settings %s: %w", key, err)
		}
		ini.Settings[key] = b
	}
	if err := send(msgInit{Init: ini}); err != nil {
		return err
	}
	sent := map[string]bool{}
	files := func(srcs []string) (fileMap, error) {
		var todo []string
		for _, src := range srcs {
			if !sent[src] {
				sent[src] = true
				todo = append(todo, src)
			}
		}
		return es.Snapshot(todo)
	}
	for _, ti := range tasks {
		t := x.Plan.Tasks[ti].Task
		def, err := evalset.TaskJSON(t)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Name, err)
		}
		fs, err := files(t.Sources())
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Name, err)
		}
		if err := send(msgTask{Index: ti, Def: def, Spec: x.Specs[ti], Files: fs}); err != nil {
			return err
		}
	}
	for _, w := range samples {
		m, err := sampleMsg(x, w, files)
		if err != nil {
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
	return nil
}

func sampleMsg(x *attempt.Env, w work, files func([]string) (fileMap, error)) (msgSample, error) {
	s := w.sample
	def, err := evalset.SampleJSON(s)
	if err != nil {
		return msgSample{}, fmt.Errorf("sample %s: %w", s.ID, err)
	}
	fs, err := files(s.Sources())
	if err != nil {
		return msgSample{}, fmt.Errorf("sample %s: %w", s.ID, err)
	}
	m := msgSample{Task: w.task, Def: def, Files: fs, Spec: x.SampleSpecs[attempt.SampleKey(w.task, s.ID)]}
	if e, ok := x.SampleErrs[attempt.SampleKey(w.task, s.ID)]; ok {
		m.EnvErr = &e
	}
	for _, a := range w.attempts {
		m.Attempts = append(m.Attempts, handedAttempt{Seq: a.Seq, Number: a.Number, Lane: a.Lane, Fingerprint: a.Fingerprint, Parts: a.Parts})
	}
	return m, nil
}

// received is a worker's slice of the plan as it came.
type received struct {
	ini   *Init
	tasks map[int]*evalset.Task
	specs map[int]*sandbox.Spec
	files fileMap
	x     *attempt.Env
}

// receive reads what follows init (next: the supervisor's next message)
// and makes the environment the worker's attempts run in, without
// providers or gateway URLs yet (setup adds them). Anything out of place
// (a message of another op, a task or sample not the worker's, attempts
// out of order) is an error.
func receive(ini *Init, next func() (wireMsg, error)) (*attempt.Env, error) {
	r := &received{ini: ini, tasks: map[int]*evalset.Task{}, specs: map[int]*sandbox.Spec{}, files: fileMap{}}
	n := len(ini.TaskProv)
	for _, ti := range ini.Tasks {
		if ti < 0 || ti >= n || r.tasks[ti] != nil {
			return nil, fmt.Errorf("worker: init names task %d of %d (or twice)", ti, n)
		}
		m, err := next()
		if err != nil {
			return nil, err
		}
		tm, ok := m.(*msgTask)
		if !ok || tm.Index != ti {
			return nil, fmt.Errorf("worker: expected task %d, the supervisor sent %s", ti, m.op())
		}
		if r.tasks[ti], err = evalset.TaskFromJSON(tm.Def); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		r.specs[ti] = tm.Spec
		r.addFiles(tm.Files)
	}
	r.x = &attempt.Env{Specs: make([]*sandbox.Spec, n), SampleSpecs: map[string]*sandbox.Spec{}, SampleErrs: map[string]attempt.SampleEnvError{},
		TaskProv: ini.TaskProv, GatewayURL: map[string]string{}, JudgeURL: ini.JudgeURL, RunID: ini.RunID, Exe: ini.Exe,
		Model: ini.ModelName, ModelSettings: ini.ModelSettings}
	var attempts []*plan.Attempt
	for i := 0; i < ini.Samples; i++ {
		m, err := next()
		if err != nil {
			return nil, err
		}
		sm, ok := m.(*msgSample)
		if !ok {
			return nil, fmt.Errorf("worker: expected sample %d of %d, the supervisor sent %s", i+1, ini.Samples, m.op())
		}
		if attempts, err = r.sample(sm, attempts); err != nil {
			return nil, err
		}
	}
	return r.env(attempts), nil
}

func (r *received) addFiles(fs fileMap) {
	for src, f := range fs {
		r.files[src] = f
	}
}

// sample takes one sample message, appending its attempts to attempts.
func (r *received) sample(m *msgSample, attempts []*plan.Attempt) ([]*plan.Attempt, error) {
	t := r.tasks[m.Task]
	if t == nil {
		return nil, fmt.Errorf("worker: a sample of task %d, which is not this worker's", m.Task)
	}
	s, err := evalset.SampleFromJSON(m.Def)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if len(m.Attempts) == 0 {
		return nil, fmt.Errorf("worker: sample %s/%s has no attempts to run", t.Name, s.ID)
	}
	t.Samples = append(t.Samples, s)
	r.addFiles(m.Files)
	key := attempt.SampleKey(m.Task, s.ID)
	if m.Spec != nil {
		r.x.SampleSpecs[key] = m.Spec
	}
	if m.EnvErr != nil {
		r.x.SampleErrs[key] = *m.EnvErr
	}
	for _, h := range m.Attempts {
		if n := len(attempts); n > 0 && h.Seq <= attempts[n-1].Seq {
			return nil, fmt.Errorf("worker: attempt %d of %s/%s comes after attempt %d", h.Seq, t.Name, s.ID, attempts[n-1].Seq)
		}
		attempts = append(attempts, &plan.Attempt{Seq: h.Seq, Task: m.Task, Sample: s, Number: h.Number, Lane: h.Lane,
			Fingerprint: h.Fingerprint, Parts: h.Parts, Action: plan.ActionRun})
	}
	return attempts, nil
}

// env puts the plan together: the worker's tasks at their indexes (the
// others nil: not this worker's), its attempts in Seq order. Tasks have no
// Order: the supervisor dispatches.
func (r *received) env(attempts []*plan.Attempt) *attempt.Env {
	ini := r.ini
	var defs []*evalset.Task
	tasks := make([]*plan.Task, len(ini.TaskProv))
	for _, ti := range ini.Tasks {
		defs = append(defs, r.tasks[ti])
		tasks[ti] = &plan.Task{Index: ti, Task: r.tasks[ti]}
		r.x.Specs[ti] = r.specs[ti]
	}
	es := evalset.Rebuilt(ini.EvalSetFile, ini.EvalSetDir, ini.Model, defs, r.files)
	r.x.Plan = &plan.Plan{EvalSet: es, Tasks: tasks, Attempts: attempts}
	return r.x
}
