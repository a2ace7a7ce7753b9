package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/evalset"
	"github.com/steward-evals/steward/internal/history"
	"github.com/steward-evals/steward/internal/status"
)

// loadSet writes files (steward.yaml among them) into a fresh directory and loads the eval set.
func loadSet(t *testing.T, files map[string]string) *evalset.EvalSet {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	es, err := evalset.Load(filepath.Join(dir, "steward.yaml"), evalset.LoadOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return es
}

func build(t *testing.T, es *evalset.EvalSet, o Options) *Plan {
	t.Helper()
	p, err := Build(es, o)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return p
}

// ids lists the plan's attempts as task/sample#n in the order given.
func ids(p *Plan, seqs []int) []string {
	var out []string
	for _, s := range seqs {
		out = append(out, p.Attempts[s].ID(p))
	}
	return out
}

func allSeqs(p *Plan) []int {
	var out []int
	for _, a := range p.Attempts {
		out = append(out, a.Seq)
	}
	return out
}

const twoTasks = `
tasks:
  - name: first
    sandbox: {provider: local}
    agent: echo a
    attempts: 2
    samples:
      - {id: s2, input: "2", target: "2"}
      - {id: s10, input: "10", target: "10"}
      - {id: s1, input: "1", target: "1"}
  - name: second
    sandbox: {provider: local}
    agent: echo b
    samples:
      - {id: x, input: "x", target: "x"}
`

// Discovery order (C8): tasks in file order, samples in file order (not
// sorted), attempts numbered from 1 consecutively; seqs are positions.
func TestDiscoveryOrder(t *testing.T) {
	p := build(t, loadSet(t, map[string]string{"steward.yaml": twoTasks}), Options{})
	want := []string{"first/s2#1", "first/s2#2", "first/s10#1", "first/s10#2", "first/s1#1", "first/s1#2", "second/x#1"}
	if got := ids(p, allSeqs(p)); !reflect.DeepEqual(got, want) {
		t.Fatalf("attempts %v\nwant %v", got, want)
	}
	for i, a := range p.Attempts {
		if a.Seq != i || a.Action != ActionRun || a.Reason != "new" || a.Lane != "" {
			t.Errorf("attempt %d: seq %d action %q reason %q lane %q", i, a.Seq, a.Action, a.Reason, a.Lane)
		}
	}
	if got := ids(p, p.Tasks[0].Order); !reflect.DeepEqual(got, want[:6]) {
		t.Errorf("first's dispatch order %v", got)
	}
	if p.Tasks[1].Index != 1 || !reflect.DeepEqual(p.Tasks[1].Order, []int{6}) {
		t.Errorf("second: index %d order %v", p.Tasks[1].Index, p.Tasks[1].Order)
	}
}

// Group lanes (D3): members of a group share the lane task/group and run
// in normalised-id order (digits as numbers) in the positions the lane
// holds, a member's attempts consecutive; ungrouped samples keep their
// place and have no lane.
func TestGroupLanes(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": `
tasks:
  - name: g
    sandbox: {provider: local}
    agent: echo a
    sandbox_reuse: true
    attempts: 2
    samples:
      - {id: Q10, input: "", target: ""}
      - {id: free, input: "", target: ""}
      - {id: q2, input: "", target: ""}
      - {id: other, input: "", target: ""}
    groups:
      - {name: qs, samples: [Q10, q2]}
      - {name: solo, samples: [other]}
`})
	p := build(t, es, Options{})
	lanes := map[string]string{}
	for _, a := range p.Attempts {
		lanes[a.Sample.ID] = a.Lane
	}
	wantLanes := map[string]string{"Q10": "g/qs", "q2": "g/qs", "free": "", "other": "g/solo"}
	if !reflect.DeepEqual(lanes, wantLanes) {
		t.Fatalf("lanes %v, want %v", lanes, wantLanes)
	}
	// Discovery order is untouched; the dispatch order puts q2 before Q10
	// in the positions the qs lane held (0, 1, 4, 5).
	if got := ids(p, allSeqs(p)); got[0] != "g/Q10#1" || got[4] != "g/q2#1" {
		t.Fatalf("discovery order changed: %v", got)
	}
	want := []string{"g/q2#1", "g/q2#2", "g/free#1", "g/free#2", "g/Q10#1", "g/Q10#2", "g/other#1", "g/other#2"}
	if got := ids(p, p.Tasks[0].Order); !reflect.DeepEqual(got, want) {
		t.Fatalf("dispatch order %v\nwant %v", got, want)
	}
}

// --task and --sample globs (path.Match; any match keeps) select attempts;
// seqs stay dense; a malformed glob is an error naming it.
func TestFilterGlobs(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": twoTasks})
	cases := []struct {
		name           string
		tasks, samples []string
		want           []string
		err            string
	}{
		{name: "none keeps all", want: []string{"first/s2#1", "first/s2#2", "first/s10#1", "first/s10#2", "first/s1#1", "first/s1#2", "second/x#1"}},
		{name: "task exact", tasks: []string{"second"}, want: []string{"second/x#1"}},
		{name: "task glob", tasks: []string{"f*"}, samples: []string{"s1*"}, want: []string{"first/s10#1", "first/s10#2", "first/s1#1", "first/s1#2"}},
		{name: "any of several", samples: []string{"s2", "x"}, want: []string{"first/s2#1", "first/s2#2", "second/x#1"}},
		{name: "character class", samples: []string{"s[12]"}, want: []string{"first/s2#1", "first/s2#2", "first/s1#1", "first/s1#2"}},
		{name: "glob is not a substring", samples: []string{"s"}, want: nil},
		{name: "no task matches", tasks: []string{"third"}, want: nil},
		{name: "bad task glob", tasks: []string{"[f"}, err: `bad filter glob "[f"`},
		{name: "bad sample glob", samples: []string{"ok", "s\\"}, err: `bad filter glob "s\\"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Build(es, Options{TaskGlobs: c.tasks, SampleGlobs: c.samples})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p, allSeqs(p)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("attempts %v, want %v", got, c.want)
			}
			for i, a := range p.Attempts {
				if a.Seq != i {
					t.Errorf("seq %d at position %d", a.Seq, i)
				}
			}
		})
	}
}

