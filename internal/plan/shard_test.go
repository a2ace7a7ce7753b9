package plan

import "testing"

// shardSet: task a's samples g1 and g2 are a group (one lane); tasks b and
// c share a lease key.
const shardSet = `
tasks:
  - name: a
    sandbox: {provider: local}
    agent: "true"
    scorer: {command: "true"}
    attempts: 2
    groups: [{name: g, samples: [g1, g2]}]
    samples:
      - {id: s1, input: x}
      - {id: s2, input: x}
      - {id: s3, input: x}
      - {id: s4, input: x}
      - {id: g1, input: x}
      - {id: g2, input: x}
  - name: b
    sandbox: {provider: local}
    agent: "true"
    scorer: {command: "true"}
    shared_state: {key: db}
    samples: [{id: t1, input: x}, {id: t2, input: x}]
  - name: c
    sandbox: {provider: local}
    agent: "true"
    scorer: {command: "true"}
    shared_state: {key: db}
    samples: [{id: u1, input: x}]
`

func TestSelectShard(t *testing.T) {
	es := loadSet(t, map[string]string{"steward.yaml": shardSet})
	cases := []struct {
		name string
		n    int
		hist map[string]float64
	}{
		{"two shards, no history", 2, nil},
		{"three shards, no history", 3, nil},
		{"two shards, with history", 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100, "a/s2#1": 1}},
		{"more shards than units", 12, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, es, Options{})
			owner := map[int]int{}
			for i := 1; i <= c.n; i++ {
				for seq := range p.SelectShard(i, c.n, c.hist) {
					if prev, dup := owner[seq]; dup {
						t.Fatalf("attempt %d kept by shards %d and %d", seq, prev, i)
					}
					owner[seq] = i
				}
			}
			if len(owner) != len(p.Attempts) {
				t.Fatalf("%d of %d attempts kept by some shard", len(owner), len(p.Attempts))
			}
			together := func(what string, same func(a, b *Attempt) bool) {
				for _, a := range p.Attempts {
					for _, b := range p.Attempts {
						if same(a, b) && owner[a.Seq] != owner[b.Seq] {
							t.Errorf("%s split: %s/%s#%d in shard %d, %s/%s#%d in shard %d", what,
								p.Tasks[a.Task].Task.Name, a.Sample.ID, a.Number, owner[a.Seq], p.Tasks[b.Task].Task.Name, b.Sample.ID, b.Number, owner[b.Seq])
						}
					}
				}
			}
			together("sample", func(a, b *Attempt) bool { return a.Task == b.Task && a.Sample.ID == b.Sample.ID })
			together("lane", func(a, b *Attempt) bool { return a.Lane != "" && a.Lane == b.Lane })
			together("lease key", func(a, b *Attempt) bool {
				ka, kb := p.Tasks[a.Task].Task.SharedState.Key, p.Tasks[b.Task].Task.SharedState.Key
				return ka != "" && ka == kb
			})
			// Every shard has work while there are at least as many bound units as shards.
			if c.n <= 3 {
				per := map[int]int{}
				for _, sh := range owner {
					per[sh]++
				}
				if len(per) != c.n {
					t.Errorf("shards with work: %v, want %d", per, c.n)
				}
			}
		})
	}
	// Costly history separates: the 200-second sample gets a shard without the other heavy units.
	p := build(t, es, Options{})
	heavy := p.SelectShard(1, 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100})
	other := p.SelectShard(2, 2, map[string]float64{"a/s1#1": 100, "a/s1#2": 100})
	in := func(keep map[int]bool) int {
		for seq := range keep {
			if a := p.Attempts[seq]; p.Tasks[a.Task].Task.Name == "a" && a.Sample.ID == "s1" {
				return 1
			}
		}
		return 0
	}
	if in(heavy)+in(other) != 1 {
		t.Fatalf("s1 in %d shards", in(heavy)+in(other))
	}
	small := heavy
	if in(heavy) == 1 {
		small = other
	}
	if len(small) <= len(p.Attempts)/2 {
		t.Errorf("the shard without the 200-second sample keeps %d of %d attempts; balancing by cost should give it most", len(small), len(p.Attempts))
	}
}
