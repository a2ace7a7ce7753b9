package evalset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/score"
	"github.com/steward-evals/steward/internal/testfill"
)

// fill sets every exported field reachable from v to a value that is not
// its zero, the evalset types with rules of their own to valid ones.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	err := testfill.Fill(v, path, func(v reflect.Value) bool {
		switch v.Type() {
		case reflect.TypeOf(score.Reducer{}):
			v.Set(reflect.ValueOf(score.Reducer{Kind: score.ReduceAtLeast, K: 2}))
		case reflect.TypeOf(score.Match("")):
			v.Set(reflect.ValueOf(score.Regex))
		case reflect.TypeOf(Duration(0)):
			v.Set(reflect.ValueOf(Duration(90 * time.Second)))
		case reflect.TypeOf(RampRange{}):
			v.Set(reflect.ValueOf(RampRange{Enabled: true, Lo: 2, Hi: 9}))
		default:
			return false
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A task's and a sample's definitions cross to a worker whole: every
// exported field, those their JSON leaves out included, comes back equal.
// A field added later is filled here too, so one the wire drops fails this.
func TestWireCarriesEveryField(t *testing.T) {
	var task Task
	fill(t, reflect.ValueOf(&task).Elem(), "task")
	b, err := TaskJSON(&task)
	if err != nil {
		t.Fatal(err)
	}
	got, err := TaskFromJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	want := task
	want.Samples = nil
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("task came back as\n%+v\nwant\n%+v", *got, want)
	}

	var s Sample
	fill(t, reflect.ValueOf(&s).Elem(), "sample")
	s.Target = []string{"a", "b"} // as Load leaves a list of targets
	s.Input = []any{map[string]any{"role": "user", "content": "hi"}}
	b, err = SampleJSON(&s)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := SampleFromJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*gs, s) {
		t.Errorf("sample came back as\n%+v\nwant\n%+v", *gs, s)
	}
}

// Numbers in a sample's input and metadata read the same after the trip
// (the agent's STEWARD_INPUT_JSON and STEWARD_METADATA), however large.
func TestWireKeepsNumbers(t *testing.T) {
	s := &Sample{ID: "n", Input: []any{map[string]any{"role": "user", "content": "x", "n": 9007199254740993}},
		Metadata: map[string]any{"big": 9007199254740993, "f": 0.1, "list": []any{1, "two"}}}
	b, err := SampleJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SampleFromJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.InputJSON() != s.InputJSON() {
		t.Errorf("input JSON %s, want %s", got.InputJSON(), s.InputJSON())
	}
	m1, _ := json.Marshal(s.Metadata)
	m2, _ := json.Marshal(got.Metadata)
	if string(m1) != string(m2) {
		t.Errorf("metadata %s, want %s", m2, m1)
	}
}

// The wire is as strict as the worker protocol: a field a definition does
// not have is an error, never skipped.
func TestWireRefusesUnknownFields(t *testing.T) {
	if _, err := TaskFromJSON([]byte(`{"name":"t","agnet":"x"}`)); err == nil || !strings.Contains(err.Error(), "agnet") {
		t.Errorf("task: %v", err)
	}
	if _, err := TaskFromJSON([]byte(`{"name":"t","samples":[{"id":"a"}]}`)); err == nil {
		t.Error("a task with samples inline was read")
	}
	if _, err := SampleFromJSON([]byte(`{"id":"a","harbour":{}}`)); err == nil || !strings.Contains(err.Error(), "harbour") {
		t.Errorf("sample: %v", err)
	}
}

// Rebuilt answers FileData from the snapshot it was given, not from disk.
func TestRebuiltReadsTheSnapshot(t *testing.T) {
	dir := writeTree(t, map[string]string{"steward.yaml": `
tasks:
  - name: t
    sandbox: {provider: local}
    agent: cat in.txt
    files: {in.txt: in.txt, inline.txt: "data:,hi"}
    scorer: {command: "true", files: {grade.sh: grade.sh}}
    samples:
      - {id: a, input: x, files: {s.txt: s.txt}}
`, "in.txt": "task file", "grade.sh": "exit 0", "s.txt": "sample file"})
	path := filepath.Join(dir, "steward.yaml")
	es, err := Load(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	task := es.Tasks[0]
	srcs := append(task.Sources(), task.Samples[0].Sources()...)
	if len(srcs) != 3 {
		t.Fatalf("sources %v, want the three files (not the data URL)", srcs)
	}
	snap, err := es.Snapshot(srcs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("edited since"), 0o644); err != nil {
		t.Fatal(err)
	}
	re := Rebuilt(es.File, es.Dir, es.Model, []*Task{task}, snap)
	for src, want := range map[string]string{task.Files["in.txt"]: "task file", task.Scorer.Files["grade.sh"]: "exit 0", task.Samples[0].Files["s.txt"]: "sample file", "data:,hi": "hi"} {
		b, _, err := re.FileData(src)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", src, b, err, want)
		}
	}
	if _, err := es.Snapshot([]string{dir + "/never-read"}); err == nil {
		t.Error("a source Load never read was snapshotted")
	}
}
