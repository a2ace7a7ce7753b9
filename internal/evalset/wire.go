package evalset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// An eval set crosses to a worker process (W1) as values, never as a path
// to read again: the supervisor reads the eval set once, and a worker runs
// the definitions the supervisor planned, whatever happened to the files
// since. TaskJSON and SampleJSON carry every field a definition has (the
// ones its JSON leaves out too: a sample's own environment, its Harbor
// contract, its source line); Snapshot carries the files: sources as Load
// read them; Rebuilt puts them together again in the worker.

// SnapshotFile is a files: source as Load read it.
type SnapshotFile struct {
	Data []byte `json:"data"`
	Mode int64  `json:"mode"`
}

// wireTask is a task's definition on the wire: its JSON, its line, and no
// samples (each travels on its own, SampleJSON).
type wireTask struct {
	Task
	Samples []*Sample `json:"samples,omitempty"` // shadows Task.Samples: always empty
	Line    int       `json:"line,omitempty"`
}

// wireSample is a sample on the wire: its JSON and the fields its JSON
// leaves out.
type wireSample struct {
	Sample
	Source        string        `json:"source,omitempty"`
	Sandbox       *Sandbox      `json:"sandbox,omitempty"`
	Timeout       Duration      `json:"timeout,omitempty"`
	ScorerTimeout Duration      `json:"scorer_timeout,omitempty"`
	BuildTimeout  Duration      `json:"build_timeout,omitempty"`
	Harbor        *HarborSample `json:"harbor,omitempty"`
}

// TaskJSON is t's definition without its samples, for TaskFromJSON.
func TaskJSON(t *Task) (json.RawMessage, error) {
	w := wireTask{Task: *t, Line: t.Line}
	w.Task.Samples = nil
	return json.Marshal(w)
}

// TaskFromJSON reads TaskJSON's output; a field a task does not have is an
// error. The task has no samples.
func TaskFromJSON(b []byte) (*Task, error) {
	var w wireTask
	if err := strictJSON(b, &w); err != nil {
		return nil, fmt.Errorf("task definition: %w", err)
	}
	if len(w.Samples) > 0 {
		return nil, fmt.Errorf("task definition: samples travel on their own")
	}
	t := w.Task
	t.Samples, t.Line = nil, w.Line
	return &t, nil
}

// SampleJSON is s's definition, for SampleFromJSON.
func SampleJSON(s *Sample) (json.RawMessage, error) {
	return json.Marshal(wireSample{Sample: *s, Source: s.Source, Sandbox: s.Sandbox, Timeout: s.Timeout,
		ScorerTimeout: s.ScorerTimeout, BuildTimeout: s.BuildTimeout, Harbor: s.Harbor})
}

// SampleFromJSON reads SampleJSON's output; a field a sample does not have
// is an error. Numbers in its input and metadata stay as written
// (json.Number: encoded again, they read the same), and a list of target
// strings is a []string, as Load leaves it.
func SampleFromJSON(b []byte) (*Sample, error) {
	var w wireSample
	if err := strictJSON(b, &w); err != nil {
		return nil, fmt.Errorf("sample definition: %w", err)
	}
	s := w.Sample
	s.Source, s.Sandbox, s.Timeout, s.ScorerTimeout, s.BuildTimeout, s.Harbor = w.Source, w.Sandbox, w.Timeout, w.ScorerTimeout, w.BuildTimeout, w.Harbor
	if list, ok := s.Target.([]any); ok {
		targets := make([]string, 0, len(list))
		for _, x := range list {
			str, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("sample definition %s: target %v is not a string", s.ID, x)
			}
			targets = append(targets, str)
		}
		s.Target = targets
	}
	return &s, nil
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one value")
	}
	return nil
}

// Sources lists the files: sources the task names (its files and its
// scorer's; a sample's are its own, Sample.Sources), without data URLs,
// which carry their content: sorted, once each.
func (t *Task) Sources() []string { return sources(t.Files, t.Scorer.Files) }

// Sources lists the files: sources the sample names (see Task.Sources).
func (s *Sample) Sources() []string { return sources(s.Files) }

func sources(ms ...map[string]string) []string {
	seen := map[string]bool{}
	for _, m := range ms {
		for _, src := range m {
			if !strings.HasPrefix(src, "data:") {
				seen[src] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for src := range seen {
		out = append(out, src)
	}
	sort.Strings(out)
	return out
}

// Snapshot is the content of the given files: sources as Load read them
// (FileData); a source Load did not read is an error.
func (es *EvalSet) Snapshot(srcs []string) (map[string]SnapshotFile, error) {
	out := make(map[string]SnapshotFile, len(srcs))
	for _, src := range srcs {
		f, ok := es.snap[src]
		if !ok {
			return nil, fmt.Errorf("%s was not read when the eval set was loaded", src)
		}
		out[src] = SnapshotFile{Data: f.data, Mode: f.mode}
	}
	return out, nil
}

// Rebuilt is an eval set put together again in another process from what
// the supervisor's Load read: its file, directory and model, the tasks
// given (with their samples) and the files: sources' content. Nothing is
// read from disk: FileData answers from files.
func Rebuilt(file, dir string, model Model, tasks []*Task, files map[string]SnapshotFile) *EvalSet {
	es := &EvalSet{File: file, Dir: dir, Model: model, Tasks: tasks, snap: make(map[string]snapFile, len(files))}
	for src, f := range files {
		es.snap[src] = snapFile{data: f.Data, mode: f.Mode}
	}
	return es
}
