package sched

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The scheduler's overhead per attempt (issue 2): 100 000 no-op attempts
// through the Dispatcher (budget 64, several tasks with setpoints that add up
// to more than the budget, so both gates of C1 work) next to a bare
// goroutine-and-channel baseline (a semaphore channel of 64) in the same run.
// Each side starts a goroutine per attempt that does nothing but finish, so
// the difference is what the scheduler's decisions and locking cost.

const (
	benchAttempts = 100_000
	benchBudget   = 64
	benchTasks    = 8
)

// measure runs f once and returns its wall time and the bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc
}

func runDispatcher(tb testing.TB) {
	items := make([]Item, benchAttempts)
	for i := range items {
		items[i] = Item{ID: i, Task: i % benchTasks}
	}
	st, err := New(items, benchTasks, nil)
	if err != nil {
		tb.Fatal(err)
	}
	st.SetBudget(benchBudget)
	for t := 0; t < benchTasks; t++ {
		st.SetReady(t, true)
		st.SetCap(t, 2*benchBudget/benchTasks)
	}
	d := NewDispatcher(st)
	// inflight counts attempts between admission and Finish: it must never
	// exceed the budget (the start callback runs on the loop's goroutine, so
	// maxExec needs no lock).
	var inflight atomic.Int64
	var maxExec int64
	err = d.Run(context.Background(), func(it Item) {
		if e := inflight.Add(1); e > maxExec {
			maxExec = e
		}
		go func() {
			inflight.Add(-1)
			if err := d.Finish(it.ID); err != nil {
				panic(err)
			}
		}()
	})
	if err != nil {
		tb.Fatal(err)
	}
	if c := st.Counts(); c[Done] != benchAttempts {
		tb.Fatalf("done %d of %d", c[Done], benchAttempts)
	}
	if maxExec > benchBudget {
		tb.Fatalf("budget exceeded: %d executing", maxExec)
	}
}

func runBaseline(tb testing.TB) {
	sem := make(chan struct{}, benchBudget)
	var wg sync.WaitGroup
	var done int64
	var mu sync.Mutex
	for i := 0; i < benchAttempts; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			mu.Lock()
			done++
			mu.Unlock()
			<-sem
			wg.Done()
		}()
	}
	wg.Wait()
	if done != benchAttempts {
		tb.Fatalf("done %d of %d", done, benchAttempts)
	}
}

func BenchmarkSchedulerOverhead(b *testing.B) {
	var sNs, bNs, sB, bB float64
	for i := 0; i < b.N; i++ {
		d, m := measure(func() { runDispatcher(b) })
		sNs += float64(d.Nanoseconds())
		sB += float64(m)
		d, m = measure(func() { runBaseline(b) })
		bNs += float64(d.Nanoseconds())
		bB += float64(m)
	}
	n := float64(b.N) * benchAttempts
	b.ReportMetric(sNs/n, "ns/attempt")
	b.ReportMetric(sB/n, "B/attempt")
	b.ReportMetric(bNs/n, "baseline-ns/attempt")
	b.ReportMetric(bB/n, "baseline-B/attempt")
	b.ReportMetric(sNs/bNs, "time-ratio")
	b.ReportMetric(sB/bB, "mem-ratio")
}

// The benchmark's workloads are also checked as a test, so a broken
// dispatcher fails `go test`, not only `make bench`.
func TestSchedulerOverheadWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	runDispatcher(t)
	runBaseline(t)
}