// Each fingerprint part changes with what it names and nothing else; the
// attempt number and the sample's identity are in the fingerprint but in
// no part.
func TestFingerprintParts(t *testing.T) {
	base := map[string]string{
		"steward.yaml": `
model: {upstream: mock, name: mock-1}
tasks:
  - name: t
    sandbox: {provider: local}
    agent: echo a
    inputs: [data.txt]
    attempts: 2
    samples:
      - {id: a, input: "one", target: "1"}
      - {id: b, input: "two", target: "2"}
`,
		"data.txt": "v1",
	}
	with := func(edit func(m map[string]string)) *Plan {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		edit(m)
		return build(t, loadSet(t, m), Options{})
	}
	ref := with(func(map[string]string) {})
	if ref.Attempts[0].Fingerprint == ref.Attempts[1].Fingerprint {
		t.Fatal("attempts 1 and 2 share a fingerprint")
	}
	if !reflect.DeepEqual(ref.Attempts[0].Parts, ref.Attempts[1].Parts) {
		t.Fatal("the attempt number is in a part")
	}
	if got := keys(ref.Attempts[0].Parts); !reflect.DeepEqual(got, []string{"image", "inputs", "model", "sample", "task"}) {
		t.Fatalf("parts %v", got)
	}
	cases := []struct {
		name    string
		edit    func(m map[string]string)
		changed []string // parts of attempt a#1 that change
	}{
		{"nothing", func(map[string]string) {}, nil},
		{"sample input", func(m map[string]string) {
			m["steward.yaml"] = strings.Replace(m["steward.yaml"], `input: "one"`, `input: "uno"`, 1)
		}, []string{"sample"}},
		{"sample target", func(m map[string]string) {
			m["steward.yaml"] = strings.Replace(m["steward.yaml"], `target: "1"`, `target: "one"`, 1)
		}, []string{"sample"}},
		{"agent", func(m map[string]string) {
			m["steward.yaml"] = strings.Replace(m["steward.yaml"], "agent: echo a", "agent: echo b", 1)
		}, []string{"task"}},
		{"input file", func(m map[string]string) { m["data.txt"] = "v2" }, []string{"inputs"}},
		{"model", func(m map[string]string) {
			m["steward.yaml"] = strings.Replace(m["steward.yaml"], "name: mock-1", "name: mock-2", 1)
		}, []string{"model"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := with(c.edit)
			var changed []string
			for _, k := range keys(ref.Attempts[0].Parts) {
				if p.Attempts[0].Parts[k] != ref.Attempts[0].Parts[k] {
					changed = append(changed, k)
				}
			}
			if !reflect.DeepEqual(changed, c.changed) {
				t.Fatalf("changed parts %v, want %v", changed, c.changed)
			}
			if (p.Attempts[0].Fingerprint != ref.Attempts[0].Fingerprint) != (len(c.changed) > 0) {
				t.Fatalf("fingerprint changed: %v, parts changed %v", p.Attempts[0].Fingerprint != ref.Attempts[0].Fingerprint, c.changed)
			}
			// Sample b is untouched by a's sample edits.
			if c.changed != nil && c.changed[0] == "sample" && p.Attempts[2].Fingerprint != ref.Attempts[2].Fingerprint {
				t.Fatal("editing sample a changed sample b's fingerprint")
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fakeHistory is a History holding judged rows by fingerprint and the newest
// row per key; it checks that Carry asks about every attempt.
type fakeHistory struct {
	judged    map[string]history.Source
	earlyExit map[string]history.Source
	latest    map[history.Key]history.Previous
	err       error
	asked     struct {
		fps                  []string
		passedOnly, earlyExt bool
		keys                 []history.Key
	}
}

func (h *fakeHistory) Carryable(ctx context.Context, fps []string, passedOnly, earlyExit bool) (history.Candidates, error) {
	h.asked.fps, h.asked.passedOnly, h.asked.earlyExt = fps, passedOnly, earlyExit
	if h.err != nil {
		return history.Candidates{}, h.err
	}
	c := history.Candidates{Judged: map[string]history.Source{}, EarlyExit: map[string]history.Source{}}
	for _, fp := range fps {
		if s, ok := h.judged[fp]; ok && (!passedOnly || s.Status == "passed") {
			c.Judged[fp] = s
		}
		if s, ok := h.earlyExit[fp]; ok && earlyExit {
			c.EarlyExit[fp] = s
		}
	}
	return c, nil
}

func (h *fakeHistory) LatestMany(ctx context.Context, keys []history.Key) (map[history.Key]history.Previous, error) {
	h.asked.keys = keys
	out := map[history.Key]history.Previous{}
	for _, k := range keys {
		if p, ok := h.latest[k]; ok {
			out[k] = p
		}
	}
	return out, nil
}

// Carry decisions and the reasons the others run, one attempt at a time.
func TestCarryDecisions(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": `
tasks:
  - name: t
    sandbox: {provider: local}
    agent: echo a
    samples:
      - {id: a, input: "", target: ""}
`})
	p0 := build(t, es, Options{})
	a := p0.Attempts[0]
	key := history.Key{Task: "t", Sample: "a", Attempt: 1}
	src := func(st string) history.Source {
		return history.Source{RunID: "r1", Seq: 0, Producer: "r0", Status: status.Attempt(st), Fingerprint: a.Fingerprint}
	}
	same := func(st string) history.Previous {
		return history.Previous{Status: status.Attempt(st), Fingerprint: a.Fingerprint, Parts: a.PartsJSON()}
	}
	changed := func(parts ...string) history.Previous {
		old := map[string]string{}
		for k, v := range a.Parts {
			old[k] = v
		}
		for _, k := range parts {
			old[k] = "old-" + k
		}
		b, _ := jsonMarshal(old)
		return history.Previous{Status: "passed", Fingerprint: "other", Parts: b}
	}
	cases := []struct {
		name       string
		h          *fakeHistory
		rerun      bool
		wantAction string
		wantReason string
		wantFrom   string
	}{
		{"no row: new", &fakeHistory{}, false, ActionRun, "new", ""},
		{"passed carried", &fakeHistory{judged: map[string]history.Source{a.Fingerprint: src("passed")}}, false, ActionCarry, "carried passed from r0", "r0"},
		{"failed carried", &fakeHistory{judged: map[string]history.Source{a.Fingerprint: src("failed")}}, false, ActionCarry, "carried failed from r0", "r0"},
		{"rerun runs a failure", &fakeHistory{judged: map[string]history.Source{a.Fingerprint: src("failed")}, latest: map[history.Key]history.Previous{key: same("failed")}}, true, ActionRun, "rerun: previous attempt failed", ""},
		{"rerun still carries a pass", &fakeHistory{judged: map[string]history.Source{a.Fingerprint: src("passed")}}, true, ActionCarry, "carried passed from r0", "r0"},
		{"errored runs", &fakeHistory{latest: map[history.Key]history.Previous{key: same("errored")}}, false, ActionRun, "previous attempt errored", ""},
		{"infra runs as errored", &fakeHistory{latest: map[history.Key]history.Previous{key: same("infra")}}, false, ActionRun, "previous attempt errored", ""},
		{"interrupted runs", &fakeHistory{latest: map[history.Key]history.Previous{key: same("interrupted")}}, false, ActionRun, "previous attempt interrupted", ""},
		{"skipped runs", &fakeHistory{latest: map[history.Key]history.Previous{key: same("skipped")}}, false, ActionRun, "previous attempt skipped", ""},
		{"sample changed", &fakeHistory{latest: map[history.Key]history.Previous{key: changed("sample")}}, false, ActionRun, "sample changed", ""},
		{"two parts, sorted", &fakeHistory{latest: map[history.Key]history.Previous{key: changed("task", "model")}}, false, ActionRun, "model settings changed, task config changed", ""},
		{"image changed", &fakeHistory{latest: map[history.Key]history.Previous{key: changed("image")}}, false, ActionRun, "image changed", ""},
		{"input file changed", &fakeHistory{latest: map[history.Key]history.Previous{key: changed("inputs")}}, false, ActionRun, "input file changed", ""},
		{"unreadable parts", &fakeHistory{latest: map[history.Key]history.Previous{key: {Status: "passed", Fingerprint: "x", Parts: "not json"}}}, false, ActionRun, "fingerprint changed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, es, Options{})
			if err := Carry(context.Background(), p, c.h, CarryOptions{Rerun: c.rerun}); err != nil {
				t.Fatal(err)
			}
			got := p.Attempts[0]
			if got.Action != c.wantAction || got.Reason != c.wantReason || got.CarriedFrom != c.wantFrom {
				t.Fatalf("action %q reason %q from %q; want %q %q %q", got.Action, got.Reason, got.CarriedFrom, c.wantAction, c.wantReason, c.wantFrom)
			}
			if c.h.asked.passedOnly != c.rerun || !reflect.DeepEqual(c.h.asked.fps, []string{a.Fingerprint}) {
				t.Errorf("asked Carryable(%v, passedOnly=%v)", c.h.asked.fps, c.h.asked.passedOnly)
			}
			if c.wantAction == ActionCarry && c.h.asked.keys != nil {
				t.Errorf("asked the newest rows of carried attempts: %v", c.h.asked.keys)
			}
		})
	}
}

// Early exit (S4): once a sample's pass is carried, its other attempts are
// skipped, referring to the pass (and to the skip an earlier run recorded,
// when there is one); other samples run as usual. Without early exit they run.
func TestCarryEarlyExit(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": `
tasks:
  - name: t
    sandbox: {provider: local}
    agent: echo a
    attempts: 3
    samples:
      - {id: a, input: "", target: ""}
      - {id: b, input: "", target: ""}
`})
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("early exit ", early), func(t *testing.T) {
			p := build(t, es, Options{})
			a2, a3 := p.Attempts[1], p.Attempts[2]
			h := &fakeHistory{
				judged:    map[string]history.Source{a2.Fingerprint: {RunID: "r1", Seq: 1, Producer: "r1", Status: "passed"}},
				earlyExit: map[string]history.Source{a3.Fingerprint: {RunID: "r1", Seq: 2, Producer: "r1", Status: "skipped"}},
			}
			if err := Carry(context.Background(), p, h, CarryOptions{EarlyExit: early}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range p.Attempts {
				got = append(got, a.Action+":"+a.CarriedFrom)
			}
			want := []string{"run:", "carry:r1", "run:", "run:", "run:", "run:"}
			if early {
				want = []string{"skip:", "carry:r1", "skip:r1", "run:", "run:", "run:"}
				if !strings.HasPrefix(p.Attempts[0].Reason, history.EarlyExitPrefix+": attempt 2 passed (carried from r1)") {
					t.Errorf("skip reason %q", p.Attempts[0].Reason)
				}
				if p.Attempts[2].From.Seq != 2 {
					t.Errorf("the skip refers to %+v, want the recorded skip (seq 2)", p.Attempts[2].From)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decisions %v, want %v", got, want)
			}
			if h.asked.earlyExt != early {
				t.Errorf("Carryable asked with earlyExit %v", h.asked.earlyExt)
			}
		})
	}
}

// A nil fakeHistory carries nothing; a fakeHistory's error is returned.
func TestCarryWithoutOrFailingHistory(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": twoTasks})
	p := build(t, es, Options{})
	if err := Carry(context.Background(), p, nil, CarryOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Attempts {
		if a.Action != ActionRun || a.Reason != "new" {
			t.Fatalf("%s: %s %s", a.ID(p), a.Action, a.Reason)
		}
	}
	boom := errors.New("disk on fire")
	if err := Carry(context.Background(), p, &fakeHistory{err: boom}, CarryOptions{}); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
