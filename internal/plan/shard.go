package plan

import (
	"fmt"

	"github.com/steward-evals/steward/internal/shard"
)

// shardKey names a shard unit: one sample of one task (its attempts stay together).
type shardKey struct {
	task   int
	sample string
}

// SelectShard says which attempts (by seq) shard i of n keeps. A sample's
// attempts stay together; group lanes and tasks sharing a lease key never
// split. Units are balanced by expected cost: hist maps "task/sample#n" to
// the seconds its newest run took; attempts without history cost the mean
// (every attempt costs 1 when there is no history at all). Keep keeps them.
func (p *Plan) SelectShard(i, n int, hist map[string]float64) map[int]bool {
	var units []shard.Unit
	unitOf := map[shardKey]int{}
	for _, a := range p.Attempts {
		k := shardKey{a.Task, a.Sample.ID}
		u, ok := unitOf[k]
		if !ok {
			t := p.Tasks[a.Task].Task
			bind := a.Lane
			if t.SharedState.Key != "" {
				bind = "lease:" + t.SharedState.Key
			}
			u = len(units)
			unitOf[k] = u
			units = append(units, shard.Unit{Key: t.Name + "/" + a.Sample.ID, Bind: bind})
		}
		units[u].Cost++
	}
	if len(hist) > 0 {
		var sum float64
		for _, d := range hist {
			sum += d
		}
		mean := sum / float64(len(hist))
		for u := range units {
			units[u].Cost = 0
		}
		for _, a := range p.Attempts {
			d, ok := hist[fmt.Sprintf("%s/%s#%d", p.Tasks[a.Task].Task.Name, a.Sample.ID, a.Number)]
			if !ok {
				d = mean
			}
			units[unitOf[shardKey{a.Task, a.Sample.ID}]].Cost += d
		}
	}
	assign := shard.Assign(units, n)
	keep := map[int]bool{}
	for _, a := range p.Attempts {
		if assign[unitOf[shardKey{a.Task, a.Sample.ID}]] == i-1 {
			keep[a.Seq] = true
		}
	}
	return keep
}
