package plan

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/steward-evals/steward/internal/history"
)

const confirmSet = `
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
    groups:
      - {name: qs, samples: [Q10, q2]}
  - name: one
    sandbox: {provider: local}
    agent: echo b
    samples:
      - {id: x, input: "", target: ""}
      - {id: y, input: "", target: ""}
`

// Confirm numbers each selected sample's new attempts after the highest of
// its planned attempts and the record's highest at its identity, inserts
// them after the sample's attempts (Seqs renumbered in discovery order),
// keeps a group member's attempts consecutive (D3), and AddExtras of what
// it returns rebuilds the same plan (a worker's).
func TestConfirm(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": confirmSet})
	cases := []struct {
		name      string
		n         int
		only      func(task, sample string) bool
		held      map[string]int // task/sample -> the record's highest attempt at its identity
		discovery []string
		dispatch  [2][]string // per task
		extras    []Extra
	}{
		{
			name: "no record: after the planned attempts", n: 1,
			discovery: []string{"g/Q10#1", "g/Q10#2", "g/Q10#3", "g/free#1", "g/free#2", "g/free#3", "g/q2#1", "g/q2#2", "g/q2#3", "one/x#1", "one/x#2", "one/y#1", "one/y#2"},
			dispatch: [2][]string{
				{"g/q2#1", "g/q2#2", "g/q2#3", "g/free#1", "g/free#2", "g/free#3", "g/Q10#1", "g/Q10#2", "g/Q10#3"},
				{"one/x#1", "one/x#2", "one/y#1", "one/y#2"},
			},
			extras: []Extra{{"g", "Q10", 3}, {"g", "free", 3}, {"g", "q2", 3}, {"one", "x", 2}, {"one", "y", 2}},
		},
		{
			name: "after the record's highest, only the selected", n: 2,
			only:      func(task, sample string) bool { return sample == "Q10" || sample == "y" },
			held:      map[string]int{"g/Q10": 7, "one/y": 1, "one/x": 9},
			discovery: []string{"g/Q10#1", "g/Q10#2", "g/Q10#8", "g/Q10#9", "g/free#1", "g/free#2", "g/q2#1", "g/q2#2", "one/x#1", "one/y#1", "one/y#2", "one/y#3"},
			dispatch: [2][]string{
				// The lane's positions (0-3, 6, 7) take its members in
				// order: q2's attempts, then Q10's, consecutive in the lane.
				{"g/q2#1", "g/q2#2", "g/Q10#1", "g/Q10#2", "g/free#1", "g/free#2", "g/Q10#8", "g/Q10#9"},
				{"one/x#1", "one/y#1", "one/y#2", "one/y#3"},
			},
			extras: []Extra{{"g", "Q10", 8}, {"g", "Q10", 9}, {"one", "y", 2}, {"one", "y", 3}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, es, Options{})
			planned := map[string]string{} // id -> fingerprint before
			for _, a := range p.Attempts {
				planned[a.ID(p)] = a.Fingerprint
			}
			asked := map[string]string{}
			got := p.Confirm(c.n, c.only, func(task, sample, identity string) int {
				asked[task+"/"+sample] = identity
				return c.held[task+"/"+sample]
			})
			if !reflect.DeepEqual(got, c.extras) {
				t.Fatalf("extras %v\nwant %v", got, c.extras)
			}
			if d := ids(p, allSeqs(p)); !reflect.DeepEqual(d, c.discovery) {
				t.Fatalf("discovery %v\nwant %v", d, c.discovery)
			}
			for i, a := range p.Attempts {
				if a.Seq != i {
					t.Fatalf("attempt %s has seq %d at %d", a.ID(p), a.Seq, i)
				}
				if fp, ok := planned[a.ID(p)]; ok && fp != a.Fingerprint {
					t.Errorf("planned attempt %s changed its fingerprint", a.ID(p))
				}
				if _, ok := planned[a.ID(p)]; !ok {
					if a.Action != ActionRun || a.Fingerprint != attemptFingerprint(a.Parts, a.Number, p.Tasks[a.Task].Task.Name, a.Sample.ID) || planned[a.ID(p)] != "" {
						t.Errorf("extra %s: action %q fingerprint %s", a.ID(p), a.Action, a.Fingerprint)
					}
					if a.Sample.ID == "Q10" && a.Lane != "g/qs" {
						t.Errorf("extra %s: lane %q, want g/qs", a.ID(p), a.Lane)
					}
				}
			}
			for ti := range p.Tasks {
				if d := ids(p, p.Tasks[ti].Order); !reflect.DeepEqual(d, c.dispatch[ti]) {
					t.Errorf("task %d dispatch %v\nwant %v", ti, d, c.dispatch[ti])
				}
			}
			// The identity asked about is the record's for the sample's parts.
			for _, a := range p.Attempts {
				k := p.Tasks[a.Task].Task.Name + "/" + a.Sample.ID
				if id, ok := asked[k]; ok && id != history.Identity(p.Tasks[a.Task].Task.Name, a.Sample.ID, a.PartsJSON()) {
					t.Errorf("%s: asked about identity %s", k, id)
				}
			}
			// A worker rebuilds the plan and adds the same extras: the same seqs.
			w := build(t, es, Options{})
			if err := w.AddExtras(got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(w, allSeqs(w)), c.discovery) {
				t.Errorf("worker's plan %v", ids(w, allSeqs(w)))
			}
			for i := range w.Attempts {
				if w.Attempts[i].Fingerprint != p.Attempts[i].Fingerprint {
					t.Errorf("worker's %s: another fingerprint", w.Attempts[i].ID(w))
				}
			}
		})
	}
}

// Confirm's attempts carry like any other: a record that judged them
// carries them; the planned ones still carry.
func TestConfirmCarries(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": confirmSet})
	p := build(t, es, Options{TaskGlobs: []string{"one"}, SampleGlobs: []string{"x"}})
	p.Confirm(2, nil, nil)
	h := &fakeHistory{judged: map[string]history.Source{
		p.Attempts[0].Fingerprint: {RunID: "r1", Producer: "r1", Status: "passed"},
		p.Attempts[2].Fingerprint: {RunID: "r1", Producer: "r1", Status: "failed"},
	}}
	if err := Carry(context.Background(), p, h, CarryOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.Attempts {
		got = append(got, a.ID(p)+" "+a.Action)
	}
	if want := []string{"one/x#1 carry", "one/x#2 run", "one/x#3 carry"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
}

func TestAddExtrasRefuses(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": confirmSet})
	for _, c := range []struct {
		extra Extra
		want  string
	}{
		{Extra{"one", "nope", 3}, "no sample nope of task one"},
		{Extra{"nope", "x", 3}, "no sample x of task nope"},
		{Extra{"one", "x", 1}, "already has attempt 1"},
		{Extra{"one", "x", 0}, "not a positive number"},
	} {
		p := build(t, es, Options{})
		before := ids(p, allSeqs(p))
		err := p.AddExtras([]Extra{{"one", "y", 5}, c.extra})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddExtras(%v) = %v, want %q", c.extra, err, c.want)
		}
		if !reflect.DeepEqual(ids(p, allSeqs(p)), before) {
			t.Errorf("AddExtras(%v) changed the plan", c.extra)
		}
	}
	if got := build(t, es, Options{}).Confirm(0, nil, nil); got != nil {
		t.Errorf("Confirm(0) = %v", got)
	}
}
