package ramp

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/steward-evals/steward/internal/sched"
)

// TestSchedulerAndRampProperty drives the scheduler and the ramp together
// as the supervisor does: random tasks (ramped or max_samples), tasks that
// wait (lease, max_tasks, host setup) and become ready, sandboxes that come
// up later, any number of concurrent backoffs per attempt, budget changes,
// range changes and tends with random provider signals, the task signals
// read from the scheduler like the tend loop reads them. After every event
// it checks:
//   - the setpoints never add up to more than the budget;
//   - a task that cannot run (waiting, finished) holds no setpoint;
//   - no idle budget slot while a ready task below its cap has queued work;
//   - no attempt is admitted above its task's cap or setpoint;
//   - starting + running = admitted.
func TestSchedulerAndRampProperty(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { propertyRun(t, seed) })
	}
}

type pev struct {
	at, id, kind int // kind: 0 finish, 1 backoff, 2 resume, 3 sandbox up
}

func propertyRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	nt := 1 + r.IntN(12)
	n := 200 + r.IntN(800)
	items := make([]sched.Item, n)
	for i := range items {
		items[i] = sched.Item{ID: i, Task: r.IntN(nt)}
	}
	st, err := sched.New(items, nt, nil)
	if err != nil {
		t.Fatal(err)
	}
	budget := 1 + r.IntN(30)
	st.SetBudget(budget)
	specs := make([]TaskSpec, nt)
	for i := range specs {
		specs[i].Name = fmt.Sprint("t", i)
		if r.IntN(4) == 0 {
			specs[i].MaxSamples = 1 + r.IntN(10)
		}
	}
	rng := Range{true, 1 + r.IntN(5), 10 + r.IntN(30)}
	if r.IntN(5) == 0 {
		rng = Range{}
	}
	ctl, err := New(Config{Range: rng, Step: 1 + r.IntN(5), Budget: budget}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range ctl.Setpoints() {
		st.SetCap(i, c)
		st.SetReady(i, r.IntN(3) != 0)
	}
	var q []pev
	push := func(e pev) { q = append(q, e) }
	pop := func() pev { // the earliest event, ties by id
		best := 0
		for i, e := range q {
			if e.at < q[best].at || (e.at == q[best].at && e.id < q[best].id) {
				best = i
			}
		}
		e := q[best]
		q = append(q[:best], q[best+1:]...)
		return e
	}
	now := 0
	inBackoff := map[int]int{}
	sat := make([]bool, nt)
	bound := make([]bool, nt)
	check := func(settled bool) {
		t.Helper()
		lim, used := st.Budget()
		sum := 0
		for i := range nt {
			sp := st.Setpoint(i)
			sum += sp
			lv := st.TaskLive(i)
			_, adm := st.TaskCounts(i)
			if (!st.Ready(i) || st.TaskFinished(i)) && sp != 0 {
				t.Fatalf("task %d holds setpoint %d while it cannot run", i, sp)
			}
			if lv.Starting+lv.Running != adm {
				t.Fatalf("task %d: starting %d + running %d != admitted %d", i, lv.Starting, lv.Running, adm)
			}
			// What the tend loop samples within a window.
			if lv.Queued > 0 && st.Ready(i) {
				switch cp := st.Cap(i); {
				case cp > 0 && lv.Running >= cp:
					sat[i] = true
				case sp < cp && lv.Units >= sp && lv.Running >= lv.Units:
					bound[i] = true
				}
			}
			if settled && (lim == 0 || used < lim) && st.Ready(i) && lv.Queued > 0 && adm < st.Cap(i) {
				t.Fatalf("idle slot (%d of %d used) while ready task %d (cap %d, admitted %d, setpoint %d) has %d queued",
					used, lim, i, st.Cap(i), adm, sp, lv.Queued)
			}
		}
		if lim > 0 && sum > lim {
			t.Fatalf("setpoints add up to %d, over the budget %d", sum, lim)
		}
	}
	fill := func() {
		for {
			d, ok := st.Next()
			if !ok {
				check(true)
				return
			}
			if d.Resume {
				continue
			}
			ti := items[d.ID].Task
			lv := st.TaskLive(ti)
			if _, adm := st.TaskCounts(ti); adm > st.Cap(ti) || lv.Units > st.Setpoint(ti) {
				t.Fatalf("task %d admitted %d (slots %d) above its cap %d or setpoint %d", ti, adm, lv.Units, st.Cap(ti), st.Setpoint(ti))
			}
			push(pev{now + r.IntN(3), d.ID, 3})
			if r.IntN(4) == 0 {
				for k := 1 + r.IntN(3); k > 0; k-- {
					push(pev{now + r.IntN(4), d.ID, 1})
				}
			}
			push(pev{now + 5 + r.IntN(20), d.ID, 0})
			check(false)
		}
	}
	clk := time.Unix(0, 0)
	fill()
	for step := 0; !st.Finished(); step++ {
		if step > 100*n {
			t.Fatal("no progress")
		}
		switch r.IntN(10) {
		case 0: // a tend
			ts := make([]TaskSignals, nt)
			for i := range ts {
				ts[i] = TaskSignals{Saturated: sat[i], BudgetBound: bound[i] && !sat[i], Errored: max(0, r.IntN(8)-6)}
				sat[i], bound[i] = false, false
			}
			clk = clk.Add(time.Second)
			d := ctl.Tend(clk, Signals{Pushback: r.IntN(4) == 0, Requests: r.IntN(100), Retries: r.IntN(8), ConnLimit: 1 + r.IntN(40)}, ts)
			for i, c := range d.Setpoints {
				if budget > 0 && specs[i].MaxSamples == 0 && c > budget {
					t.Fatalf("ramp setpoint %d above the budget %d", c, budget)
				}
				st.SetCap(i, c)
			}
		case 1:
			st.SetReady(r.IntN(nt), true)
		case 2:
			st.SetBudget(1 + r.IntN(30))
		case 3:
			if r.IntN(10) == 0 {
				lo := 1 + r.IntN(5)
				_ = ctl.SetRange(Range{true, lo, lo + r.IntN(30)})
			}
		}
		check(false)
		if len(q) == 0 {
			for i := range nt {
				st.SetReady(i, true)
			}
			fill()
			if len(q) == 0 && !st.Finished() {
				t.Fatalf("stuck: %v", st.Counts())
			}
			continue
		}
		e := pop()
		now = e.at
		switch e.kind {
		case 0:
			if inBackoff[e.id] > 0 {
				push(pev{now + 1, e.id, 0})
				continue
			}
			if err := st.Finish(e.id); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := st.Backoff(e.id); err != nil {
				continue // finished already
			}
			inBackoff[e.id]++
			push(pev{now + 1 + r.IntN(4), e.id, 2})
		case 2:
			if _, err := st.Resume(e.id); err != nil {
				t.Fatal(err)
			}
			inBackoff[e.id]--
		case 3:
			st.MarkStarted(e.id)
		}
		check(false)
		fill()
	}
}
