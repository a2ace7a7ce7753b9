package shard

import (
	"fmt"
	"testing"
)

// 100 000 attempts, one in ten bound to a group, balanced over 8 shards.
func BenchmarkAssign100k(b *testing.B) {
	units := make([]Unit, 100_000)
	for i := range units {
		units[i] = Unit{Key: fmt.Sprintf("task%03d/s%06d", i%300, i), Cost: float64(1 + i%17)}
		if i%10 == 0 {
			units[i].Bind = fmt.Sprintf("group%d", i%1000)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		Assign(units, 8)
	}
}
