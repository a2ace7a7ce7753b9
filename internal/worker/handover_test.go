package worker

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/attempt"
	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/plan"
	"github.com/steward-evals/steward/internal/sandbox"
	"github.com/steward-evals/steward/internal/testfill"
)

const handSet = `
tasks:
  - name: first
    sandbox: {provider: local}
    agent: cat in.txt
    files: {in.txt: in.txt, note.txt: "data:,inline"}
    scorer: {command: sh grade.sh, files: {grade.sh: grade.sh}}
    attempts: 2
    samples:
      - {id: a, input: x, target: [x, y], metadata: {n: 12345678901234567}, files: {s.txt: s.txt}}
      - {id: b, input: y, target: y, files: {s.txt: s.txt}}
  - name: second
    sandbox: {provider: local}
    agent: echo hi
    samples:
      - {id: c, input: z, target: z}
`

// wire passes messages through the protocol's encoding, as a pipe would.
type wire struct {
	t *testing.T
	q []wireMsg
}

func (w *wire) send(m wireMsg) error {
	line, err := encodeMsg(m)
	if err != nil {
		return err
	}
	got, err := decodeMsg(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		w.t.Fatalf("%s: %v", line, err)
	}
	w.q = append(w.q, got)
	return nil
}

func (w *wire) next() (wireMsg, error) {
	m := w.q[0]
	w.q = w.q[1:]
	return m, nil
}

func loadPlan(t *testing.T, files map[string]string) (*plan.Plan, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	es, err := evalset.Load(filepath.Join(dir, "steward.yaml"), evalset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(es, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// A worker is handed its slice of the plan and rebuilds exactly what the
// supervisor planned from it (issue 26 item 3): each attempt of its tasks
// that runs, with the supervisor's fingerprint (a resolved image
// included); the task and sample definitions; the files' content as the
// supervisor's load read it (the files were edited on disk since: the
// worker never sees the edit); the prepared specs and a sample's
// environment error. Nothing of another worker's task, no carried attempt.
func TestHandoverRebuildsTheSlice(t *testing.T) {
	p, dir := loadPlan(t, map[string]string{"steward.yaml": handSet, "in.txt": "task file", "grade.sh": "exit 0", "s.txt": "sample file"})
	p.SetImageIDs(map[string]string{}) // nothing to resolve for local tasks: parts as planned
	p.Attempts[0].Parts["image"] = "image:x@sha256:resolved"
	p.Attempts[0].Fingerprint = "supervisor's"
	p.Attempts[1].Action = plan.ActionCarry // carried: never handed over
	for name, content := range map[string]string{"steward.yaml": strings.ReplaceAll(handSet, "cat in.txt", "rm -rf /"), "in.txt": "edited", "grade.sh": "exit 1", "s.txt": "edited"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	x := &attempt.Env{Plan: p, RunID: "run-1", Exe: "/bin/steward", Model: "m", ModelSettings: `{"temperature":0}`, TaskProv: []string{"local", "local"},
		Specs:       []*sandbox.Spec{{Task: "first", Image: "sha256:prepared", Env: map[string]string{"K": "v"}}, {Task: "second"}},
		SampleSpecs: map[string]*sandbox.Spec{attempt.SampleKey(0, "b"): {Task: "first", Image: "own"}},
		SampleErrs:  map[string]attempt.SampleEnvError{attempt.SampleKey(0, "b"): {Msg: "did not build", Infra: true}},
		GatewayURL:  map[string]string{"local": "http://127.0.0.1:1"}, JudgeURL: "http://127.0.0.1:2"}
	w := &wire{t: t}
	if err := handOver(x, "/rec/run.lock", []int{0}, w.send); err != nil {
		t.Fatal(err)
	}
	ini := w.q[0].(*msgInit).Init
	w.q = w.q[1:]
	got, err := receive(ini, w.next)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.q) != 0 {
		t.Fatalf("%d messages left over", len(w.q))
	}
	if got.RunID != "run-1" || got.Exe != "/bin/steward" || got.ModelSettings != `{"temperature":0}` || got.JudgeURL != "http://127.0.0.1:2" || ini.LockPath != "/rec/run.lock" {
		t.Errorf("run-wide values: %+v, init %+v", got, ini)
	}
	if got.Plan.Tasks[1] != nil || got.Specs[1] != nil {
		t.Errorf("another worker's task was handed over: %+v, %+v", got.Plan.Tasks[1], got.Specs[1])
	}
	var want []*plan.Attempt
	for _, a := range p.Attempts {
		if a.Task == 0 && a.Action == plan.ActionRun {
			want = append(want, a)
		}
	}
	if len(got.Plan.Attempts) != len(want) {
		t.Fatalf("%d attempts handed over, want %d", len(got.Plan.Attempts), len(want))
	}
	for i, a := range got.Plan.Attempts {
		w := want[i]
		if a.Seq != w.Seq || a.Number != w.Number || a.Fingerprint != w.Fingerprint || !reflect.DeepEqual(a.Parts, w.Parts) || a.Sample.ID != w.Sample.ID || a.Action != plan.ActionRun {
			t.Errorf("attempt %d: %+v, want %+v", i, a, w)
		}
		if a.Sample.InputJSON() != w.Sample.InputJSON() || !reflect.DeepEqual(a.Sample.Targets(), w.Sample.Targets()) || a.Sample.Source != w.Sample.Source {
			t.Errorf("attempt %d: sample %+v, want %+v", i, a.Sample, w.Sample)
		}
		m1, _ := json.Marshal(a.Sample.Metadata)
		m2, _ := json.Marshal(w.Sample.Metadata)
		if string(m1) != string(m2) {
			t.Errorf("metadata %s, want %s", m1, m2)
		}
	}
	def := got.Plan.Tasks[0].Task
	if def.Agent != "cat in.txt" || def.Scorer.Command != "sh grade.sh" || len(def.Samples) != 2 {
		t.Errorf("task definition %+v", def)
	}
	for _, src := range []string{def.Files["in.txt"], def.Files["note.txt"], def.Scorer.Files["grade.sh"], def.Samples[0].Files["s.txt"]} {
		b, _, err := got.Plan.EvalSet.FileData(src)
		wb, _, _ := p.EvalSet.FileData(src)
		if err != nil || !bytes.Equal(b, wb) || strings.Contains(string(b), "edited") {
			t.Errorf("%s: %q (%v), want %q as loaded", src, b, err, wb)
		}
	}
	if !reflect.DeepEqual(got.Specs[0], x.Specs[0]) || got.SampleSpecs[attempt.SampleKey(0, "b")].Image != "own" {
		t.Errorf("specs %+v, samples' %+v", got.Specs[0], got.SampleSpecs)
	}
	if e := got.SampleErrs[attempt.SampleKey(0, "b")]; e.Msg != "did not build" || !e.Infra {
		t.Errorf("sample error %+v", e)
	}
}

// The handover is strict: a message out of place, a task or sample not the
// worker's, or attempts out of order stop the worker with an error.
func TestHandoverRefusesWhatIsOutOfPlace(t *testing.T) {
	p, _ := loadPlan(t, map[string]string{"steward.yaml": handSet, "in.txt": "f", "grade.sh": "g", "s.txt": "s"})
	x := &attempt.Env{Plan: p, TaskProv: []string{"local", "local"}, Specs: []*sandbox.Spec{{Task: "first"}, {Task: "second"}}}
	for _, c := range []struct {
		name, want string
		edit       func(q []wireMsg) []wireMsg
	}{
		{"a sample before its task", "expected task 0", func(q []wireMsg) []wireMsg { return append([]wireMsg{q[1]}, q...) }},
		{"another task's sample", "not this worker's", func(q []wireMsg) []wireMsg {
			q[1].(*msgSample).Task = 1
			return q
		}},
		{"attempts out of order", "comes after", func(q []wireMsg) []wireMsg {
			a := q[1].(*msgSample).Attempts
			a[0], a[1] = a[1], a[0]
			return q
		}},
		{"a sample without attempts", "no attempts", func(q []wireMsg) []wireMsg {
			q[1].(*msgSample).Attempts = nil
			return q
		}},
		{"an abort in the handover", "expected sample", func(q []wireMsg) []wireMsg { return append(q[:1], &msgAbort{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &wire{t: t}
			if err := handOver(x, "", []int{0}, w.send); err != nil {
				t.Fatal(err)
			}
			ini := w.q[0].(*msgInit).Init
			w.q = c.edit(w.q[1:])
			if _, err := receive(ini, w.next); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// Every registered provider section crosses to a worker whole: the
// settings the supervisor decoded from _steward.yaml (and flags) are what
// the worker's providers receive, field for field. A worker reads no
// _steward.yaml: an edit during the launch cannot point its providers
// elsewhere.
func TestProviderSettingsCrossWhole(t *testing.T) {
	secs := sandbox.Sections()
	if len(secs) == 0 {
		t.Fatal("no provider section registered")
	}
	raw := map[string]json.RawMessage{}
	want := map[string]any{}
	for _, sec := range secs {
		v := sec.New()
		if err := testfill.Fill(reflect.ValueOf(v).Elem(), sec.Key, nil); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v) // as handOver sends evalset.Fleet.Providers
		if err != nil {
			t.Fatal(err)
		}
		raw[sec.Key] = b
		want[sec.Key] = v
		if sec.Value != nil {
			want[sec.Key] = sec.Value(v)
		}
	}
	got, err := decodeSettings(raw)
	if err != nil {
		t.Fatal(err)
	}
	for key, w := range want {
		if !reflect.DeepEqual(got[key], w) {
			t.Errorf("section %s came back as\n%+v\nwant\n%+v", key, got[key], w)
		}
	}
	raw["kubernetes"] = json.RawMessage(`{"namespce":"x"}`)
	raw["nosuch"] = json.RawMessage(`{}`)
	if _, err := decodeSettings(raw); err == nil {
		t.Error("a misspelt field or an unknown section was read")
	}
}

// Every field of the attempt environment crosses to a worker, or the
// worker makes it itself: a field added to attempt.Env that the handover
// does not carry fails here until it does (or is named below, with why).
func TestHandoverCarriesTheWholeEnv(t *testing.T) {
	made := map[string]string{
		"Providers":  "the worker makes its own providers (setup)",
		"GatewayURL": "handed in init, per provider, or asked for (setup)",
		"Stderr":     "the worker's own stderr",
		"Fault":      "the worker's own environment (STEWARD_WORKER_FAULT)",
		"Started":    "a hook: the worker tells the supervisor (started)",
		"Bind":       "a hook: the worker asks the supervisor (bind)",
		"Deadline":   "a hook: the worker asks the supervisor (deadline)",
	}
	p, _ := loadPlan(t, map[string]string{"steward.yaml": handSet, "in.txt": "f", "grade.sh": "g", "s.txt": "s"})
	key := attempt.SampleKey(0, "a")
	x := &attempt.Env{Plan: p, RunID: "r", Exe: "/steward", Model: "m", ModelSettings: "{}", TaskProv: []string{"local", "local"}, JudgeURL: "http://127.0.0.1:2",
		Specs: []*sandbox.Spec{{Task: "first"}, {Task: "second"}}, SampleSpecs: map[string]*sandbox.Spec{key: {Task: "first"}},
		SampleErrs: map[string]attempt.SampleEnvError{key: {Msg: "no"}}}
	w := &wire{t: t}
	if err := handOver(x, "", []int{0}, w.send); err != nil {
		t.Fatal(err)
	}
	ini := w.q[0].(*msgInit).Init
	w.q = w.q[1:]
	got, err := receive(ini, w.next)
	if err != nil {
		t.Fatal(err)
	}
	sent, came := reflect.ValueOf(x).Elem(), reflect.ValueOf(got).Elem()
	for i := 0; i < sent.NumField(); i++ {
		name := sent.Type().Field(i).Name
		if _, ok := made[name]; ok {
			continue
		}
		if sent.Field(i).IsZero() {
			t.Errorf("attempt.Env.%s: fill it in this test", name)
			continue
		}
		if came.Field(i).IsZero() {
			t.Errorf("attempt.Env.%s does not cross to the worker: hand it over (handover.go) or say here why the worker makes it", name)
		}
	}
}
